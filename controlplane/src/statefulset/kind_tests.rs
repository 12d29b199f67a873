//! The thin layer's pure parts: the executor builds a StatefulSet's pods by ordinal (and
//! creates none a selector naming a label the controller sets would not select), and a
//! revision records the template alone and reads back.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PersistentVolumeClaim, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::*;
use crate::api::{StatefulSetSpec, StatefulSetStatus};
use crate::controller::status_patch::status_merge_patch;
use crate::pod_set::pods::SetPods;
use crate::statefulset::ordinals::{POD_INDEX_LABEL, POD_NAME_LABEL};
use crate::workload::execute::recording::{
    RecordingWrites, assert_owned_labels_refused, create_in_one_sync, created_pods,
    selector_and_template,
};
use crate::workload::execute::{NewPods as _, Problems};
use crate::workload::history::new_revision;
use crate::workload::lifecycle::STATE_LABEL;
use crate::workload::revision::{
    CONTROLLER_REVISION_HASH_LABEL, POD_TEMPLATE_HASH_LABEL, REVISION_HASH_LABEL,
};
use crate::workload::revision_spec::RevisionSpec;

fn template(image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "nginx".to_owned(),
                image: Some(image.to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    }
}

fn web() -> StatefulSet {
    let mut set = StatefulSet::new(
        "web",
        StatefulSetSpec {
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
                ..LabelSelector::default()
            },
            template: template("nginx:1"),
            volume_claim_templates: vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some("www".to_owned()),
                    ..ObjectMeta::default()
                },
                ..PersistentVolumeClaim::default()
            }],
            ..StatefulSetSpec::default()
        },
    );
    set.metadata.namespace = Some("default".to_owned());
    set.metadata.uid = Some("web-uid".to_owned());
    set
}

fn create(ordinal: &str, revision: &str) -> Create {
    Create {
        instance_id: ordinal.to_owned(),
        revision: revision.to_owned(),
    }
}

#[test]
fn the_executor_gets_the_pod_of_an_ordinal_with_its_claims_first() {
    let set = web();
    let templates = BTreeMap::from([("web-aaa".to_owned(), template("nginx:1"))]);
    let planned = StatefulSetPlan::default();
    let pods = SetPods::<StatefulSetKind> {
        set: &set,
        workload: &set,
        revisions: &templates,
        planned: &planned,
    };
    let built = pods.new_pod(&create("2", "web-aaa")).expect("a pod");
    assert_eq!(built.pod.metadata.name.as_deref(), Some("web-2"));
    let claims: Vec<Option<&str>> = built
        .claims
        .iter()
        .map(|c| c.metadata.name.as_deref())
        .collect();
    assert_eq!(claims, [Some("www-web-2")]);
    assert!(pods.new_pod(&create("2", "web-gone")).is_none());
    assert!(
        pods.new_pod(&create("", "web-aaa")).is_none(),
        "no nameless pods"
    );
}

#[test]
fn a_revision_records_the_template_and_reads_it_back() {
    let set = web();
    let spec = StatefulSetKind::revision_spec(&set);
    assert!(spec.volume_claim_templates.is_empty(), "{spec:#?}");
    let data = spec.to_data().expect("serializes");
    let read = RevisionSpec::from_data(&data).expect("reads back");
    assert_eq!(read.template, set.spec.template);

    let revision = new_revision(&set, "web-abc", "abc", 3, data).expect("a revision");
    let labels = revision.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(REVISION_HASH_LABEL).map(String::as_str),
        Some("abc")
    );
    assert_eq!(labels.get("app").map(String::as_str), Some("web"));
    let owners = revision.metadata.owner_references.unwrap_or_default();
    assert_eq!(owners[0].kind, "StatefulSet");
    assert_eq!(owners[0].api_version, "apps.kruise.io/v1beta1");
    assert_eq!(revision.revision, 3);
}

#[test]
fn a_status_without_conditions_clears_them() {
    let with_one = StatefulSetStatus {
        conditions: vec![crate::api::statefulset::StatefulSetCondition {
            type_: "WaitingForPod".to_owned(),
            status: "True".to_owned(),
            ..Default::default()
        }],
        ..StatefulSetStatus::default()
    };
    let patch = status_merge_patch(Some(&with_one), &StatefulSetStatus::default());
    assert_eq!(patch["status"]["conditions"], serde_json::Value::Null);
    let patch = status_merge_patch(None, &with_one);
    assert_eq!(patch["status"]["conditions"][0]["type"], "WaitingForPod");
}

/// One sync creating ordinals 0, 1 and 2 of a set whose selector and template both say
/// `app=web` and `owned=abc`.
async fn create_three(owned: Option<&str>) -> (RecordingWrites, Problems) {
    let (selector, template) = selector_and_template(owned);
    let mut set = web();
    set.spec.selector = selector;
    set.spec.template = template.clone();
    let templates = BTreeMap::from([("web-5d8f9c".to_owned(), template)]);
    let planned = StatefulSetPlan::default();
    let pods = SetPods::<StatefulSetKind> {
        set: &set,
        workload: &set,
        revisions: &templates,
        planned: &planned,
    };
    let creates = ["0", "1", "2"]
        .map(|ordinal| create(ordinal, "web-5d8f9c"))
        .into();
    create_in_one_sync(&pods, creates).await
}

#[tokio::test(start_paused = true)]
async fn a_selector_naming_a_label_the_controller_sets_creates_no_pod_or_claim() {
    let owned = [
        (POD_NAME_LABEL, "web-0"),
        (POD_INDEX_LABEL, "0"),
        (CONTROLLER_REVISION_HASH_LABEL, "web-5d8f9c"),
        (POD_TEMPLATE_HASH_LABEL, "5d8f9c"),
        (STATE_LABEL, "PreparingNormal"),
    ];
    assert_owned_labels_refused(&owned, create_three).await;
}

#[tokio::test(start_paused = true)]
async fn a_selector_of_template_labels_creates_every_ordinal() {
    let (writes, problems) = create_three(None).await;
    assert_eq!(problems.scale, None);
    assert_eq!(created_pods(&writes), ["web-0", "web-1", "web-2"]);
}

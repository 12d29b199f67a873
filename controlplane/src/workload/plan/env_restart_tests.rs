//! Env read from pod metadata in the shared planning, over the toy workload: a template
//! change of only a label that the container's env reads starts an in-place update that
//! patches the label, and the next sync asks the node's agent to restart the container
//! and records that it asked.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::toy_tests::{V1, V2, running_pod, sync, template, toy};
use crate::api::common::PodUpdatePolicy;
use crate::workload::actions::ChangeReason;
use crate::workload::inplace::{InPlaceUpdateState, STATE_ANNOTATION};

fn tier_env() -> Vec<EnvVar> {
    vec![EnvVar {
        name: "TIER".to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "metadata.labels['tier']".to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
    }]
}

fn tiered(tier: &str) -> PodTemplateSpec {
    let mut t = template("toy:v1", None);
    t.metadata = Some(ObjectMeta {
        labels: Some(BTreeMap::from([("tier".to_owned(), tier.to_owned())])),
        ..ObjectMeta::default()
    });
    t.spec.get_or_insert_default().containers[0].env = Some(tier_env());
    t
}

fn front_pod() -> Pod {
    let toy = toy(1, PodUpdatePolicy::InPlaceIfPossible);
    let mut pod = running_pod(&toy, 0, V1, "toy:v1");
    pod.metadata
        .labels
        .get_or_insert_default()
        .insert("tier".into(), "front".into());
    pod.spec.get_or_insert_default().containers[0].env = Some(tier_env());
    pod.metadata.resource_version = Some("7".into());
    pod
}

#[test]
fn a_label_read_by_env_is_patched_then_the_agent_restarts_the_container() {
    let toy = toy(1, PodUpdatePolicy::InPlaceIfPossible);
    let revisions = BTreeMap::from([
        (V1.to_owned(), tiered("front")),
        (V2.to_owned(), tiered("back")),
    ]);
    let plan = sync(&toy, &[front_pod()], &revisions);
    assert!(plan.deletes.is_empty(), "{plan:?}");
    let start = &plan.pod_changes[0];
    assert_eq!(start.reason, ChangeReason::InPlaceStart);
    assert!(
        start.agent_restarts.is_empty(),
        "not before the label landed"
    );
    let patch = start.patch.clone().expect("a patch");
    assert_eq!(patch["metadata"]["labels"]["tier"], "back");
    assert!(
        patch.pointer("/spec/containers").is_none(),
        "no image changes"
    );
    let state = patch["metadata"]["annotations"][STATE_ANNOTATION]
        .as_str()
        .expect("a state")
        .to_owned();

    // The pod as the apiserver returns it after the start.
    let mut pod = front_pod();
    let labels = pod.metadata.labels.get_or_insert_default();
    for (k, v) in patch["metadata"]["labels"].as_object().expect("labels") {
        labels.insert(k.clone(), v.as_str().unwrap_or_default().to_owned());
    }
    pod.metadata.annotations = Some(BTreeMap::from([(STATE_ANNOTATION.to_owned(), state)]));
    let plan = sync(&toy, &[pod], &revisions);
    let restart = &plan.pod_changes[0];
    assert_eq!(restart.reason, ChangeReason::InPlaceRestart);
    assert_eq!(restart.agent_restarts, ["app"]);
    assert_eq!(
        restart.resource_version, None,
        "the record must land after a restart"
    );
    let recorded = restart
        .patch
        .as_ref()
        .and_then(|p| {
            p.pointer(&format!(
                "/metadata/annotations/{}",
                STATE_ANNOTATION.replace('/', "~1")
            ))
        })
        .and_then(Value::as_str)
        .expect("the state recorded");
    let recorded = InPlaceUpdateState::parse(recorded).expect("a state");
    assert!(recorded.batches().agent_restarts.is_empty());
    assert!(recorded.last_container_statuses.contains_key("app"));
}

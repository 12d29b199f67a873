//! In-place resize in the shared planning, over the toy workload: a change of only cpu
//! starts an update that resizes through the `resize` subresource and restarts nothing;
//! a resize the kubelet reports infeasible recreates the pod (InPlaceIfPossible) or is
//! reported (InPlaceOnly).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodTemplateSpec, ResourceRequirements};
use serde_json::{Value, json};

use super::toy_tests::{V1, running_pod, sync, template, toy};
use crate::api::common::PodUpdatePolicy;
use crate::workload::actions::{ChangeReason, DeleteReason};
use crate::workload::inplace::STATE_ANNOTATION;
use crate::workload::inplace::resize::{REASON_INFEASIBLE, RESIZE_PENDING};
use crate::workload::revision_adapter::CONTROLLER_REVISION_HASH_LABEL;

fn cpu(request: &str) -> ResourceRequirements {
    serde_json::from_value(json!({ "requests": { "cpu": request } })).unwrap()
}

fn with_cpu(image: &str, request: &str) -> PodTemplateSpec {
    let mut t = template(image, None);
    t.spec.get_or_insert_default().containers[0].resources = Some(cpu(request));
    t
}

fn revisions(v1: PodTemplateSpec, v2: PodTemplateSpec) -> BTreeMap<String, PodTemplateSpec> {
    BTreeMap::from([(V1.to_owned(), v1), (super::toy_tests::V2.to_owned(), v2)])
}

/// A running toy pod requesting `request` cpu, its container reporting those resources as a
/// kubelet that can resize does.
fn pod_with_cpu(request: &str) -> Pod {
    let toy = toy(1, PodUpdatePolicy::InPlaceIfPossible);
    let mut pod = running_pod(&toy, 0, V1, "toy:v1");
    pod.spec.get_or_insert_default().containers[0].resources = Some(cpu(request));
    pod.status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[0]
        .resources = Some(cpu(request));
    pod.metadata.resource_version = Some("7".into());
    pod
}

#[test]
fn a_pod_the_apiserver_cannot_resize_is_recreated_or_refused_instead() {
    let cpu_only = revisions(with_cpu("toy:v1", "100m"), with_cpu("toy:v1", "200m"));
    let mut old_kubelet = pod_with_cpu("100m");
    old_kubelet
        .status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[0]
        .resources = None;
    let why = "spec.containers[app].resources (its node reports no container resources, so it cannot resize the pod)";

    let plan = sync(
        &toy(1, PodUpdatePolicy::InPlaceIfPossible),
        &[old_kubelet.clone()],
        &cpu_only,
    );
    assert!(
        plan.pod_changes.is_empty(),
        "no resize is attempted: {plan:?}"
    );
    assert_eq!(plan.deletes.len(), 1, "{plan:?}");
    assert_eq!(plan.deletes[0].reason, DeleteReason::RecreateUpdate);
    assert_eq!(plan.deletes[0].detail, format!("changed: {why}"));

    let plan = sync(
        &toy(1, PodUpdatePolicy::InPlaceOnly),
        &[old_kubelet],
        &cpu_only,
    );
    assert!(
        plan.pod_changes.is_empty() && plan.deletes.is_empty(),
        "{plan:?}"
    );
    assert!(
        plan.refusal.as_deref().is_some_and(|r| r.contains(why)),
        "{plan:?}"
    );

    let image_only = revisions(with_cpu("toy:v1", "100m"), with_cpu("toy:v2", "100m"));
    let mut unreported = pod_with_cpu("100m");
    unreported
        .status
        .as_mut()
        .unwrap()
        .container_statuses
        .as_mut()
        .unwrap()[0]
        .resources = None;
    let plan = sync(
        &toy(1, PodUpdatePolicy::InPlaceIfPossible),
        &[unreported],
        &image_only,
    );
    assert_eq!(
        plan.pod_changes[0].reason,
        ChangeReason::InPlaceStart,
        "an image change needs no resize: {plan:?}"
    );
}

#[test]
fn a_cpu_change_resizes_in_place_and_an_image_rides_along() {
    let toy = toy(1, PodUpdatePolicy::InPlaceIfPossible);
    let cases = [
        ("cpu only", "toy:v1", None),
        ("image and cpu", "toy:v2", Some("toy:v2")),
    ];
    for (case, image, patched_image) in cases {
        let revisions = revisions(with_cpu("toy:v1", "100m"), with_cpu(image, "200m"));
        let plan = sync(&toy, &[pod_with_cpu("100m")], &revisions);
        assert!(plan.deletes.is_empty(), "{case}: {plan:?}");
        let start = &plan.pod_changes[0];
        assert_eq!(start.reason, ChangeReason::InPlaceStart, "{case}");
        assert_eq!(
            start.resize,
            Some(json!({ "spec": { "containers": [
                { "name": "app", "resources": { "requests": { "cpu": "200m" } } }
            ] } })),
            "{case}"
        );
        let patch = start.patch.as_ref().unwrap();
        assert_eq!(
            patch["metadata"]["labels"][CONTROLLER_REVISION_HASH_LABEL], "bbb222",
            "{case}"
        );
        assert_eq!(
            patch
                .pointer("/spec/containers/0/image")
                .and_then(Value::as_str),
            patched_image,
            "{case}: resources go through the resize, never the patch"
        );
        assert!(
            patch.pointer("/spec/containers/0/resources").is_none(),
            "{case}"
        );
    }
}

/// The toy pod after its resize to 200m started at t=100, with the kubelet's verdict.
fn resize_infeasible() -> Pod {
    let mut pod = pod_with_cpu("200m");
    let labels = pod.metadata.labels.get_or_insert_default();
    labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), "bbb222".into());
    let state = json!({
        "revision": super::toy_tests::V2,
        "updateTimestamp": "2027-01-15T08:01:40Z",
        "lastContainerStatuses": { "app": { "resources": cpu("100m") } }
    });
    pod.metadata.annotations = Some(BTreeMap::from([(
        STATE_ANNOTATION.to_owned(),
        state.to_string(),
    )]));
    let conditions = pod
        .status
        .get_or_insert_default()
        .conditions
        .get_or_insert_default();
    conditions.push(PodCondition {
        type_: RESIZE_PENDING.into(),
        status: "True".into(),
        reason: Some(REASON_INFEASIBLE.into()),
        message: Some("Node didn't have enough capacity: cpu".into()),
        ..PodCondition::default()
    });
    pod
}

#[test]
fn an_infeasible_resize_recreates_or_is_reported() {
    let revisions = revisions(with_cpu("toy:v1", "100m"), with_cpu("toy:v1", "200m"));
    let if_possible = toy(1, PodUpdatePolicy::InPlaceIfPossible);
    let plan = sync(&if_possible, &[resize_infeasible()], &revisions);
    assert_eq!(plan.deletes.len(), 1, "{plan:?}");
    assert_eq!(plan.deletes[0].reason, DeleteReason::RecreateUpdate);
    assert_eq!(
        plan.deletes[0].detail,
        "the kubelet cannot resize it in place: Node didn't have enough capacity: cpu"
    );
    assert_eq!(plan.refusal, None);

    let only = toy(1, PodUpdatePolicy::InPlaceOnly);
    let plan = sync(&only, &[resize_infeasible()], &revisions);
    assert!(plan.deletes.is_empty(), "{plan:?}");
    assert_eq!(
        plan.refusal.as_deref(),
        Some(
            "pod toy-0 cannot be resized in place on its node (Node didn't have enough capacity: cpu); updateStrategy.type is InPlaceOnly, so it is not recreated"
        )
    );
}

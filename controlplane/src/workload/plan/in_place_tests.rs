//! When an in-place update counts as finished, what finishing it writes, and how pods
//! mid-update count against maxUnavailable: rules of the shared planner, over the toy
//! workload (updated to V2 at `ts(50)`; the sync runs at `ts(100)`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use super::toy_case::PodBuilder;
use super::toy_tests::{Toy, V1, V2, revisions, running_pod, sync, template, toy, ts};
use crate::api::common::PodUpdatePolicy;
use crate::workload::actions::{ChangeReason, PodChange};
use crate::workload::inplace::{
    INPLACE_UPDATE_READY, InPlaceUpdateContainerStatus, InPlaceUpdateState, REASON_DONE,
    STATE_ANNOTATION, update_in_progress,
};

/// The state annotation of an update to V2 at `updated_at` from a container that ran
/// `old_image_id`.
fn in_place_state(updated_at: Timestamp, old_image_id: &str) -> String {
    InPlaceUpdateState {
        revision: V2.to_owned(),
        update_timestamp: Time(updated_at),
        last_container_statuses: BTreeMap::from([(
            "app".to_owned(),
            InPlaceUpdateContainerStatus {
                image_id: old_image_id.to_owned(),
                ..Default::default()
            },
        )]),
        other: BTreeMap::new(),
    }
    .to_annotation()
    .unwrap()
}

/// `pod` with its container reported running `image` (`image_id`) since `started`.
fn running(pod: Pod, image: &str, image_id: &str, started: Timestamp, ready: bool) -> Pod {
    PodBuilder(pod).running(image, image_id, started, ready).0
}

fn with_annotation(mut pod: Pod, key: &str, value: &str) -> Pod {
    let annotations = pod.metadata.annotations.get_or_insert_default();
    annotations.insert(key.to_owned(), value.to_owned());
    pod
}

/// `pod` with its InPlaceUpdateReady condition at `status`, or none.
fn in_place_ready(mut pod: Pod, status: Option<&str>) -> Pod {
    let conditions = pod
        .status
        .get_or_insert_default()
        .conditions
        .get_or_insert_default();
    conditions.retain(|c| c.type_ != INPLACE_UPDATE_READY);
    conditions.extend(status.map(|status| PodCondition {
        type_: INPLACE_UPDATE_READY.to_owned(),
        status: status.to_owned(),
        ..PodCondition::default()
    }));
    pod
}

/// Pod 0 of `toy`, updated in place to V2 at `ts(50)` from image ID `sha-old`, its
/// InPlaceUpdateReady False, its container now running `image` with `image_id`.
fn updating_pod(toy: &Toy, image: &str, image_id: &str, started: Timestamp, ready: bool) -> Pod {
    let pod = in_place_ready(running_pod(toy, 0, V2, "toy:v2"), Some("False"));
    let pod = with_annotation(pod, STATE_ANNOTATION, &in_place_state(ts(50), "sha-old"));
    running(pod, image, image_id, started, ready)
}

fn change<'p>(changes: &'p [PodChange], pod: &str) -> &'p PodChange {
    (changes.iter().find(|c| c.pod == pod))
        .unwrap_or_else(|| panic!("no change for {pod} in {changes:#?}"))
}

/// Whether `change` writes the in-place state annotation back marked finished (it is
/// kept after the update, as OpenKruise keeps it).
fn marks_state_finished(change: &PodChange) -> bool {
    let patch = change.patch.as_ref().expect("a patch");
    patch["metadata"]["annotations"][STATE_ANNOTATION]
        .as_str()
        .is_some_and(|s| !update_in_progress(s))
}

#[test]
fn refresh_finishes_an_in_place_update_once_the_container_restarted() {
    let toy = toy(1, PodUpdatePolicy::InPlaceIfPossible);
    let revisions = revisions(template("toy:v2", None));
    let updating =
        |image, image_id, started, ready| updating_pod(&toy, image, image_id, started, ready);
    let cases: Vec<(&str, Pod, bool)> = vec![
        (
            "new image ID, started after the update, ready",
            updating("toy:v2", "sha-new", ts(60), true),
            true,
        ),
        (
            "started in the same second as the update",
            updating("toy:v2", "sha-new", ts(50), true),
            true,
        ),
        (
            "still the old image ID in the old container",
            updating("toy:v1", "sha-old", ts(40), true),
            false,
        ),
        (
            "started before the update",
            updating("toy:v2", "sha-new", ts(49), true),
            false,
        ),
        (
            "not ready yet",
            updating("toy:v2", "sha-new", ts(60), false),
            false,
        ),
        (
            "same digest under a new tag (kruise #2297): the restart decides",
            updating("toy:v2", "sha-old", ts(60), true),
            true,
        ),
        (
            "same digest, and containerd 1.6 reports the image's first (old) tag",
            updating("toy:v1", "sha-old", ts(60), true),
            true,
        ),
    ];
    for (name, pod, done) in cases {
        let plan = sync(&toy, &[pod], &revisions);
        if !done {
            assert!(plan.pod_changes.is_empty(), "{name}: {plan:#?}");
            continue;
        }
        let c = change(&plan.pod_changes, "toy-0");
        let set: Vec<(&str, bool, &str)> = (c.conditions.iter())
            .map(|c| (c.condition_type, c.status, c.reason))
            .collect();
        assert_eq!(set, [(INPLACE_UPDATE_READY, true, REASON_DONE)], "{name}");
        let patch = c.patch.as_ref().expect("a patch");
        let annotations = patch["metadata"]["annotations"].as_object();
        assert_eq!(
            annotations.map(|a| a.keys().collect::<Vec<_>>()),
            Some(vec![&STATE_ANNOTATION.to_owned()]),
            "{name}: only the state annotation is written"
        );
        assert!(marks_state_finished(c), "{name}: {patch:?}");
    }
}

#[test]
fn refresh_without_the_gate_only_marks_the_state_finished() {
    let toy = toy(1, PodUpdatePolicy::InPlaceIfPossible);
    let mut pod = running_pod(&toy, 0, V2, "toy:v2");
    pod.spec.get_or_insert_default().readiness_gates = None;
    let pod = in_place_ready(pod, None);
    let pod = with_annotation(pod, STATE_ANNOTATION, &in_place_state(ts(50), "sha-old"));
    let pod = running(pod, "toy:v2", "sha-new", ts(60), true);
    let plan = sync(&toy, &[pod], &revisions(template("toy:v2", None)));
    let c = change(&plan.pod_changes, "toy-0");
    assert!(c.conditions.is_empty(), "{c:#?}");
    assert!(marks_state_finished(c), "{:?}", c.patch);
}

#[test]
fn pods_mid_in_place_update_count_as_unavailable() {
    // One pod is still restarting in place (state annotation present): with maxUnavailable
    // 1 no further pod starts.
    let mut toy = toy(5, PodUpdatePolicy::InPlaceIfPossible);
    toy.max_unavailable = Some(IntOrString::Int(1));
    let mut pods: Vec<Pod> = (0..4).map(|n| running_pod(&toy, n, V1, "toy:v1")).collect();
    let restarting = running_pod(&toy, 4, V2, "toy:v2");
    let restarting = running(restarting, "toy:v1", "sha-toy:v1", ts(0), true);
    let restarting = with_annotation(
        restarting,
        STATE_ANNOTATION,
        &in_place_state(ts(90), "sha-toy:v1"),
    );
    pods.push(restarting);
    let plan = sync(&toy, &pods, &revisions(template("toy:v2", None)));
    assert!(
        plan.creates.is_empty() && plan.deletes.is_empty() && plan.pod_changes.is_empty(),
        "{plan:#?}"
    );
}

#[test]
fn the_sync_that_finishes_an_in_place_update_starts_the_next_within_max_unavailable() {
    let mut toy = toy(2, PodUpdatePolicy::InPlaceIfPossible);
    toy.max_unavailable = Some(IntOrString::Int(1));
    let revisions = revisions(template("toy:v2", None));
    for (gate, next_starts) in [("True", true), ("False", false)] {
        let finished = in_place_ready(running_pod(&toy, 0, V2, "toy:v2"), Some(gate));
        let finished = with_annotation(
            finished,
            STATE_ANNOTATION,
            &in_place_state(ts(50), "sha-old"),
        );
        let finished = running(finished, "toy:v2", "sha-new", ts(60), true);
        let old = running_pod(&toy, 1, V1, "toy:v1");
        let plan = sync(&toy, &[finished, old], &revisions);
        let reasons: Vec<(&str, ChangeReason)> = (plan.pod_changes.iter())
            .map(|c| (c.pod.as_str(), c.reason))
            .collect();
        let mut want = vec![("toy-0", ChangeReason::InPlaceDone)];
        if next_starts {
            want.push(("toy-1", ChangeReason::InPlaceStart));
        }
        assert_eq!(reasons, want, "InPlaceUpdateReady {gate}: {plan:#?}");
    }
}

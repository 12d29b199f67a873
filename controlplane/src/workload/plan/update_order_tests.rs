//! Which pods an update or a scale-down takes first, how many an update takes per sync,
//! and what a sync that scales or refreshes a pod leaves to the next one: rules of the
//! shared planner, over the toy workload.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::toy_case::{Case, NEW, OLD, PodBuilder, names, pod, set};
use super::toy_tests::{Toy, V1, V2, revisions, running_pod, sync, template, toy, try_sync, ts};
use crate::api::common::PodUpdatePolicy;
use crate::workload::actions::DeleteReason;
use crate::workload::inplace::{INPLACE_UPDATE_READY, STATE_ANNOTATION};

fn not_ready(mut pod: Pod) -> Pod {
    let conditions = pod
        .status
        .get_or_insert_default()
        .conditions
        .get_or_insert_default();
    for condition in conditions.iter_mut().filter(|c| c.type_ == "Ready") {
        condition.status = "False".to_owned();
    }
    pod
}

fn unscheduled(mut pod: Pod) -> Pod {
    pod.spec.get_or_insert_default().node_name = None;
    let status = pod.status.get_or_insert_default();
    status.phase = Some("Pending".to_owned());
    status.container_statuses = None;
    not_ready(pod)
}

/// `count` running pods of `toy` at the old revision, `toy-0` up.
fn old_pods(toy: &Toy, count: usize) -> Vec<Pod> {
    (0..count)
        .map(|n| running_pod(toy, n, V1, "toy:v1"))
        .collect()
}

#[test]
fn update_goes_to_unhealthy_pods_first() {
    let mut toy = toy(4, PodUpdatePolicy::ReCreate);
    toy.max_unavailable = Some(IntOrString::Int(2));
    let revisions = revisions(template("toy:v2", None));
    let pods = vec![
        running_pod(&toy, 0, V1, "toy:v1"),
        unscheduled(running_pod(&toy, 1, V1, "toy:v1")),
        running_pod(&toy, 2, V1, "toy:v1"),
        not_ready(running_pod(&toy, 3, V1, "toy:v1")),
    ];
    let plan = sync(&toy, &pods, &revisions);
    // The broken pods first, unscheduled before not ready; they need no budget, and with
    // two unavailable pods the budget of 2 is used up, so no healthy pod starts.
    let deleted: Vec<(&str, DeleteReason)> = (plan.deletes.iter())
        .map(|d| (d.pod.as_str(), d.reason))
        .collect();
    assert_eq!(
        deleted,
        [
            ("toy-1", DeleteReason::RecreateUpdate),
            ("toy-3", DeleteReason::RecreateUpdate)
        ]
    );
}

#[test]
fn a_pod_refreshed_in_this_sync_is_not_also_updated() {
    // The pod's InPlaceUpdateReady is set in this sync; its update waits for the next
    // sync, which plans from the patched object.
    let toy = toy(1, PodUpdatePolicy::InPlaceIfPossible);
    let revisions = revisions(template("toy:v2", None));
    let mut pod = running_pod(&toy, 0, V1, "toy:v1");
    let conditions = pod
        .status
        .get_or_insert_default()
        .conditions
        .get_or_insert_default();
    conditions.retain(|c: &PodCondition| c.type_ != INPLACE_UPDATE_READY);
    let plan = sync(&toy, &[pod], &revisions);
    // A pod with the gate but no condition: refreshed, not started.
    assert_eq!(plan.pod_changes.len(), 1, "{plan:#?}");
    let change = &plan.pod_changes[0];
    let set: Vec<(&str, bool, &str)> = (change.conditions.iter())
        .map(|c| (c.condition_type, c.status, c.reason))
        .collect();
    assert_eq!(set, [(INPLACE_UPDATE_READY, true, "PodCreated")]);
    assert!(change.patch.is_none(), "{change:#?}");
}

#[test]
fn a_malformed_state_annotation_is_an_error_naming_the_pod() {
    let toy = toy(1, PodUpdatePolicy::ReCreate);
    let revisions = revisions(template("toy:v2", None));
    let mut pod = running_pod(&toy, 0, V2, "toy:v2");
    pod.metadata
        .annotations
        .get_or_insert_default()
        .insert(STATE_ANNOTATION.to_owned(), "{not json".to_owned());
    let err = try_sync(&toy, &[pod], &revisions).expect_err("malformed annotation");
    assert!(err.to_string().contains("toy-0"), "{err}");
}

#[test]
fn a_sync_that_scales_does_not_update() {
    let revisions = revisions(template("toy:v2", None));
    for policy in [
        PodUpdatePolicy::ReCreate,
        PodUpdatePolicy::InPlaceIfPossible,
    ] {
        let toy = toy(3, policy);
        // Up: 2 old pods of 3.
        let plan = sync(&toy, &old_pods(&toy, 2), &revisions);
        assert_eq!(plan.creates.len(), 1, "{policy:?}");
        assert!(plan.deletes.is_empty(), "{policy:?}: {plan:#?}");
        assert!(plan.pod_changes.is_empty(), "{policy:?}: {plan:#?}");

        // Down: 4 old pods of 3.
        let plan = sync(&toy, &old_pods(&toy, 4), &revisions);
        assert_eq!(plan.deletes.len(), 1, "{policy:?}");
        assert_eq!(plan.deletes[0].reason, DeleteReason::ScaleDown);
        assert!(plan.pod_changes.is_empty(), "{policy:?}: {plan:#?}");
    }
}

#[test]
fn scale_down_during_a_rollout_deletes_old_revision_pods_first() {
    let toy = toy(2, PodUpdatePolicy::ReCreate);
    let revisions = revisions(template("toy:v2", None));
    let pods = vec![
        not_ready(running_pod(&toy, 0, V2, "toy:v2")),
        running_pod(&toy, 1, V1, "toy:v1"),
        running_pod(&toy, 2, V2, "toy:v2"),
    ];
    let plan = sync(&toy, &pods, &revisions);
    // toy-1 is ranked after the not-ready toy-0, but old pods above the partition go first.
    let deleted: Vec<(&str, DeleteReason)> = (plan.deletes.iter())
        .map(|d| (d.pod.as_str(), d.reason))
        .collect();
    assert_eq!(deleted, [("toy-1", DeleteReason::ScaleDown)]);
}

#[test]
fn in_place_updates_are_limited_by_max_unavailable() {
    let mut toy = toy(10, PodUpdatePolicy::InPlaceIfPossible);
    toy.max_unavailable = Some(IntOrString::Int(3));
    let revisions = revisions(template("toy:v2", None));
    let plan = sync(&toy, &old_pods(&toy, 10), &revisions);
    assert_eq!(plan.pod_changes.len(), 3, "{plan:#?}");
    assert!(plan.deletes.is_empty());
}

#[test]
fn unavailable_old_pods_are_not_all_updated_at_once() {
    // All 10 pods are old and not ready (say, the old image crashes). OpenKruise updates
    // at most maxUnavailable (2) per sync so a bad new revision cannot take every pod.
    let mut toy = toy(10, PodUpdatePolicy::ReCreate);
    toy.max_unavailable = Some(IntOrString::Int(2));
    let revisions = revisions(template("toy:v2", None));
    let pods: Vec<Pod> = old_pods(&toy, 10).into_iter().map(not_ready).collect();
    let plan = sync(&toy, &pods, &revisions);
    assert_eq!(plan.deletes.len(), 2, "{plan:#?}");
}

#[test]
fn max_unavailable_and_partition_limit_the_pods_updated_per_sync() {
    let int = |n| Some(IntOrString::Int(n));
    let pct = |s: &str| Some(IntOrString::String(s.to_owned()));
    let old_and = |old, extra: Vec<PodBuilder>| {
        let mut pods = names(old, OLD);
        pods.extend(extra);
        pods
    };
    type Row = (
        &'static str,
        Option<IntOrString>, // maxUnavailable
        Option<IntOrString>, // partition
        Vec<PodBuilder>,
        usize,
    );
    let cases: Vec<Row> = vec![
        ("default 20% of 10", None, None, names(10, OLD), 2),
        ("default 20% of 3 rounds up", None, None, names(3, OLD), 1),
        ("int 3", int(3), None, names(10, OLD), 3),
        ("35% of 10 rounds up", pct("35%"), None, names(10, OLD), 4),
        ("0: nothing", int(0), None, names(10, OLD), 0),
        ("100%: all", pct("100%"), None, names(10, OLD), 10),
        (
            "an unavailable updated pod uses up the budget",
            int(2),
            None,
            old_and(9, vec![pod("toy-n", NEW).not_ready()]),
            1,
        ),
        (
            "as many unavailable updated pods as the budget: nothing",
            int(2),
            None,
            old_and(
                8,
                vec![pod("toy-n", NEW).not_ready(), pod("toy-m", NEW).not_ready()],
            ),
            0,
        ),
        (
            "an unready old pod is updated without budget",
            int(1),
            None,
            old_and(9, vec![pod("toy-u", OLD).not_ready()]),
            1,
        ),
        (
            "a pod ready for less than minReadySeconds is unavailable",
            int(2),
            None,
            old_and(9, vec![pod("toy-n", NEW).ready_since(ts(995))]),
            1,
        ),
        (
            "partition 3 of 5 keeps 3 old",
            pct("100%"),
            int(3),
            names(5, OLD),
            2,
        ),
        (
            "partition 40% of 5 keeps 2 old",
            pct("100%"),
            pct("40%"),
            names(5, OLD),
            3,
        ),
        (
            "partition reached: nothing",
            pct("100%"),
            int(3),
            old_and(3, vec![pod("toy-n", NEW), pod("toy-m", NEW)]),
            0,
        ),
        (
            "partition 100% keeps all",
            pct("100%"),
            pct("100%"),
            names(5, OLD),
            0,
        ),
        (
            "partition and maxUnavailable: the smaller wins",
            int(1),
            int(2),
            names(5, OLD),
            1,
        ),
    ];
    for (name, max_unavailable, partition, pods, want) in cases {
        let toy = Toy {
            max_unavailable,
            partition,
            min_ready_seconds: 10,
            ..set(i32::try_from(pods.len()).unwrap())
        };
        let plan = Case::new(toy).pods(pods).plan();
        assert!(
            (plan.deletes.iter()).all(|d| d.reason == DeleteReason::RecreateUpdate),
            "{name}"
        );
        assert!(
            (plan.deletes.iter()).all(|d| d.pod != "toy-n" && d.pod != "toy-m"),
            "{name}: updated pods are left alone"
        );
        assert_eq!(plan.deletes.len(), want, "{name}: {plan:#?}");
    }
}

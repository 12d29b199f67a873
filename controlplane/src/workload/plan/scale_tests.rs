//! How many pods a scale-up creates (scale maxUnavailable, replacements, the per-sync cap)
//! and at which revision, and scaling while updates are paused: rules of the shared
//! planner, over the toy workload.

#![allow(
    clippy::type_complexity,
    reason = "case tables are tuples read in one place"
)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::toy_case::{Case, NEW, OLD, PodBuilder, names, pod, set};
use super::toy_tests::{Toy, V1, V2, revisions, running_pod, sync, template, toy};
use crate::api::common::PodUpdatePolicy;
use crate::workload::actions::{DeleteReason, Plan};

fn created_revisions(plan: &Plan) -> Vec<&str> {
    plan.creates.iter().map(|c| c.revision.as_str()).collect()
}

#[test]
fn scale_up_during_a_rollout_keeps_the_partition_on_the_current_revision() {
    // replicas 4, partition 2: one old pod and one new exist, so one old and one new are
    // created (OpenKruise scaleUpNumOldRevision), the old first.
    let mut toy = toy(4, PodUpdatePolicy::ReCreate);
    toy.partition = Some(IntOrString::Int(2));
    let revisions = revisions(template("toy:v2", None));
    let pods = [
        running_pod(&toy, 0, V1, "toy:v1"),
        running_pod(&toy, 1, V2, "toy:v2"),
    ];
    let plan = sync(&toy, &pods, &revisions);
    assert_eq!(created_revisions(&plan), [V1, V2]);

    // Without a partition everything new is on the update revision.
    toy.partition = None;
    let plan = sync(&toy, &pods, &revisions);
    assert_eq!(created_revisions(&plan), [V2, V2]);
}

#[test]
fn scale_up_falls_back_to_the_update_revision_when_the_current_one_is_gone() {
    let mut toy = toy(2, PodUpdatePolicy::ReCreate);
    toy.partition = Some(IntOrString::Int(2));
    let only_update = BTreeMap::from([(V2.to_owned(), template("toy:v2", None))]);
    let plan = sync(&toy, &[], &only_update);
    assert_eq!(created_revisions(&plan), [V2, V2]);
}

#[test]
fn paused_stops_updates_but_not_scaling() {
    let revisions = revisions(template("toy:v2", None));
    let paused = |replicas| {
        let mut toy = toy(replicas, PodUpdatePolicy::ReCreate);
        toy.paused = true;
        toy
    };
    let three_old = |toy| {
        (0..3)
            .map(|n| running_pod(toy, n, V1, "toy:v1"))
            .collect::<Vec<_>>()
    };

    let toy = paused(3);
    let plan = sync(&toy, &three_old(&toy), &revisions);
    assert!(
        plan.creates.is_empty() && plan.deletes.is_empty() && plan.pod_changes.is_empty(),
        "{plan:#?}"
    );

    let toy = paused(4);
    let plan = sync(&toy, &three_old(&toy), &revisions);
    assert_eq!(created_revisions(&plan), [V2]);

    let toy = paused(2);
    let plan = sync(&toy, &three_old(&toy), &revisions);
    assert_eq!(plan.deletes.len(), 1);
    assert_eq!(plan.deletes[0].reason, DeleteReason::ScaleDown);

    // Unpaused, the same set updates.
    let mut toy = paused(3);
    toy.paused = false;
    let plan = sync(&toy, &three_old(&toy), &revisions);
    assert_eq!(plan.deletes.len(), 1);
    assert_eq!(plan.deletes[0].reason, DeleteReason::RecreateUpdate);
}

#[test]
fn scale_up_creates_what_is_missing_within_scale_max_unavailable() {
    let scale_max = |replicas, value: IntOrString| Toy {
        scale_max_unavailable: Some(value),
        ..set(replicas)
    };
    let cases: Vec<(&str, Toy, Vec<PodBuilder>, usize)> = vec![
        ("from zero", set(3), vec![], 3),
        ("one missing", set(3), names(2, NEW), 1),
        ("nothing missing", set(3), names(3, NEW), 0),
        (
            "scale maxUnavailable caps creations from zero",
            scale_max(5, IntOrString::Int(2)),
            vec![],
            2,
        ),
        (
            "scale maxUnavailable as a percentage (40% of 5 = 2)",
            scale_max(5, IntOrString::String("40%".into())),
            vec![],
            2,
        ),
        (
            "unready pods use up scale maxUnavailable",
            scale_max(5, IntOrString::Int(2)),
            vec![pod("toy-a", NEW).not_ready(), pod("toy-b", NEW)],
            1,
        ),
        (
            "no creation while maxUnavailable pods are unready",
            scale_max(5, IntOrString::Int(2)),
            vec![pod("toy-a", NEW).not_ready(), pod("toy-b", NEW).not_ready()],
            0,
        ),
        (
            "ready pods do not limit creations",
            scale_max(5, IntOrString::Int(1)),
            names(3, NEW),
            1,
        ),
        (
            "a terminating pod is replaced",
            set(2),
            vec![pod("toy-a", NEW), pod("toy-b", NEW).terminating()],
            1,
        ),
        (
            "a succeeded pod is replaced",
            set(2),
            vec![pod("toy-a", NEW), pod("toy-b", NEW).phase("Succeeded")],
            1,
        ),
        (
            "a failed pod is replaced",
            set(2),
            vec![pod("toy-a", NEW), pod("toy-b", NEW).phase("Failed")],
            1,
        ),
    ];
    for (name, toy, pods, want) in cases {
        let plan = Case::settled(toy).pods(pods).plan();
        assert_eq!(plan.creates.len(), want, "{name}: {plan:#?}");
        assert!(
            plan.creates.iter().all(|c| c.revision == NEW),
            "{name}: {plan:#?}"
        );
        assert!(plan.deletes.is_empty(), "{name}: {plan:#?}");
    }
}

#[test]
fn huge_replicas_plan_one_sync_of_creates_not_the_replicas() {
    use crate::workload::plan::MAX_CREATES_PER_SYNC as CAP;
    let max = i32::MAX;
    let percent = |p: &str| Some(IntOrString::String(p.to_owned()));
    // (case, set, pods, during a rollout, creates, of them on the current revision)
    let cases: Vec<(&str, Toy, Vec<PodBuilder>, bool, usize, usize)> = vec![
        ("int32 max from none", set(max), vec![], false, CAP, 0),
        (
            "int32 max beside 300 pods",
            set(max),
            names(300, NEW),
            false,
            CAP,
            0,
        ),
        (
            "scale maxUnavailable 100% of int32 max",
            Toy {
                scale_max_unavailable: percent("100%"),
                ..set(max)
            },
            vec![],
            false,
            CAP,
            0,
        ),
        (
            "scale maxUnavailable 9",
            Toy {
                scale_max_unavailable: Some(IntOrString::Int(9)),
                ..set(max)
            },
            vec![],
            false,
            9,
            0,
        ),
        (
            "partition 50%, surge 100% of int32 max",
            Toy {
                partition: percent("50%"),
                max_unavailable: percent("100%"),
                max_surge: percent("100%"),
                ..set(max)
            },
            names(3, OLD),
            true,
            CAP,
            CAP,
        ),
        (
            "partition int32 max",
            Toy {
                partition: Some(IntOrString::Int(max)),
                ..set(max)
            },
            vec![],
            true,
            CAP,
            CAP,
        ),
        (
            "just above the cap",
            set(701),
            names(200, NEW),
            false,
            CAP,
            0,
        ),
        (
            "below the cap, as before",
            set(300),
            names(100, NEW),
            false,
            200,
            0,
        ),
    ];
    for (name, toy, pods, rolling, count, old) in cases {
        let case = if rolling {
            Case::new(toy)
        } else {
            Case::settled(toy)
        };
        let plan = case.pods(pods).plan();
        assert_eq!(plan.creates.len(), count, "{name}");
        let on_old = plan.creates.iter().filter(|c| c.revision == OLD).count();
        assert_eq!(on_old, old, "{name}");
        assert!(plan.deletes.is_empty(), "{name}");
    }
}

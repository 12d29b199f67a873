//! Why a StatefulSet's rollout is not moving, as the update step reports it (the
//! UpdateHeld condition `kubectl describe` shows): Parallel rollouts held by
//! maxUnavailable or the partition, paused, OnDelete, and nothing held once done.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::tests::{V1, V2, pending, rolling, running, sync_with, web};
use crate::api::statefulset::{
    PodManagementPolicy, RollingUpdateStatefulSetStrategy, StatefulSetUpdateStrategy,
    StatefulSetUpdateStrategyType,
};
use crate::workload::update_hold::{UpdateHold, UpdateHoldSeen};

fn names(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn strategy(
    partition: i32,
    max_unavailable: i32,
    paused: bool,
) -> RollingUpdateStatefulSetStrategy {
    RollingUpdateStatefulSetStrategy {
        partition: Some(partition),
        max_unavailable: Some(IntOrString::Int(max_unavailable)),
        paused,
        ..RollingUpdateStatefulSetStrategy::default()
    }
}

/// A pod on the update revision that is Running but not ready (its new image fails).
fn updated_unready(set: &crate::api::StatefulSet, ordinal: i32) -> Pod {
    let mut pod = running(set, ordinal, V2);
    pod.status = Some(PodStatus {
        phase: Some("Running".to_owned()),
        ..PodStatus::default()
    });
    pod
}

#[test]
fn a_parallel_rollout_says_which_rule_holds_which_pods() {
    let set = |partition, max, paused| {
        let mut set = web(4, PodManagementPolicy::Parallel);
        rolling(&mut set, strategy(partition, max, paused));
        set
    };
    let all_old =
        |s: &crate::api::StatefulSet| -> Vec<Pod> { (0..4).map(|o| running(s, o, V1)).collect() };
    let cases: Vec<(&str, crate::api::StatefulSet, Vec<Pod>, UpdateHoldSeen)> = vec![
        {
            // web-3 took the only unavailable slot and is not ready on the new revision.
            let s = set(0, 1, false);
            let mut pods = all_old(&s);
            pods[3] = updated_unready(&s, 3);
            (
                "maxUnavailable used up by an updated pod that is not ready",
                s,
                pods,
                UpdateHoldSeen::Held(UpdateHold::MaxUnavailable {
                    limit: 1,
                    unavailable: names(&["web-3"]),
                    waiting: 3,
                }),
            )
        },
        {
            // An old pod that is not ready uses the budget before any update starts.
            let s = set(0, 1, false);
            let mut pods = all_old(&s);
            pods[1] = pending(&s, 1);
            (
                "maxUnavailable used up by an old pod that is not ready",
                s,
                pods,
                UpdateHoldSeen::Held(UpdateHold::MaxUnavailable {
                    limit: 1,
                    unavailable: names(&["web-1"]),
                    waiting: 4,
                }),
            )
        },
        {
            let s = set(2, 4, false);
            let pods = vec![
                running(&s, 0, V1),
                running(&s, 1, V1),
                running(&s, 2, V2),
                running(&s, 3, V2),
            ];
            (
                "partition keeps the lower ordinals",
                s,
                pods,
                UpdateHoldSeen::Held(UpdateHold::Partition {
                    kept: names(&["web-0", "web-1"]),
                }),
            )
        },
        {
            let s = set(2, 4, false);
            let pods = all_old(&s);
            (
                "partition: the pods above it start now, the rest are kept",
                s,
                pods,
                UpdateHoldSeen::Held(UpdateHold::Partition {
                    kept: names(&["web-0", "web-1"]),
                }),
            )
        },
        {
            let s = set(0, 1, true);
            let pods = all_old(&s);
            (
                "paused",
                s,
                pods,
                UpdateHoldSeen::Held(UpdateHold::Paused { waiting: 4 }),
            )
        },
        {
            let mut s = set(0, 1, false);
            s.spec.update_strategy = Some(StatefulSetUpdateStrategy {
                type_: Some(StatefulSetUpdateStrategyType::OnDelete),
                rolling_update: None,
            });
            let pods = all_old(&s);
            (
                "OnDelete",
                s,
                pods,
                UpdateHoldSeen::Held(UpdateHold::OnDelete { waiting: 4 }),
            )
        },
        {
            let s = set(0, 4, false);
            let pods = all_old(&s);
            ("every pod starts now", s, pods, UpdateHoldSeen::Clear)
        },
        {
            let s = set(0, 1, false);
            let pods: Vec<Pod> = (0..4).map(|o| running(&s, o, V2)).collect();
            ("every pod updated", s, pods, UpdateHoldSeen::Clear)
        },
    ];
    for (name, set, pods, want) in cases {
        let out = sync_with(&set, &pods, &[], V2);
        assert_eq!(out.plan.update_hold, want, "{name}");
    }
}

#[test]
fn a_sync_whose_scale_step_acts_leaves_the_hold_unevaluated() {
    let mut set = web(4, PodManagementPolicy::Parallel);
    rolling(&mut set, strategy(0, 1, false));
    let pods: Vec<Pod> = (0..3).map(|o| running(&set, o, V1)).collect();
    let out = sync_with(&set, &pods, &[], V2);
    assert_eq!(out.plan.creates.len(), 1, "web-3 is created first");
    assert_eq!(out.plan.update_hold, UpdateHoldSeen::NotEvaluated);
}

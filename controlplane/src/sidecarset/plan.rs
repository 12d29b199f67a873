//! The SidecarSet upgrade planner (pure): from the pods the SidecarSet was injected into,
//! its status and which pods to start upgrading now, and which finished upgrades to close.
//!
//! A pod is *updated* when it records the SidecarSet's current version. One that is not
//! is upgraded in place when only sidecar images changed (its version without images is
//! the current one); any other change waits for the pod to be recreated, as OpenKruise's.
//! Within `updateStrategy`: nothing under `type: NotUpdate` or `paused`; only pods the
//! `selector` selects; `partition` not-updated pods kept; at most `maxUnavailable` of the
//! matched pods unavailable at once (not ready, or upgrading), a pod not ready already
//! costing nothing more. The order is the workloads' (`workload::ordering`, OpenKruise's
//! as its SidecarSet sorts): Kubernetes' pod order (not-ready pods first), then
//! `priorityStrategy`, then `scatterStrategy`.
//! A pod its own workload is updating in place waits: both would use its readiness gate.
//! A pod the upgrade would select but whose sidecars changed in more than their images is
//! *not upgradable* (`SidecarSetUpgradable` False, `upgradable`), whatever partition and
//! maxUnavailable allow; not looked at while paused or `NotUpdate`, as OpenKruise's.
//! A pod whose hot sidecars run their new containers, ready, has the old ones emptied
//! (`reset`), then its upgrade closes like a cold one (`finish`).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::pod_state::SidecarPod;
use crate::api::sidecarset::{
    SidecarSetStatus, SidecarSetUpdateStrategy, SidecarSetUpdateStrategyType,
};
use crate::workload::ordering::update_order;
use crate::workload::pod_view::PodView;
use crate::workload::rollout::{IntOrPercentError, partition_replicas, scaled_share};

/// What one sync of a SidecarSet decides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SidecarSetPlan {
    /// Pods (indexes into the planned pods: names repeat across namespaces) whose
    /// sidecars start their upgrade now.
    pub upgrade: Vec<usize>,
    /// Pods whose hot sidecars' new containers are ready: set the old ones to the empty
    /// image.
    pub reset: Vec<usize>,
    /// Pods whose upgrade is done: mark them ready again and close their state.
    pub finish: Vec<usize>,
    /// Pods whose gate this SidecarSet closed for an upgrade it never recorded: mark them
    /// ready again.
    pub reopen: Vec<usize>,
    /// Pods due an upgrade that cannot take it in place (a change beyond images): marked
    /// not upgradable, left as they are.
    pub not_upgradable: Vec<usize>,
    pub status: SidecarSetStatus,
}

/// The SidecarSet's current versions.
#[derive(Clone, Copy, Debug)]
pub struct Versions<'a> {
    pub hash: &'a str,
    pub hash_without_image: &'a str,
}

/// Plans one sync over `pods` (every pod the SidecarSet matches, injected or not).
pub fn plan(
    strategy: &SidecarSetUpdateStrategy,
    versions: Versions<'_>,
    pods: &[SidecarPod],
) -> Result<SidecarSetPlan, IntOrPercentError> {
    let matched: Vec<usize> = (0..pods.len())
        .filter(|&i| pods[i].injected && pods[i].active)
        .collect();
    let updated = |p: &SidecarPod| p.hash == versions.hash;
    let count = |f: &dyn Fn(&SidecarPod) -> bool| {
        i32::try_from(matched.iter().filter(|&&i| f(&pods[i])).count()).unwrap_or(i32::MAX)
    };
    let status = SidecarSetStatus {
        matched_pods: count(&|_| true),
        updated_pods: count(&|p| updated(p)),
        ready_pods: count(&|p| p.view.ready),
        updated_ready_pods: count(&|p| updated(p) && p.view.ready && !p.upgrading),
        ..SidecarSetStatus::default()
    };
    let finish = (matched.iter().copied())
        .filter(|&i| pods[i].upgrading && pods[i].upgrade_done)
        .collect();
    let reopen = (matched.iter().copied())
        .filter(|&i| pods[i].gate_left_closed)
        .collect();
    // Not held by paused or NotUpdate: a hot upgrade under way is completed, so no pod
    // keeps running two copies of a sidecar.
    let reset = (matched.iter().copied())
        .filter(|&i| pods[i].upgrading && pods[i].reset_due)
        .collect();
    let held =
        strategy.paused || strategy.strategy_type() == SidecarSetUpdateStrategyType::NotUpdate;
    let (upgrade, not_upgradable) = if held {
        (Vec::new(), Vec::new())
    } else {
        (
            pods_to_upgrade(strategy, versions, pods, &matched, status.updated_pods)?,
            not_upgradable(versions, pods, &matched),
        )
    };
    Ok(SidecarSetPlan {
        upgrade,
        reset,
        finish,
        reopen,
        not_upgradable,
        status,
    })
}

/// The pods not at the current version, selected for the upgrade and not upgrading, whose
/// sidecars changed in more than their images: Kubernetes would refuse the patch.
fn not_upgradable(versions: Versions<'_>, pods: &[SidecarPod], matched: &[usize]) -> Vec<usize> {
    (matched.iter().copied())
        .filter(|&i| {
            let pod = &pods[i];
            pod.hash != versions.hash
                && pod.hash_without_image != versions.hash_without_image
                && pod.selected_for_update
                && !pod.upgrading
        })
        .collect()
}

/// The pods to start upgrading, within partition and maxUnavailable.
fn pods_to_upgrade(
    strategy: &SidecarSetUpdateStrategy,
    versions: Versions<'_>,
    pods: &[SidecarPod],
    matched: &[usize],
    updated_count: i32,
) -> Result<Vec<usize>, IntOrPercentError> {
    let matched_count = i32::try_from(matched.len()).unwrap_or(i32::MAX);
    let kept = partition_replicas(
        "spec.updateStrategy.partition",
        strategy.partition.as_ref(),
        matched_count,
    )?;
    let mut by_partition = usize::try_from(matched_count - updated_count - kept).unwrap_or(0);
    let max_unavailable = strategy
        .max_unavailable
        .clone()
        .unwrap_or(IntOrString::Int(1));
    let allowed = scaled_share(
        "spec.updateStrategy.maxUnavailable",
        &max_unavailable,
        matched_count,
        true,
    )?
    .max(1);
    let unavailable = (matched.iter())
        .filter(|&&i| !pods[i].view.ready || pods[i].upgrading)
        .count();
    let mut by_availability = usize::try_from(allowed)
        .unwrap_or(0)
        .saturating_sub(unavailable);
    let waiting: Vec<usize> = (matched.iter().copied())
        .filter(|&i| {
            pods[i].hash != versions.hash
                && pods[i].hash_without_image == versions.hash_without_image
        })
        .filter(|&i| {
            pods[i].selected_for_update && !pods[i].upgrading && !pods[i].workload_updating
        })
        .collect();
    // Ordered over every planned pod, as the shared order spreads scatter terms over the set.
    let views: Vec<PodView<'_>> = pods.iter().map(|p| p.view.clone()).collect();
    let order = update_order(
        &views,
        &waiting,
        strategy.priority_strategy.as_ref(),
        &strategy.scatter_strategy,
    );
    let mut chosen = Vec::new();
    for i in order {
        let pod = &pods[i];
        if by_partition == 0 {
            break;
        }
        if pod.view.ready {
            if by_availability == 0 {
                break;
            }
            by_availability -= 1;
        }
        by_partition -= 1;
        chosen.push(i);
    }
    Ok(chosen)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

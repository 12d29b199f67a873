//! The SidecarSet upgrade planner (pure): from the pods the SidecarSet was injected into,
//! its status and which pods to start upgrading now, and which finished upgrades to close.
//!
//! A pod is *updated* when it records the SidecarSet's current version. One that is not
//! is upgraded in place when only sidecar images changed (its version without images is
//! the current one); any other change waits for the pod to be recreated, as OpenKruise's.
//! Within `updateStrategy`: nothing under `type: NotUpdate` or `paused`; only pods the
//! `selector` selects; `partition` not-updated pods kept; at most `maxUnavailable` of the
//! matched pods unavailable at once (not ready, or upgrading), a pod not ready already
//! costing nothing more. Not-ready pods go first, then by name, so the order is stable.
//! A pod its own workload is updating in place waits: both would use its readiness gate.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::pod_state::SidecarPod;
use crate::api::sidecarset::{
    SidecarSetStatus, SidecarSetUpdateStrategy, SidecarSetUpdateStrategyType,
};
use crate::workload::rollout::{IntOrPercentError, partition_replicas, scaled_share};

/// What one sync of a SidecarSet decides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SidecarSetPlan {
    /// Pods whose sidecars start their upgrade now.
    pub upgrade: Vec<String>,
    /// Pods whose upgrade is done: mark them ready again and close their state.
    pub finish: Vec<String>,
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
    let matched: Vec<&SidecarPod> = pods.iter().filter(|p| p.injected && p.active).collect();
    let updated = |p: &SidecarPod| p.hash == versions.hash;
    let count = |f: &dyn Fn(&SidecarPod) -> bool| {
        i32::try_from(matched.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
    };
    let status = SidecarSetStatus {
        matched_pods: count(&|_| true),
        updated_pods: count(&|p| updated(p)),
        ready_pods: count(&|p| p.ready),
        updated_ready_pods: count(&|p| updated(p) && p.ready && !p.upgrading),
        ..SidecarSetStatus::default()
    };
    let finish = (matched.iter())
        .filter(|p| p.upgrading && p.upgrade_done)
        .map(|p| p.name.clone())
        .collect();
    let upgrade =
        if strategy.paused || strategy.strategy_type() == SidecarSetUpdateStrategyType::NotUpdate {
            Vec::new()
        } else {
            pods_to_upgrade(
                strategy,
                versions,
                &matched,
                status.matched_pods,
                status.updated_pods,
            )?
        };
    Ok(SidecarSetPlan {
        upgrade,
        finish,
        status,
    })
}

/// The pods to start upgrading, within partition and maxUnavailable.
fn pods_to_upgrade(
    strategy: &SidecarSetUpdateStrategy,
    versions: Versions<'_>,
    matched: &[&SidecarPod],
    matched_count: i32,
    updated_count: i32,
) -> Result<Vec<String>, IntOrPercentError> {
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
    let unavailable = matched.iter().filter(|p| !p.ready || p.upgrading).count();
    let mut by_availability = usize::try_from(allowed)
        .unwrap_or(0)
        .saturating_sub(unavailable);
    let mut candidates: Vec<&&SidecarPod> = (matched.iter())
        .filter(|p| p.hash != versions.hash && p.hash_without_image == versions.hash_without_image)
        .filter(|p| p.selected_for_update && !p.upgrading && !p.workload_updating)
        .collect();
    candidates.sort_by(|a, b| (a.ready, &a.name).cmp(&(b.ready, &b.name)));
    let mut chosen = Vec::new();
    for pod in candidates {
        if by_partition == 0 {
            break;
        }
        if pod.ready {
            if by_availability == 0 {
                break;
            }
            by_availability -= 1;
        }
        by_partition -= 1;
        chosen.push(pod.name.clone());
    }
    Ok(chosen)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

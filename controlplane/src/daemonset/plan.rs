//! One DaemonSet sync as a pure decision, over the shared pod-set planning: refresh pods
//! (in-place completion, lifecycle moves) through `workload::plan`, then the node step
//! (the native controller's `manage`: per node, `podsShouldBeOnNode`), and only a sync
//! whose node step is settled updates pods — Standard and InPlaceIfPossible through the
//! shared update step, a surging update through `surge`.
//!
//! Per node (`workload::node_eval` on the template with the daemon tolerations):
//! - should run and has no pod: create one pinned to the node (at most `burstReplicas`
//!   per sync, and never more than the executor creates in one); a node wanted but without room for the pod (`workload::node_resources`)
//!   gets none until room frees up, and counts as desired;
//! - may keep running: failed pods are deleted, each node backing off on its own so a
//!   crash-looping template cannot hot-loop; of several running pods the oldest stays
//!   (under surge, the oldest old and the oldest updated one);
//! - may not keep running (a NoExecute taint, a label or affinity no longer matching):
//!   its pods are deleted;
//! - pods pinned to no node or to a node that is gone are deleted.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod, PodTemplateSpec};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;

use super::adapter::DaemonSetWorkload;
use super::nodes::{NodePods, node_pods, oldest_first};
use super::surge;
use crate::api::DaemonSet;
use crate::api::daemonset::{DaemonSetUpdateStrategyType, RollingUpdateType};
use crate::workload::actions::{Create, DeleteReason, Plan};
use crate::workload::lifecycle::{self, LifecycleState};
use crate::workload::node_eval::{self, NodeFit, with_daemon_tolerations};
use crate::workload::node_resources::{NodeUsage, pod_requests};
use crate::workload::plan::{
    MAX_CREATES_PER_SYNC, PlanError, PodSet, PodSetSnapshot, hook_view, plan_delete,
};
use crate::workload::revision_adapter::RevisionAdapter;
use crate::workload::rollout::{self, IntOrPercentError, MAX_SURGE_FIELD};
use crate::workload::selector::selector_matches;
use crate::workload::update_hold::UpdateHoldSeen;

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

/// Field path of `burstReplicas`, named in errors.
const BURST_REPLICAS_FIELD: &str = "spec.burstReplicas";

/// What the sync sees.
pub struct Snapshot<'a> {
    pub ds: &'a DaemonSet,
    pub nodes: Vec<&'a Node>,
    /// Pods the DaemonSet controls (after adoption and release), terminating ones included.
    pub pods: Vec<&'a Pod>,
    pub update_revision: &'a str,
    pub current_revision: &'a str,
    /// Revision name → its pod template.
    pub revisions: &'a BTreeMap<String, PodTemplateSpec>,
    /// Nodes whose failed pods may not be deleted yet (the per-node backoff).
    pub failed_backoff: &'a BTreeSet<String>,
    /// What the pods bound to each node take, the DaemonSet's own left out.
    pub usage: &'a HashMap<String, NodeUsage>,
    pub now: Timestamp,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonSetPlanError {
    #[error(transparent)]
    IntOrPercent(#[from] IntOrPercentError),
    #[error(
        "spec.updateStrategy.rollingUpdate.selector is not a valid selector: In and NotIn need values, Exists and DoesNotExist take none"
    )]
    InvalidUpdateSelector,
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// A node whose failed pods a sync deletes, with the first of them (the event about the
/// deletion names it, so each deletion is an event of its own, not one series).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FailedDeletion {
    pub node: String,
    pub pod: String,
}

/// The decision of one sync.
#[derive(Debug, Default)]
pub struct DaemonSetPlan {
    pub plan: Plan,
    /// Nodes whose failed pods this sync deletes: the next deletion there backs off.
    pub failed_deleted_on: Vec<FailedDeletion>,
    /// Nodes with a failed pod left for later by the backoff.
    pub failed_waiting_on: Vec<String>,
    /// Pods on nodes outside `rollingUpdate.selector`, which the update leaves alone.
    pub held_back: BTreeSet<String>,
}

/// Each known node's verdict, by name, for the template of the update revision; a node
/// without room for it (beside `usage`) is wanted but gets no new pod.
pub fn evaluate_nodes(
    ds: &DaemonSet,
    nodes: &[&Node],
    usage: &HashMap<String, NodeUsage>,
) -> BTreeMap<String, NodeFit> {
    let spec = with_daemon_tolerations(&ds.spec.template.spec.clone().unwrap_or_default());
    let requests = pod_requests(&spec);
    let idle = NodeUsage::default();
    nodes
        .iter()
        .map(|node| {
            let name = node.name_any();
            let used = usage.get(&name).unwrap_or(&idle);
            let fit = node_eval::evaluate_with_room(&spec, node, &requests, used);
            (name, fit)
        })
        .collect()
}

/// Plans one sync.
pub fn plan(snap: &Snapshot<'_>) -> Result<DaemonSetPlan, DaemonSetPlanError> {
    let ds = snap.ds;
    let fits = evaluate_nodes(ds, &snap.nodes, snap.usage);
    let desired = i32::try_from(fits.values().filter(|f| f.wanted).count()).unwrap_or(i32::MAX);
    let by_node = node_pods(&snap.pods);
    let workload = DaemonSetWorkload {
        ds,
        desired,
        held_back: held_back(ds, &snap.nodes, &by_node)?,
    };
    let named = BTreeSet::new();
    let pod_set = PodSetSnapshot {
        workload: &workload,
        pods: snap.pods.clone(),
        claims: Vec::new(),
        update_revision: snap.update_revision,
        current_revision: snap.current_revision,
        revisions: snap.revisions,
        named_for_deletion: &named,
        now: snap.now,
    };
    let mut set = PodSet::new(&pod_set);
    let mut out = DaemonSetPlan {
        held_back: workload.held_back.clone(),
        ..DaemonSetPlan::default()
    };
    set.refresh(&mut out.plan)?;
    let surge = surge_limit(ds, desired)?;
    let step = NodeStep {
        snap,
        workload: &workload,
        fits: &fits,
        surging: surge > 0,
    };
    step.run(&by_node, &mut out)?;
    let acted = !out.plan.creates.is_empty() || !out.plan.deletes.is_empty();
    if acted {
        return Ok(out);
    }
    // Under OnDelete the shared update step starts nothing; it only says what waits.
    let on_delete = ds.spec.update_type() == DaemonSetUpdateStrategyType::OnDelete;
    if surge > 0 && !on_delete {
        // Surging has its own planner; it reports no hold, so none stays from before.
        out.plan.update_hold = UpdateHoldSeen::Clear;
        let rolling = ds.spec.rolling_update();
        if !rolling.is_paused() {
            let wanted = surge::SurgeInput {
                workload: &workload,
                fits: &fits,
                by_node: &by_node,
                update_revision: snap.update_revision,
                max_surge: surge,
                partition: rolling.partition_or_default(),
                now: snap.now,
            };
            surge::plan(&wanted, &mut out.plan);
        }
    } else {
        set.update_only(&mut out.plan)?;
    }
    Ok(out)
}

/// maxSurge scaled against the desired nodes (rounded up); 0 under InPlaceIfPossible.
fn surge_limit(ds: &DaemonSet, desired: i32) -> Result<i32, IntOrPercentError> {
    let rolling = ds.spec.rolling_update();
    if rolling.update_type() == RollingUpdateType::InPlaceIfPossible {
        return Ok(0);
    }
    rollout::scaled_share(
        MAX_SURGE_FIELD,
        &rolling.effective_max_surge(),
        desired,
        true,
    )
}

/// Names of the pods on nodes `rollingUpdate.selector` does not match (none without one).
fn held_back(
    ds: &DaemonSet,
    nodes: &[&Node],
    by_node: &BTreeMap<String, NodePods<'_>>,
) -> Result<BTreeSet<String>, DaemonSetPlanError> {
    let Some(selector) = ds.spec.rolling_update().selector else {
        return Ok(BTreeSet::new());
    };
    let mut held = BTreeSet::new();
    for node in nodes {
        let matched = selector_matches(&selector, node.labels());
        if matched.ok_or(DaemonSetPlanError::InvalidUpdateSelector)? {
            continue;
        }
        if let Some(pods) = by_node.get(&node.name_any()) {
            held.extend(pods.all.iter().map(|p| p.name_any()));
        }
    }
    Ok(held)
}

/// The node step: what each node needs created or deleted.
struct NodeStep<'s, 'a> {
    snap: &'s Snapshot<'a>,
    workload: &'s DaemonSetWorkload<'a>,
    fits: &'s BTreeMap<String, NodeFit>,
    surging: bool,
}

impl<'a> NodeStep<'_, 'a> {
    fn run(
        &self,
        by_node: &BTreeMap<String, NodePods<'a>>,
        out: &mut DaemonSetPlan,
    ) -> Result<(), DaemonSetPlanError> {
        if self.delete_released(by_node, out) {
            return Ok(());
        }
        let mut creates = Vec::new();
        for (node, fit) in self.fits {
            let empty = NodePods::default();
            let pods = by_node.get(node).unwrap_or(&empty);
            if fit.should_run && pods.all.is_empty() {
                creates.push(node.clone());
            } else if fit.should_continue_running {
                self.keep_one(node, pods, out);
            } else {
                for pod in pods.live() {
                    self.delete(
                        pod,
                        DeleteReason::ScaleDown,
                        "the node no longer fits the template",
                        out,
                    );
                }
            }
        }
        for (node, pods) in by_node {
            if !self.fits.contains_key(node) {
                for pod in pods.live() {
                    self.delete(pod, DeleteReason::ScaleDown, "its node is gone", out);
                }
            }
        }
        let burst = rollout::scaled_share(
            BURST_REPLICAS_FIELD,
            &self.snap.ds.spec.burst_replicas_or_default(),
            self.workload.desired,
            true,
        )?;
        let burst = usize::try_from(burst.max(1))
            .unwrap_or(1)
            .min(MAX_CREATES_PER_SYNC);
        out.plan
            .creates
            .extend(creates.into_iter().take(burst).map(|node| Create {
                instance_id: node,
                revision: self.snap.update_revision.to_owned(),
            }));
        Ok(())
    }

    /// A node that may keep its pods: failed ones go (backing off per node), and of the
    /// running ones the oldest stays (under surge, also the oldest updated one).
    fn keep_one(&self, node: &str, pods: &NodePods<'a>, out: &mut DaemonSetPlan) {
        if !pods.failed.is_empty() {
            if self.snap.failed_backoff.contains(node) {
                out.failed_waiting_on.push(node.to_owned());
            } else {
                for pod in &pods.failed {
                    self.delete(pod, DeleteReason::Failed, "its containers failed", out);
                }
                let pod = pods
                    .failed
                    .first()
                    .map(|p| p.name_any())
                    .unwrap_or_default();
                let node = node.to_owned();
                out.failed_deleted_on.push(FailedDeletion { node, pod });
            }
        }
        let mut running = pods.running.clone();
        oldest_first(&mut running);
        let update = self.snap.update_revision;
        let is_new = |p: &Pod| RevisionAdapter::is_on(p.labels(), update);
        let keep_old = running
            .iter()
            .find(|p| !self.surging || !is_new(p))
            .copied();
        let keep_new = if self.surging {
            running.iter().find(|p| is_new(p)).copied()
        } else {
            None
        };
        for pod in running {
            let kept = [keep_old, keep_new]
                .into_iter()
                .flatten()
                .any(|k| std::ptr::eq(k, pod));
            if !kept {
                self.delete(
                    pod,
                    DeleteReason::ScaleDown,
                    "another pod runs on its node",
                    out,
                );
            }
        }
    }

    /// Deletes the pods a preDelete hook held in PreparingDelete and has now released,
    /// whichever step moved them there (a recreate update, a node that stopped fitting):
    /// the update step passes over PreparingDelete pods and the node step would keep the
    /// node's only pod, so without this a released pod stayed PreparingDelete for ever
    /// (OpenKruise's DaemonSet deletes them once unhooked). True when it deleted any: the
    /// node gets its new pod on the next sync.
    fn delete_released(
        &self,
        by_node: &BTreeMap<String, NodePods<'a>>,
        out: &mut DaemonSetPlan,
    ) -> bool {
        let hook = self.snap.ds.spec.lifecycle.as_ref();
        let hook = hook.and_then(|l| l.pre_delete.as_ref());
        let update = self.snap.update_revision;
        let released = (by_node.values())
            .flat_map(|pods| pods.live())
            .filter(|pod| LifecycleState::of(pod.labels()) == Some(LifecycleState::PreparingDelete))
            .filter(|pod| !lifecycle::is_hooked(hook, hook_view(pod)));
        let mut deleted = false;
        for pod in released {
            let reason = if RevisionAdapter::is_on(pod.labels(), update) {
                DeleteReason::ScaleDown
            } else {
                DeleteReason::RecreateUpdate
            };
            self.delete(pod, reason, "its preDelete hook released it", out);
            deleted = true;
        }
        deleted
    }

    fn delete(&self, pod: &Pod, reason: DeleteReason, why: &str, out: &mut DaemonSetPlan) {
        let now = self.snap.now;
        plan_delete(
            self.workload,
            pod,
            Vec::new(),
            reason,
            why.to_owned(),
            now,
            &mut out.plan,
        );
    }
}

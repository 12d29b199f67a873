//! The Advanced DaemonSet as the generic pod-set sync (`pod_set::sync`) runs it: its
//! template-only revisions, its pure per-node plan and status, and what is its own — the
//! per-node backoff of failed pods, the nodes wanted but without room, and pods named
//! `<daemonset>-<five random characters>`.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, PodTemplateSpec};
use kube::ResourceExt as _;
use kube::runtime::reflector::Store;
use tokio::time::Instant;

use super::adapter::DaemonSetWorkload;
use super::nodes::{NodePods, node_pods};
use super::plan::{
    self, DaemonSetPlan, DaemonSetPlanError, FailedDeletion, Snapshot, evaluate_nodes,
};
use super::status::{FAILED_UPDATE, Revisions, SyncProblems, compute_status, updated_ready_nodes};
use super::unplaced::{Reasons, UnplacedNodes};
use crate::api::DaemonSet;
use crate::api::daemonset::DaemonSetStatus;
use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::ApiError;
use crate::controller::create_backoff::CreateBackoff;
use crate::pod_set::kind::{ClaimScope, KindStatus, PodSetKind, SyncScope};
use crate::pod_set::sync::PodSetController;
use crate::workload::actions::{Create, Plan};
use crate::workload::adapter::new_pod_and_claims;
use crate::workload::instance_id::{fresh_instance_id, random_u64};
use crate::workload::node_eval::NodeFit;
use crate::workload::node_resources::usage_by_node;
use crate::workload::ownership::is_controlled_by;
use crate::workload::set_controller::PodSetParts;

/// Event: a failed pod is deleted (the native controller's reason).
const FAILED_DAEMON_POD: &str = "FailedDaemonPod";

/// Event: a node wants the pod but has no room for it.
const FAILED_PLACEMENT: &str = "FailedPlacement";

/// The Advanced DaemonSet kind and the per-node state it keeps between syncs.
#[derive(Default)]
pub struct DaemonSetKind {
    /// Failed pods deleted, per DaemonSet and node: a crash-looping template replaces
    /// its pod on a node at a growing interval, not in a hot loop.
    failed_pod_backoff: CreateBackoff<(ObjectKey, String)>,
    /// Nodes wanted but without room, shared with the triggers.
    unplaced: Arc<UnplacedNodes>,
}

impl PodSetController<DaemonSetKind> {
    /// The nodes waiting for room, for the triggers to requeue on a pod event there.
    pub fn unplaced(&self) -> Arc<UnplacedNodes> {
        self.kind.unplaced.clone()
    }
}

/// A DaemonSet's plan with what its status reads of the nodes.
pub struct DaemonSetSync {
    pub planned: DaemonSetPlan,
    /// Each known node's verdict for the update revision's template.
    fits: BTreeMap<String, NodeFit>,
    /// How soon the first failed pod's backoff ends.
    backoff_wait: Option<Duration>,
}

impl PodSetKind for DaemonSetKind {
    type Set = DaemonSet;
    type Revision = PodTemplateSpec;
    type Workload<'a> = DaemonSetWorkload<'a>;
    type Planned = DaemonSetSync;
    type PlanError = DaemonSetPlanError;
    type Problems = SyncProblems;

    const KIND: &'static str = "DaemonSet";
    const UPDATE_CONDITION: &'static str = FAILED_UPDATE;
    const CLAIMS: ClaimScope = ClaimScope::None;

    fn objects(stores: &Stores) -> &Store<DaemonSet> {
        &stores.daemonsets
    }

    /// The adapter before the nodes are counted: what claims, revisions, new pods and the
    /// update guard read does not depend on them.
    fn workload<'a>(&'a self, ds: &'a DaemonSet) -> Cow<'a, DaemonSetWorkload<'a>> {
        Cow::Owned(DaemonSetWorkload {
            ds,
            desired: 0,
            held_back: BTreeSet::new(),
        })
    }

    /// A DaemonSet's status keeps no current revision.
    fn recorded_revisions(ds: &DaemonSet) -> (String, i32) {
        let collisions = ds.status.as_ref().and_then(|s| s.collision_count);
        (String::new(), collisions.unwrap_or(0))
    }

    fn history_limit(ds: &DaemonSet) -> i32 {
        ds.spec.history_limit()
    }

    fn plan(&self, scope: &SyncScope<'_, Self>) -> Result<DaemonSetSync, DaemonSetPlanError> {
        let ds = scope.set;
        let nodes: Vec<Arc<Node>> = scope.parts.stores.nodes.state();
        let generation = ds.metadata.generation.unwrap_or(0);
        let (failed_backoff, backoff_wait) = self.failed_backoff(scope.key, &nodes, generation);
        let uid = ds.uid().unwrap_or_default();
        let bound = scope.parts.stores.pods.state();
        let usage = usage_by_node(bound.iter().map(AsRef::as_ref), |p| {
            is_controlled_by(&p.metadata, &uid)
        });
        let history = &scope.owned.history;
        let snapshot = Snapshot {
            ds,
            nodes: nodes.iter().map(AsRef::as_ref).collect(),
            pods: scope.owned.pods(),
            update_revision: &history.update_revision,
            current_revision: &history.current_revision,
            revisions: &scope.owned.revisions,
            failed_backoff: &failed_backoff,
            usage: &usage,
            now: scope.now,
        };
        let planned = plan::plan(&snapshot)?;
        let fits = evaluate_nodes(ds, &snapshot.nodes, &usage);
        Ok(DaemonSetSync {
            planned,
            fits,
            backoff_wait,
        })
    }

    /// A spec the plan cannot read (rollingUpdate.selector, an int-or-percent) creates and
    /// deletes nothing until it is fixed.
    fn plan_error_holds_set(_err: &DaemonSetPlanError) -> bool {
        true
    }

    fn shared_plan(planned: &DaemonSetSync) -> &Plan {
        &planned.planned.plan
    }

    fn shared_plan_mut(planned: &mut DaemonSetSync) -> &mut Plan {
        &mut planned.planned.plan
    }

    fn problems(planned: &DaemonSetSync) -> SyncProblems {
        SyncProblems {
            failed_waiting_on: planned.planned.failed_waiting_on.clone(),
            update_hold: planned.planned.plan.update_hold.clone(),
            ..SyncProblems::default()
        }
    }

    /// Pinned to any node: the dry run checks admission, not placement.
    fn update_revision_pod(&self, scope: &SyncScope<'_, Self>) -> Option<Pod> {
        let node = scope.parts.stores.nodes.state().first()?.name_any();
        let create = Create {
            instance_id: node,
            revision: scope.owned.history.update_revision.clone(),
        };
        let workload = self.workload(scope.set);
        let (pod, _) = new_pod_and_claims(&*workload, &scope.owned.revisions, &create)?;
        Some(pod)
    }

    /// Named `<daemonset>-<five random characters>`, so the executor can expect it by name.
    fn finish_new_pod(ds: &DaemonSet, pod: &mut Pod) {
        let suffix = fresh_instance_id(&BTreeSet::new(), &mut random_u64);
        pod.metadata.name = Some(format!("{}-{suffix}", ds.name_any()));
        pod.metadata.generate_name = None;
    }

    /// The failed pods this sync deletes start (or grow) their node's backoff.
    async fn before_execute<'a>(
        &'a self,
        scope: &'a SyncScope<'a, Self>,
        planned: &'a DaemonSetSync,
    ) -> Result<(), ApiError> {
        let generation = scope.set.metadata.generation.unwrap_or(0);
        for FailedDeletion { node, pod } in &planned.planned.failed_deleted_on {
            let message = format!("a pod on node {node} failed and was deleted");
            let entry = (scope.key.clone(), node.clone());
            let wait =
                (self.failed_pod_backoff).failed(&entry, generation, message, Instant::now());
            let related = ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Pod".to_owned()),
                namespace: scope.object.namespace.clone(),
                name: Some(pod.clone()),
                ..ObjectReference::default()
            };
            let note = failed_pod_note(node, wait);
            (scope.parts.events)
                .publish_about(
                    &scope.object,
                    Some(related),
                    true,
                    FAILED_DAEMON_POD,
                    "Delete",
                    note,
                )
                .await;
        }
        Ok(())
    }

    /// The native counts per node; looked at again once a ready pod turns available.
    fn status(
        &self,
        scope: &SyncScope<'_, Self>,
        planned: &DaemonSetSync,
        problems: &SyncProblems,
    ) -> KindStatus<DaemonSetStatus> {
        let (ds, history) = (scope.set, &scope.owned.history);
        let revisions = Revisions {
            update: &history.update_revision,
            collision_count: Some(history.collision_count).filter(|c| *c > 0),
        };
        let pods = scope.owned.pods();
        let by_node = node_pods(&pods);
        let status = compute_status(ds, &planned.fits, &by_node, &revisions, problems, scope.now);
        let min_ready = ds.spec.min_ready_seconds;
        let requeue = (min_ready > 0 && status.number_ready > status.number_available)
            .then(|| Duration::from_secs(u64::try_from(min_ready).unwrap_or(1)));
        KindStatus { status, requeue }
    }

    async fn after_status<'a>(
        &'a self,
        scope: &'a SyncScope<'a, Self>,
        planned: &'a DaemonSetSync,
        _problems: &'a SyncProblems,
        _status: &'a DaemonSetStatus,
    ) {
        let pods = scope.owned.pods();
        self.report_unplaced(scope, &planned.fits, &node_pods(&pods))
            .await;
    }

    /// What the rollout scales against: the nodes that should run the pod, and the pods
    /// outside `rollingUpdate.selector`.
    fn rollout_workload<'a>(
        &'a self,
        ds: &'a DaemonSet,
        planned: &DaemonSetSync,
        status: &DaemonSetStatus,
    ) -> Cow<'a, DaemonSetWorkload<'a>> {
        Cow::Owned(DaemonSetWorkload {
            ds,
            desired: status.desired_number_scheduled,
            held_back: planned.planned.held_back.clone(),
        })
    }

    fn updated_ready(
        scope: &SyncScope<'_, Self>,
        planned: &DaemonSetSync,
        _status: &DaemonSetStatus,
    ) -> i32 {
        let pods = scope.owned.pods();
        let update = &scope.owned.history.update_revision;
        let by_node = node_pods(&pods);
        updated_ready_nodes(scope.set, &planned.fits, &by_node, update, scope.now)
    }

    fn requeue(planned: &DaemonSetSync, _problems: &SyncProblems) -> Option<Duration> {
        planned.backoff_wait
    }

    /// The per-node state of a DaemonSet that is gone.
    fn forget(&self, parts: &PodSetParts, key: &ObjectKey) {
        self.unplaced.forget(key);
        for node in parts.stores.nodes.state() {
            (self.failed_pod_backoff).forget(&(key.clone(), node.name_any()));
        }
    }
}

/// The `FailedDaemonPod` event's note. It names the wait in whole seconds so a reader (and
/// the e2e test, which checks the spacing of replacements against it) sees the backoff.
fn failed_pod_note(node: &str, wait: Duration) -> String {
    format!(
        "A pod on node {node} failed; it is deleted, and the next one there waits {} s before it is created (the wait doubles with each failure, up to 5 minutes).",
        wait.as_secs()
    )
}

impl DaemonSetKind {
    /// The nodes whose failed pods must wait, and how soon the first wait ends.
    fn failed_backoff(
        &self,
        key: &ObjectKey,
        nodes: &[Arc<Node>],
        generation: i64,
    ) -> (BTreeSet<String>, Option<Duration>) {
        let now = Instant::now();
        let mut waiting = BTreeSet::new();
        let mut soonest: Option<Duration> = None;
        for node in nodes {
            let entry = (key.clone(), node.name_any());
            if let Some(wait) = self.failed_pod_backoff.waiting(&entry, generation, now) {
                waiting.insert(node.name_any());
                soonest = Some(soonest.map_or(wait.remaining, |s| s.min(wait.remaining)));
            }
        }
        (waiting, soonest)
    }

    /// Remembers the nodes wanted but without room for a pod (their pod events requeue
    /// the DaemonSet) and warns once about each newly found one.
    async fn report_unplaced(
        &self,
        scope: &SyncScope<'_, Self>,
        fits: &BTreeMap<String, NodeFit>,
        by_node: &BTreeMap<String, NodePods<'_>>,
    ) {
        let unplaced: Reasons = (fits.iter())
            .filter(|(node, fit)| fit.wanted && by_node.get(*node).is_none_or(|p| p.all.is_empty()))
            .filter_map(|(node, fit)| Some((node.clone(), fit.unfit.as_ref()?.to_string())))
            .collect();
        for (node, why) in self.unplaced.record(scope.key, unplaced) {
            let note = format!("The pod cannot be placed on node {node}: {why}.");
            (scope.parts.events)
                .warning(&scope.object, FAILED_PLACEMENT, "Create", note)
                .await;
        }
    }
}

#[cfg(test)]
#[path = "kind_tests.rs"]
mod tests;

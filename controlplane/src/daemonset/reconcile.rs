//! The DaemonSet reconciler: claims pods, keeps the revision history, asks `plan` what to
//! do and carries it out through the shared executor (failed pods backing off per node),
//! then writes status. The runner's shared preamble (`controller::object`) has already
//! found the DaemonSet in the cache and waited out the writes of earlier syncs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::{Resource as _, ResourceExt as _};
use tokio::time::Instant;

use super::adapter::DaemonSetWorkload;
use super::controller::{DaemonSetController, SyncError, reference};
use super::nodes::{NodePods, node_pods};
use super::plan::{self, DaemonSetPlan, Snapshot, evaluate_nodes};
use super::status::{
    FAILED_CREATE, FAILED_UPDATE, Revisions, SyncProblems, compute_status, updated_ready_nodes,
};
use super::unplaced::Reasons;
use crate::api::DaemonSet;
use crate::controller::ObjectKey;
use crate::controller::conditions::set_problem;
use crate::controller::expectations::{Expectations, Seen};
use crate::controller::object::ObjectReconciler;
use crate::controller::runner::Outcome;
use crate::predownload::workload as predownload;
use crate::workload::actions::{Create, Plan};
use crate::workload::adapter::{PodSetWorkload as _, new_pod_and_claims};
use crate::workload::claim::claim_objects;
use crate::workload::execute::{NewPod, NewPods, Problems};
use crate::workload::history::{History, HistoryStep};
use crate::workload::instance_id::{fresh_instance_id, random_u64};
use crate::workload::node_eval::NodeFit;
use crate::workload::node_resources::usage_by_node;
use crate::workload::ownership::is_controlled_by;
use crate::workload::revision::{REVISION_HASH_LABEL, RevisionError};
use crate::workload::revision_spec::RevisionSpec;
use crate::workload::selector_guard::refuse_unselected_template;
use crate::workload::update_guard;

impl ObjectReconciler for DaemonSetController {
    type Object = DaemonSet;
    type Error = SyncError;
    const KIND: &'static str = "DaemonSet";
    const READS: &'static [&'static str] = &[
        "Pod",
        "Node",
        "ControllerRevision",
        "DaemonSet",
        // The budgets the executor's disruptions are admitted by.
        "PodUnavailableBudget",
        "PodDisruptionBudget",
    ];
    const EXPECTATIONS_RECHECK: Duration = Duration::from_secs(5);

    fn objects(&self) -> &Store<DaemonSet> {
        &self.parts.stores.daemonsets
    }

    fn expectations(&self) -> &Expectations<ObjectKey> {
        &self.parts.expectations
    }

    fn seen(&self, namespace: &str, kind: &str, name: &str) -> Option<Seen> {
        self.parts.seen(namespace, kind, name)
    }

    fn caches_synced(&self) -> bool {
        self.parts
            .stores
            .sync
            .synced(<Self as ObjectReconciler>::READS)
    }

    /// What every pod-set kind keeps per set (create backoff, the template's verdict), then
    /// the DaemonSet's own per-node state.
    fn forget(&self, key: &ObjectKey) {
        self.parts.forget(key);
        self.unplaced.forget(key);
        for node in self.parts.stores.nodes.state() {
            self.failed_pod_backoff
                .forget(&(key.clone(), node.name_any()));
        }
    }

    /// Garbage collection removes the pods and revisions a deleted DaemonSet owns.
    fn needs_no_sync(&self, ds: &DaemonSet) -> bool {
        ds.meta().deletion_timestamp.is_some()
    }

    async fn sync(&self, key: &ObjectKey, ds: Arc<DaemonSet>) -> Result<Outcome, SyncError> {
        sync(self, key, &ds).await
    }
}

/// What one sync read: the pods the DaemonSet controls and its revisions.
struct Owned {
    pods: Vec<Arc<Pod>>,
    history: History,
    /// Revision name → its pod template.
    templates: BTreeMap<String, PodTemplateSpec>,
}

/// Builds the pod for a `Create` (whose instance id is the node), named
/// `<daemonset>-<five random characters>` so the executor can expect it by name.
struct DaemonPods<'a> {
    workload: &'a DaemonSetWorkload<'a>,
    templates: &'a BTreeMap<String, PodTemplateSpec>,
}

impl NewPods for DaemonPods<'_> {
    fn selector(&self) -> &LabelSelector {
        &self.workload.ds.spec.selector
    }

    /// Never asked: the plan names the node of every pod it creates.
    fn fresh_instance_id(&self, _: &BTreeSet<String>) -> String {
        String::new()
    }

    fn new_pod(&self, create: &Create) -> Option<NewPod> {
        if create.instance_id.is_empty() {
            return None;
        }
        let (mut pod, claims) = new_pod_and_claims(self.workload, self.templates, create)?;
        let suffix = fresh_instance_id(&BTreeSet::new(), &mut random_u64);
        pod.metadata.name = Some(format!("{}-{suffix}", self.workload.ds.name_any()));
        pod.metadata.generate_name = None;
        Some(NewPod { pod, claims })
    }
}

async fn sync(
    ctl: &DaemonSetController,
    key: &ObjectKey,
    ds: &DaemonSet,
) -> Result<Outcome, SyncError> {
    // Before any claim or create: a selector that misses the template would create pods
    // it cannot own, without end. The CRD refuses such a DaemonSet; an older CRD may not.
    let object = reference(ds);
    let guard = refuse_unselected_template(&ctl.parts, key, &object, ds);
    if let Some(refused) = guard.await? {
        return Ok(refused);
    }
    let Some(owned) = read_owned(ctl, key, ds).await? else {
        return Ok(Outcome::RequeueAfter(Duration::ZERO));
    };
    let now = Timestamp::now();
    let nodes: Vec<Arc<Node>> = ctl.parts.stores.nodes.state();
    let generation = ds.metadata.generation.unwrap_or(0);
    let (failed_backoff, backoff_wait) = failed_backoff(ctl, key, &nodes, generation);
    let uid = ds.uid().unwrap_or_default();
    let bound = ctl.parts.stores.pods.state();
    let usage = usage_by_node(bound.iter().map(AsRef::as_ref), |p| {
        is_controlled_by(&p.metadata, &uid)
    });
    let history = &owned.history;
    let snapshot = Snapshot {
        ds,
        nodes: nodes.iter().map(AsRef::as_ref).collect(),
        pods: owned.pods.iter().map(AsRef::as_ref).collect(),
        update_revision: &history.update_revision,
        current_revision: &history.current_revision,
        revisions: &owned.templates,
        failed_backoff: &failed_backoff,
        usage: &usage,
        now,
    };
    let mut planned = match plan::plan(&snapshot) {
        Ok(planned) => planned,
        Err(err) => return refuse(ctl, key, ds, &err.to_string()).await,
    };
    for node in &planned.failed_deleted_on {
        let message = format!("a pod on node {node} failed and was deleted");
        let entry = (key.clone(), node.clone());
        ctl.failed_pod_backoff
            .failed(&entry, generation, message, Instant::now());
        let note = format!(
            "A pod on node {node} failed; it is deleted, and the next one there is replaced only after a backoff that grows with each failure."
        );
        (ctl.parts.events)
            .warning(&reference(ds), FAILED_DAEMON_POD, "Delete", note)
            .await;
    }
    let mut problems = SyncProblems {
        failed_waiting_on: planned.failed_waiting_on.clone(),
        update_hold: planned.plan.update_hold.clone(),
        ..SyncProblems::default()
    };
    problems.update = hold_refused_update(ctl, key, ds, &owned, &mut planned.plan).await;
    let executed = execute(ctl, key, &snapshot, &owned, &planned, &mut problems).await;
    let fits = evaluate_nodes(ds, &snapshot.nodes, &usage);
    let by_node = node_pods(&snapshot.pods);
    report_unplaced(ctl, key, ds, &fits, &by_node).await;
    let revisions = Revisions {
        update: &history.update_revision,
        collision_count: Some(history.collision_count).filter(|c| *c > 0),
    };
    let status = compute_status(ds, &fits, &by_node, &revisions, &problems, now);
    let availability = (ds.spec.min_ready_seconds > 0
        && status.number_ready > status.number_available)
        .then(|| Duration::from_secs(u64::try_from(ds.spec.min_ready_seconds).unwrap_or(1)));
    (ctl.parts)
        .write_status::<DaemonSet, _>(key, ds.status.as_ref(), &status)
        .await?;
    let workload = DaemonSetWorkload {
        ds,
        desired: status.desired_number_scheduled,
        held_back: planned.held_back.clone(),
    };
    let updated_ready = updated_ready_nodes(ds, &fits, &by_node, &history.update_revision, now);
    predownload::sync(
        &ctl.parts,
        &key.namespace,
        &workload,
        &reference(ds),
        history,
        &owned.templates,
        updated_ready,
    )
    .await;
    (ctl.parts)
        .truncate_history::<DaemonSet>(
            key,
            &ds.name_any(),
            &owned.history,
            &owned.pods,
            ds.spec.history_limit(),
        )
        .await?;
    let create_retry = executed?;
    // A refused update is looked at again soon, without backoff growing.
    let refused = problems.update.is_some().then_some(Duration::from_secs(15));
    let requeues = [
        create_retry,
        planned.plan.requeue_after,
        backoff_wait,
        availability,
        refused,
    ];
    Ok(requeues
        .into_iter()
        .flatten()
        .fold(Outcome::Done, |outcome, after| {
            outcome.min(Outcome::RequeueAfter(after))
        }))
}

/// Remembers the nodes wanted but without room for a pod (their pod events requeue the
/// DaemonSet) and warns once about each newly found one.
async fn report_unplaced(
    ctl: &DaemonSetController,
    key: &ObjectKey,
    ds: &DaemonSet,
    fits: &BTreeMap<String, NodeFit>,
    by_node: &BTreeMap<String, NodePods<'_>>,
) {
    let unplaced: Reasons = (fits.iter())
        .filter(|(node, fit)| fit.wanted && by_node.get(*node).is_none_or(|p| p.all.is_empty()))
        .filter_map(|(node, fit)| Some((node.clone(), fit.unfit.as_ref()?.to_string())))
        .collect();
    for (node, why) in ctl.unplaced.record(key, unplaced) {
        let note = format!("The pod cannot be placed on node {node}: {why}.");
        (ctl.parts.events)
            .warning(&reference(ds), FAILED_PLACEMENT, "Create", note)
            .await;
    }
}

/// The nodes whose failed pods must wait, and how soon the first wait ends.
fn failed_backoff(
    ctl: &DaemonSetController,
    key: &ObjectKey,
    nodes: &[Arc<Node>],
    generation: i64,
) -> (BTreeSet<String>, Option<Duration>) {
    let now = Instant::now();
    let mut waiting = BTreeSet::new();
    let mut soonest: Option<Duration> = None;
    for node in nodes {
        let entry = (key.clone(), node.name_any());
        if let Some(wait) = ctl.failed_pod_backoff.waiting(&entry, generation, now) {
            waiting.insert(node.name_any());
            soonest = Some(soonest.map_or(wait.remaining, |s| s.min(wait.remaining)));
        }
    }
    (waiting, soonest)
}

/// Before the rollout disrupts its first pod: if the apiserver refuses (or could not be
/// asked about) the update revision's pod, every update disruption of the plan is held;
/// the message says why.
async fn hold_refused_update(
    ctl: &DaemonSetController,
    key: &ObjectKey,
    ds: &DaemonSet,
    owned: &Owned,
    planned: &mut Plan,
) -> Option<String> {
    let revision = &owned.history.update_revision;
    let workload = DaemonSetWorkload {
        ds,
        desired: 0,
        held_back: BTreeSet::new(),
    };
    let pod = || {
        // Pinned to any node: the dry run checks admission, not placement.
        let node = ctl.parts.stores.nodes.state().first()?.name_any();
        let create = Create {
            instance_id: node,
            revision: revision.clone(),
        };
        let (pod, _) = new_pod_and_claims(&workload, &owned.templates, &create)?;
        Some(pod)
    };
    update_guard::hold_refused_update(
        &ctl.parts,
        key,
        &reference(ds),
        FAILED_UPDATE,
        revision,
        pod,
        planned,
    )
    .await
}

/// Event: a failed pod is deleted (the native controller's reason).
const FAILED_DAEMON_POD: &str = "FailedDaemonPod";

/// Event: a node wants the pod but has no room for it.
const FAILED_PLACEMENT: &str = "FailedPlacement";

/// Holds the DaemonSet: no claim, create or delete, a FailedCreate condition saying why.
async fn refuse(
    ctl: &DaemonSetController,
    key: &ObjectKey,
    ds: &DaemonSet,
    message: &str,
) -> Result<Outcome, SyncError> {
    let mut status = ds.status.clone().unwrap_or_default();
    set_problem(
        &mut status.conditions,
        FAILED_CREATE,
        Some(message),
        Timestamp::now(),
    );
    (ctl.parts)
        .write_status::<DaemonSet, _>(key, ds.status.as_ref(), &status)
        .await?;
    ctl.parts
        .events
        .warning(&reference(ds), FAILED_CREATE, "Create", message.to_owned())
        .await;
    Ok(Outcome::Done)
}

/// Claims the DaemonSet's pods and makes sure a revision holds its current template;
/// `None` when a hash collision was counted and the sync must start over.
async fn read_owned(
    ctl: &DaemonSetController,
    key: &ObjectKey,
    ds: &DaemonSet,
) -> Result<Option<Owned>, SyncError> {
    let uid = ds.uid().unwrap_or_default();
    let in_namespace =
        |meta: &ObjectMeta| meta.namespace.as_deref() == Some(key.namespace.as_str());
    let pods_api: Api<Pod> = Api::namespaced(ctl.parts.client.clone(), &key.namespace);
    let candidates =
        (ctl.parts.stores.pods.state().into_iter()).filter(|p| in_namespace(&p.metadata));
    let workload = DaemonSetWorkload {
        ds,
        desired: 0,
        held_back: BTreeSet::new(),
    };
    let owner = workload.owner_reference();
    let pods = claim_objects(&pods_api, candidates, &owner, &ds.spec.selector).await?;
    let cached: Vec<Arc<ControllerRevision>> = (ctl.parts.stores.revisions.state().into_iter())
        .filter(|r| in_namespace(&r.metadata) && is_controlled_by(&r.metadata, &uid))
        .collect();
    let spec = RevisionSpec::template_only(ds.spec.template.clone());
    let data = spec.to_data()?;
    let collisions = ds
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let name = ds.name_any();
    let step = (ctl.parts.history_writer::<DaemonSet>(&key.namespace, &name))
        .sync_update_revision(cached, &data, collisions, "", |name, hash, number, data| {
            new_revision(ds, &owner, name, hash, number, data)
        })
        .await?;
    let HistoryStep::Ready(history) = step else {
        return Ok(None);
    };
    let mut templates: BTreeMap<String, PodTemplateSpec> = (history.revisions.iter())
        .filter_map(|r| Some((r.name.clone(), RevisionSpec::from_data(&r.data)?.template)))
        .collect();
    templates.insert(history.update_revision.clone(), spec.template);
    Ok(Some(Owned {
        pods,
        history,
        templates,
    }))
}

/// The ControllerRevision for the DaemonSet's template, labelled with the selector's
/// labels and the hash, owned by the DaemonSet.
fn new_revision(
    ds: &DaemonSet,
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    name: &str,
    hash: &str,
    number: i64,
    data: Vec<u8>,
) -> Result<ControllerRevision, RevisionError> {
    let value: serde_json::Value =
        serde_json::from_slice(&data).map_err(|source| RevisionError::Serialize { source })?;
    let mut labels = ds.spec.selector.match_labels.clone().unwrap_or_default();
    labels.insert(REVISION_HASH_LABEL.to_owned(), hash.to_owned());
    Ok(ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: ds.namespace(),
            labels: Some(labels),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(value)),
        revision: number,
    })
}

/// Runs the plan through the shared executor; problems for the status conditions are
/// filled in. `Ok(Some(wait))`: creates failed or are backing off.
async fn execute(
    ctl: &DaemonSetController,
    key: &ObjectKey,
    snapshot: &Snapshot<'_>,
    owned: &Owned,
    planned: &DaemonSetPlan,
    problems: &mut SyncProblems,
) -> Result<Option<Duration>, SyncError> {
    let ds = snapshot.ds;
    let workload = DaemonSetWorkload {
        ds,
        desired: 0,
        held_back: BTreeSet::new(),
    };
    let new_pods = DaemonPods {
        workload: &workload,
        templates: &owned.templates,
    };
    let mut shared = Problems {
        scale: problems.create.take(),
        update: problems.update.take(),
    };
    let object = reference(ds);
    let generation = ds.metadata.generation;
    let executed = (ctl.parts)
        .execute(
            key,
            &object,
            generation,
            &new_pods,
            &planned.plan,
            &mut shared,
        )
        .await;
    problems.create = shared.scale;
    problems.update = shared.update;
    Ok(executed?)
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;

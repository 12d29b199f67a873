//! The CloneSet reconciler: claims pods, keeps the revision history, asks `plan` what to
//! do and carries it out (`execute`), then writes status. The runner's shared preamble
//! (`controller::object`) has already found the CloneSet in the cache and waited out the
//! writes of earlier syncs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::{Resource as _, ResourceExt as _};

use super::controller::{CloneSetController, SyncError, reference};
use super::execute::{CloneSetPods, execute};
use super::guards;
use super::plan::{self, Snapshot};
use super::pods::{new_revision, owner_reference, revision_spec};
use super::progress::{ProgressEvent, progress_event};
use super::status::{FAILED_UPDATE, SyncProblems, compute_status};
use crate::api::CloneSet;
use crate::controller::ObjectKey;
use crate::controller::expectations::{Expectations, Seen};
use crate::controller::object::ObjectReconciler;
use crate::controller::runner::Outcome;
use crate::predownload::workload as predownload;
use crate::workload::actions::Plan;
use crate::workload::claim::claim_objects;
use crate::workload::history::{History, HistoryStep};
use crate::workload::ownership::is_controlled_by;
use crate::workload::revision_spec::RevisionSpec;
use crate::workload::selector_guard::refuse_unselected_template;
use crate::workload::update_guard;

impl ObjectReconciler for CloneSetController {
    type Object = CloneSet;
    type Error = SyncError;
    const KIND: &'static str = "CloneSet";
    const READS: &'static [&'static str] = &[
        "Pod",
        "Node",
        "PersistentVolumeClaim",
        "ControllerRevision",
        "CloneSet",
        // The budgets the executor's disruptions are admitted by.
        "PodUnavailableBudget",
        "PodDisruptionBudget",
    ];
    const EXPECTATIONS_RECHECK: Duration = Duration::from_secs(5);

    fn objects(&self) -> &Store<CloneSet> {
        &self.parts.stores.clonesets
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

    fn forget(&self, key: &ObjectKey) {
        self.parts.forget(key);
    }

    /// Garbage collection removes the pods, claims and revisions a deleted set owns.
    fn needs_no_sync(&self, cloneset: &CloneSet) -> bool {
        cloneset.meta().deletion_timestamp.is_some()
    }

    async fn sync(&self, key: &ObjectKey, cloneset: Arc<CloneSet>) -> Result<Outcome, SyncError> {
        sync(self, key, &cloneset).await
    }
}

/// What one sync read: the pods and claims the set controls, and its revisions.
struct Owned {
    pods: Vec<Arc<Pod>>,
    pvcs: Vec<Arc<PersistentVolumeClaim>>,
    history: History,
    /// Revision name → what it records.
    specs: BTreeMap<String, RevisionSpec>,
}

async fn sync(
    ctl: &CloneSetController,
    key: &ObjectKey,
    cloneset: &CloneSet,
) -> Result<Outcome, SyncError> {
    // Before any claim or create: a selector that misses the template would release every
    // pod, and create pods it cannot own without end.
    let object = reference(cloneset);
    let guard = refuse_unselected_template(&ctl.parts, key, &object, cloneset);
    if let Some(refused) = guard.await? {
        return Ok(refused);
    }
    let Some(owned) = read_owned(ctl, key, cloneset).await? else {
        return Ok(Outcome::RequeueAfter(Duration::ZERO));
    };
    let now = Timestamp::now();
    let history = &owned.history;
    let snapshot = Snapshot {
        cloneset,
        pods: owned.pods.iter().map(AsRef::as_ref).collect(),
        pvcs: owned.pvcs.iter().map(AsRef::as_ref).collect(),
        update_revision: &history.update_revision,
        current_revision: &history.current_revision,
        revisions: &owned.specs,
        now,
    };
    let mut planned = plan::plan(&snapshot)?;
    let mut problems = SyncProblems {
        update_hold: planned.plan.update_hold.clone(),
        ..SyncProblems::default()
    };
    hold_refused_update(ctl, key, cloneset, &owned, &mut planned.plan, &mut problems).await;
    let new_pods = CloneSetPods {
        cloneset,
        specs: &owned.specs,
        taken_ids: &planned.taken_ids,
    };
    let executed = execute(ctl, key, &new_pods, &planned, &mut problems).await;

    let (new_status, status_requeue) = compute_status(
        cloneset,
        &snapshot.pods,
        &history.update_revision,
        &history.current_revision,
        history.collision_count,
        &problems,
        now,
    );
    (ctl.parts)
        .write_status::<CloneSet, _>(key, cloneset.status.as_ref(), &new_status)
        .await?;
    if let Some(event) = progress_event(cloneset.status.as_ref(), &new_status) {
        publish_progress(ctl, cloneset, event).await;
    }
    let object_ref = reference(cloneset);
    let (history, specs) = (&owned.history, &owned.specs);
    let updated_ready = new_status.updated_ready_replicas;
    predownload::sync(
        &ctl.parts,
        &key.namespace,
        cloneset,
        &object_ref,
        history,
        specs,
        updated_ready,
    )
    .await;
    let name = cloneset.name_any();
    let limit = cloneset.spec.history_limit();
    (ctl.parts)
        .truncate_history::<CloneSet>(key, &name, &owned.history, &owned.pods, limit)
        .await?;

    let create_retry = executed?;
    let requeues = [
        create_retry,
        planned.plan.requeue_after,
        status_requeue,
        problems_requeue(&problems),
    ];
    Ok(requeues
        .into_iter()
        .flatten()
        .fold(Outcome::Done, |outcome, after| {
            outcome.min(Outcome::RequeueAfter(after))
        }))
}

/// Claims the set's pods, lists its claims, and makes sure a revision holds its current
/// template; `None` when a hash collision was counted and the sync must start over.
async fn read_owned(
    ctl: &CloneSetController,
    key: &ObjectKey,
    cloneset: &CloneSet,
) -> Result<Option<Owned>, SyncError> {
    let uid = cloneset.uid().unwrap_or_default();
    let in_namespace = |namespace: Option<&str>| namespace == Some(key.namespace.as_str());
    let pods_api: Api<Pod> = Api::namespaced(ctl.parts.client.clone(), &key.namespace);
    let candidates = ctl
        .parts
        .stores
        .pods
        .state()
        .into_iter()
        .filter(|p| in_namespace(p.metadata.namespace.as_deref()));
    let owner = owner_reference(cloneset);
    let pods = claim_objects(&pods_api, candidates, &owner, &cloneset.spec.selector).await?;
    let controlled = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        in_namespace(meta.namespace.as_deref()) && is_controlled_by(meta, &uid)
    };
    let pvcs: Vec<Arc<PersistentVolumeClaim>> = (ctl.parts.stores.pvcs.state().into_iter())
        .filter(|p| controlled(&p.metadata))
        .collect();
    let cached: Vec<Arc<ControllerRevision>> = (ctl.parts.stores.revisions.state().into_iter())
        .filter(|r| controlled(&r.metadata))
        .collect();

    let spec = revision_spec(cloneset);
    let data = spec.to_data()?;
    let status = cloneset.status.clone().unwrap_or_default();
    let name = cloneset.name_any();
    let step = ctl
        .parts
        .history_writer::<CloneSet>(&key.namespace, &name)
        .sync_update_revision(
            cached,
            &data,
            status.collision_count.unwrap_or(0),
            &status.current_revision,
            |name, hash, number, data| new_revision(cloneset, name, hash, number, data),
        )
        .await?;
    let HistoryStep::Ready(history) = step else {
        return Ok(None);
    };
    let mut specs: BTreeMap<String, RevisionSpec> = (history.revisions.iter())
        .filter_map(|r| Some((r.name.clone(), RevisionSpec::from_data(&r.data)?)))
        .collect();
    specs.insert(history.update_revision.clone(), spec);
    Ok(Some(Owned {
        pods,
        pvcs,
        history,
        specs,
    }))
}

/// Before a rollout disrupts its first pod: if the apiserver refuses (or could not be
/// asked about) the update revision's pod, hold every update disruption of the plan.
async fn hold_refused_update(
    ctl: &CloneSetController,
    key: &ObjectKey,
    cloneset: &CloneSet,
    owned: &Owned,
    planned: &mut Plan,
    problems: &mut SyncProblems,
) {
    let revision = &owned.history.update_revision;
    let pod = || {
        let spec = owned.specs.get(revision)?;
        Some(guards::update_revision_pod(cloneset, revision, spec))
    };
    let reference = reference(cloneset);
    let held = update_guard::hold_refused_update(
        &ctl.parts,
        key,
        &reference,
        FAILED_UPDATE,
        revision,
        pod,
        planned,
    )
    .await;
    if let Some(message) = held {
        problems.update = Some(message);
    }
}

/// Publishes the event behind a change of the Progressing reason.
async fn publish_progress(ctl: &CloneSetController, cloneset: &CloneSet, event: ProgressEvent) {
    let object = reference(cloneset);
    if event.warning {
        ctl.parts
            .events
            .warning(&object, &event.reason, "Progress", event.note)
            .await;
    } else {
        ctl.parts
            .events
            .normal(&object, &event.reason, "Progress", event.note)
            .await;
    }
}

/// An unreachable agent or a refused update is looked at again soon, without backoff
/// growing: nothing is wrong with the CloneSet itself.
fn problems_requeue(problems: &SyncProblems) -> Option<Duration> {
    problems.update.as_ref().map(|_| Duration::from_secs(15))
}

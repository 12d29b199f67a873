//! The StatefulSet reconciler: claims pods, keeps the revision history, asks `plan` what
//! to do and carries it out through the shared executor, then writes status. The runner's
//! shared preamble (`controller::object`) has already found the set in the cache and
//! waited out the writes of earlier syncs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Resource as _, ResourceExt as _};

use super::controller::{StatefulSetController, SyncError, reference};
use super::plan::{self, Snapshot};
use super::retention::ClaimOwners;
use super::status::{
    FAILED_UPDATE_POD, Revisions, SyncProblems, WAITING_FOR_POD, compute_status, stuck_warning,
};
use crate::api::StatefulSet;
use crate::controller::ObjectKey;
use crate::controller::api_error::api_error;
use crate::controller::expectations::{Expectation, Expectations, Seen, resource_version};
use crate::controller::object::ObjectReconciler;
use crate::controller::runner::Outcome;
use crate::predownload::workload as predownload;
use crate::workload::actions::{Create, Plan};
use crate::workload::adapter::{PodSetWorkload as _, new_pod_and_claims};
use crate::workload::claim::claim_objects;
use crate::workload::execute::{NewPod, NewPods, Problems};
use crate::workload::history::{History, HistoryStep, new_revision};
use crate::workload::ownership::is_controlled_by;
use crate::workload::revision_spec::RevisionSpec;
use crate::workload::selector_guard::refuse_unselected_template;
use crate::workload::update_guard;

impl ObjectReconciler for StatefulSetController {
    type Object = StatefulSet;
    type Error = SyncError;
    const KIND: &'static str = "StatefulSet";
    const READS: &'static [&'static str] = &[
        "Pod",
        "Node",
        "PersistentVolumeClaim",
        "ControllerRevision",
        "StatefulSet",
        // The budgets the executor's disruptions are admitted by.
        "PodUnavailableBudget",
        "PodDisruptionBudget",
    ];
    const EXPECTATIONS_RECHECK: Duration = Duration::from_secs(5);

    fn objects(&self) -> &Store<StatefulSet> {
        &self.parts.stores.statefulsets
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

    /// Garbage collection removes the pods and revisions a deleted set owns, and the
    /// claims it owns under `whenDeleted: Delete`.
    fn needs_no_sync(&self, set: &StatefulSet) -> bool {
        set.meta().deletion_timestamp.is_some()
    }

    async fn sync(&self, key: &ObjectKey, set: Arc<StatefulSet>) -> Result<Outcome, SyncError> {
        sync(self, key, &set).await
    }
}

/// What one sync read: the pods the set controls, the claims in its namespace, and its
/// revisions.
struct Owned {
    pods: Vec<Arc<Pod>>,
    claims: Vec<Arc<PersistentVolumeClaim>>,
    history: History,
    /// Revision name → its pod template.
    templates: BTreeMap<String, PodTemplateSpec>,
}

/// The set's pods and claims for a `Create` (whose instance id is the ordinal).
struct StatefulSetPods<'a> {
    set: &'a StatefulSet,
    templates: &'a BTreeMap<String, PodTemplateSpec>,
}

impl NewPods for StatefulSetPods<'_> {
    fn selector(&self) -> &LabelSelector {
        &self.set.spec.selector
    }

    /// Never asked: the plan names every pod it creates by its ordinal.
    fn fresh_instance_id(&self, _: &BTreeSet<String>) -> String {
        String::new()
    }

    fn new_pod(&self, create: &Create) -> Option<NewPod> {
        if create.instance_id.is_empty() {
            return None;
        }
        let (pod, claims) = new_pod_and_claims(self.set, self.templates, create)?;
        Some(NewPod { pod, claims })
    }
}

async fn sync(
    ctl: &StatefulSetController,
    key: &ObjectKey,
    set: &StatefulSet,
) -> Result<Outcome, SyncError> {
    // Before any claim or create: a selector that misses the template would create pods
    // it cannot own, without end. The CRD refuses such a set; an older CRD may not have.
    let object = reference(set);
    let guard = refuse_unselected_template(&ctl.parts, key, &object, set);
    if let Some(refused) = guard.await? {
        return Ok(refused);
    }
    let Some(owned) = read_owned(ctl, key, set).await? else {
        return Ok(Outcome::RequeueAfter(Duration::ZERO));
    };
    let now = Timestamp::now();
    let history = &owned.history;
    let snapshot = Snapshot {
        set,
        pods: owned.pods.iter().map(AsRef::as_ref).collect(),
        claims: owned.claims.iter().map(AsRef::as_ref).collect(),
        update_revision: &history.update_revision,
        current_revision: &history.current_revision,
        revisions: &owned.templates,
        now,
    };
    let mut planned = plan::plan(&snapshot)?;
    let mut problems = SyncProblems {
        halted: planned.halted.clone(),
        update_hold: planned.plan.update_hold.clone(),
        ..SyncProblems::default()
    };
    problems.update = hold_refused_update(ctl, key, set, &owned, &mut planned.plan).await;
    // Before any delete: a scaled-away pod must own its claims when it goes.
    write_claim_owners(ctl, key, &planned.claim_owners).await?;
    let executed = execute(ctl, key, set, &owned, &planned.plan, &mut problems).await;
    let revisions = Revisions {
        update: &history.update_revision,
        current: &history.current_revision,
        collision_count: history.collision_count,
    };
    let (new_status, status_requeue) =
        compute_status(set, &snapshot.pods, revisions, &problems, now);
    (ctl.parts)
        .write_status::<StatefulSet, _>(key, set.status.as_ref(), &new_status)
        .await?;
    if let Some(note) =
        (problems.halted.as_ref()).and_then(|h| stuck_warning(h, &snapshot.pods, now))
    {
        // Repeats every look while it lasts; the event recorder counts them as one series.
        let action = "Scale";
        ctl.parts
            .events
            .warning(&reference(set), WAITING_FOR_POD, action, note)
            .await;
    }
    let updated_ready = new_status.updated_ready_replicas;
    let (object_ref, templates) = (reference(set), &owned.templates);
    predownload::sync(
        &ctl.parts,
        &key.namespace,
        set,
        &object_ref,
        history,
        templates,
        updated_ready,
    )
    .await;
    let limit = set.spec.history_limit();
    (ctl.parts)
        .truncate_history::<StatefulSet>(key, &set.name_any(), &owned.history, &owned.pods, limit)
        .await?;
    let create_retry = executed?;
    // A halt or a refused update is looked at again soon, without backoff growing:
    // nothing is wrong with the set itself.
    let problem_requeue =
        (problems.halted.is_some() || problems.update.is_some()).then_some(Duration::from_secs(15));
    let requeues = [
        create_retry,
        planned.plan.requeue_after,
        status_requeue,
        problem_requeue,
    ];
    Ok(requeues
        .into_iter()
        .flatten()
        .fold(Outcome::Done, |outcome, after| {
            outcome.min(Outcome::RequeueAfter(after))
        }))
}

/// Claims the set's pods, reads the claims of its namespace, and makes sure a revision
/// holds its current template; `None` when a hash collision was counted and the sync must
/// start over.
async fn read_owned(
    ctl: &StatefulSetController,
    key: &ObjectKey,
    set: &StatefulSet,
) -> Result<Option<Owned>, SyncError> {
    let uid = set.uid().unwrap_or_default();
    let in_namespace =
        |meta: &ObjectMeta| meta.namespace.as_deref() == Some(key.namespace.as_str());
    let pods_api: Api<Pod> = Api::namespaced(ctl.parts.client.clone(), &key.namespace);
    let candidates =
        (ctl.parts.stores.pods.state().into_iter()).filter(|p| in_namespace(&p.metadata));
    let owner = set.owner_reference();
    let pods = claim_objects(&pods_api, candidates, &owner, &set.spec.selector).await?;
    // A StatefulSet's claims carry no controller reference (the native controller's do
    // not either); the plan finds them by name.
    let claims: Vec<Arc<PersistentVolumeClaim>> = (ctl.parts.stores.pvcs.state().into_iter())
        .filter(|p| in_namespace(&p.metadata))
        .collect();
    let cached: Vec<Arc<ControllerRevision>> = (ctl.parts.stores.revisions.state().into_iter())
        .filter(|r| in_namespace(&r.metadata) && is_controlled_by(&r.metadata, &uid))
        .collect();
    let spec = RevisionSpec::template_only(set.spec.template.clone());
    let data = spec.to_data()?;
    let status = set.status.clone().unwrap_or_default();
    let name = set.name_any();
    let step = ctl
        .parts
        .history_writer::<StatefulSet>(&key.namespace, &name)
        .sync_update_revision(
            cached,
            &data,
            status.collision_count.unwrap_or(0),
            &status.current_revision,
            |name, hash, number, data| new_revision(set, name, hash, number, data),
        )
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
        claims,
        history,
        templates,
    }))
}

/// Before a rollout disrupts its first pod: if the apiserver refuses (or could not be
/// asked about) the update revision's pod, every update disruption of the plan is held;
/// the message says why.
async fn hold_refused_update(
    ctl: &StatefulSetController,
    key: &ObjectKey,
    set: &StatefulSet,
    owned: &Owned,
    planned: &mut Plan,
) -> Option<String> {
    let revision = &owned.history.update_revision;
    let pod = || {
        let create = Create {
            instance_id: set.spec.start_ordinal().to_string(),
            revision: revision.clone(),
        };
        let (mut pod, _) = new_pod_and_claims(set, &owned.templates, &create)?;
        // The dry run must not collide with a live pod's name.
        pod.metadata.generate_name = Some(format!("{}-", set.name_any()));
        pod.metadata.name = None;
        Some(pod)
    };
    let reference = reference(set);
    update_guard::hold_refused_update(
        &ctl.parts,
        key,
        &reference,
        FAILED_UPDATE_POD,
        revision,
        pod,
        planned,
    )
    .await
}

/// Writes the claims' owner references the retention policy asks for, each conditional
/// on the resourceVersion it was computed from; the cache must show each write before
/// the next sync plans (expectations).
async fn write_claim_owners(
    ctl: &StatefulSetController,
    key: &ObjectKey,
    changes: &[ClaimOwners],
) -> Result<(), SyncError> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctl.parts.client.clone(), &key.namespace);
    for change in changes {
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": change.resource_version,
                "ownerReferences": change.owner_references,
            }
        });
        let written = api
            .patch(&change.claim, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(api_error(format!(
                "setting the owner references of claim {} (persistentVolumeClaimRetentionPolicy)",
                change.claim
            )))?;
        ctl.parts.expectations.expect(
            key,
            Expectation::Update {
                kind: "PersistentVolumeClaim",
                name: change.claim.clone(),
                resource_version: resource_version(&written.metadata),
            },
        );
        tracing::info!(claim = %change.claim, "claim owner references follow the retention policy");
    }
    Ok(())
}

/// Runs the plan through the shared executor; problems for the status conditions are
/// filled in. `Ok(Some(wait))`: creates failed or are backing off.
async fn execute(
    ctl: &StatefulSetController,
    key: &ObjectKey,
    set: &StatefulSet,
    owned: &Owned,
    plan: &Plan,
    problems: &mut SyncProblems,
) -> Result<Option<Duration>, SyncError> {
    let new_pods = StatefulSetPods {
        set,
        templates: &owned.templates,
    };
    let mut shared = Problems {
        scale: problems.create.take(),
        update: problems.update.take(),
    };
    let object = reference(set);
    let generation = set.metadata.generation;
    let executed = (ctl.parts)
        .execute(key, &object, generation, &new_pods, plan, &mut shared)
        .await;
    problems.create = shared.scale;
    problems.update = shared.update;
    Ok(executed?)
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;

//! The StatefulSet reconciler: claims pods, keeps the revision history, asks `plan` what
//! to do and carries it out through the shared executor, then writes status. The runner's
//! shared preamble (`controller::object`) has already found the set in the cache and
//! waited out the writes of earlier syncs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Resource as _, ResourceExt as _};

use super::controller::{StatefulSetController, SyncError, reference};
use super::plan::{self, Snapshot};
use super::status::{
    FAILED_CREATE_POD, Revisions, SyncProblems, WAITING_FOR_POD, compute_status, stuck_warning,
};
use crate::api::{StatefulSet, StatefulSetStatus};
use crate::budget::admission::KubeBudgets;
use crate::cloneset::pods::RevisionSpec;
use crate::controller::ObjectKey;
use crate::controller::api_error::api_error;
use crate::controller::conditions::set_problem;
use crate::controller::expectations::{Expectations, Seen};
use crate::controller::object::ObjectReconciler;
use crate::controller::runner::Outcome;
use crate::controller::status_patch::status_merge_patch;
use crate::workload::actions::{Create, Plan};
use crate::workload::adapter::{PodSetWorkload as _, new_pod_and_claims};
use crate::workload::claim::claim_objects;
use crate::workload::deletion::REVISION_LABEL;
use crate::workload::execute::{Executor, KubeParts, KubePodWrites, NewPod, NewPods, Problems};
use crate::workload::history::{History, HistoryStep, HistoryWriter};
use crate::workload::ownership::is_controlled_by;
use crate::workload::revision::{REVISION_HASH_LABEL, RevisionError};
use crate::workload::selector::selector_selects_template;

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
        &self.stores.statefulsets
    }

    fn expectations(&self) -> &Expectations<ObjectKey> {
        &self.expectations
    }

    fn seen(&self, namespace: &str, kind: &str, name: &str) -> Option<Seen> {
        StatefulSetController::seen(self, namespace, kind, name)
    }

    fn caches_synced(&self) -> bool {
        self.stores.sync.synced(<Self as ObjectReconciler>::READS)
    }

    fn forget(&self, key: &ObjectKey) {
        self.create_backoff.forget(key);
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
    let labels = (set.spec.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    if let Err(mismatch) = selector_selects_template(&set.spec.selector, &labels) {
        return refuse_mismatched_selector(ctl, key, set, &mismatch.to_string()).await;
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
    let planned = plan::plan(&snapshot)?;
    let mut problems = SyncProblems {
        halted: planned.halted.clone(),
        ..SyncProblems::default()
    };
    let executed = execute(ctl, key, set, &owned, &planned.plan, &mut problems).await;
    let revisions = Revisions {
        update: &history.update_revision,
        current: &history.current_revision,
        collision_count: history.collision_count,
    };
    let (new_status, status_requeue) =
        compute_status(set, &snapshot.pods, revisions, &problems, now);
    write_status(ctl, key, set, &new_status).await?;
    if let Some(note) =
        (problems.halted.as_ref()).and_then(|h| stuck_warning(h, &snapshot.pods, now))
    {
        // Repeats every look while it lasts; the event recorder counts them as one series.
        let action = "Scale";
        ctl.events
            .warning(&reference(set), WAITING_FOR_POD, action, note)
            .await;
    }
    truncate_history(ctl, key, set, &owned).await?;
    let create_retry = executed?;
    let halted_requeue = problems.halted.as_ref().map(|_| Duration::from_secs(15));
    let requeues = [
        create_retry,
        planned.plan.requeue_after,
        status_requeue,
        halted_requeue,
    ];
    Ok(requeues
        .into_iter()
        .flatten()
        .fold(Outcome::Done, |outcome, after| {
            outcome.min(Outcome::RequeueAfter(after))
        }))
}

/// Holds the set: no claim, create or delete, a FailedCreatePod condition saying why.
async fn refuse_mismatched_selector(
    ctl: &StatefulSetController,
    key: &ObjectKey,
    set: &StatefulSet,
    message: &str,
) -> Result<Outcome, SyncError> {
    let mut status = set.status.clone().unwrap_or_default();
    set_problem(
        &mut status.conditions,
        FAILED_CREATE_POD,
        Some(message),
        Timestamp::now(),
    );
    write_status(ctl, key, set, &status).await?;
    Ok(Outcome::Done)
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
    let pods_api: Api<Pod> = Api::namespaced(ctl.client.clone(), &key.namespace);
    let candidates = (ctl.stores.pods.state().into_iter()).filter(|p| in_namespace(&p.metadata));
    let owner = set.owner_reference();
    let pods = claim_objects(&pods_api, candidates, &owner, &set.spec.selector).await?;
    // A StatefulSet's claims carry no controller reference (the native controller's do
    // not either); the plan finds them by name.
    let claims: Vec<Arc<PersistentVolumeClaim>> = (ctl.stores.pvcs.state().into_iter())
        .filter(|p| in_namespace(&p.metadata))
        .collect();
    let cached: Vec<Arc<ControllerRevision>> = (ctl.stores.revisions.state().into_iter())
        .filter(|r| in_namespace(&r.metadata) && is_controlled_by(&r.metadata, &uid))
        .collect();
    let spec = RevisionSpec {
        template: set.spec.template.clone(),
        volume_claim_templates: Vec::new(),
    };
    let data = spec.to_data()?;
    let status = set.status.clone().unwrap_or_default();
    let name = set.name_any();
    let step = history_writer(ctl, key, &name)
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

/// The ControllerRevision for the set's template, labelled with the selector's labels
/// and the hash, owned by the set.
fn new_revision(
    set: &StatefulSet,
    name: &str,
    hash: &str,
    number: i64,
    data: Vec<u8>,
) -> Result<ControllerRevision, RevisionError> {
    let value: serde_json::Value =
        serde_json::from_slice(&data).map_err(|source| RevisionError::Serialize { source })?;
    let mut labels = set.spec.selector.match_labels.clone().unwrap_or_default();
    labels.insert(REVISION_HASH_LABEL.to_owned(), hash.to_owned());
    Ok(ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: set.namespace(),
            labels: Some(labels),
            owner_references: Some(vec![set.owner_reference()]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(value)),
        revision: number,
    })
}

fn history_writer<'a>(
    ctl: &StatefulSetController,
    key: &ObjectKey,
    name: &'a str,
) -> HistoryWriter<'a, StatefulSet> {
    HistoryWriter {
        revisions: Api::namespaced(ctl.client.clone(), &key.namespace),
        owner: Api::namespaced(ctl.client.clone(), &key.namespace),
        owner_name: name,
    }
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
    let reference = reference(set);
    let parts = KubeParts {
        client: &ctl.client,
        claims: &ctl.stores.pvcs,
        nodes: &ctl.stores.nodes,
        agents: &ctl.agents,
        events: &ctl.events,
    };
    let writes = KubePodWrites::new(parts, &key.namespace, &reference);
    let budgets = KubeBudgets {
        client: &ctl.client,
        stores: &ctl.stores,
        namespace: &key.namespace,
    };
    let new_pods = StatefulSetPods {
        set,
        templates: &owned.templates,
    };
    let executor = Executor {
        key,
        generation: set.metadata.generation.unwrap_or(0),
        writes: &writes,
        budgets: &budgets,
        new_pods: &new_pods,
        expectations: &ctl.expectations,
        create_backoff: &ctl.create_backoff,
    };
    let mut shared = Problems::default();
    let executed = executor.execute(plan, &mut shared).await;
    problems.create = shared.scale;
    problems.update = shared.update;
    Ok(executed?)
}

/// Writes the status when it changed.
async fn write_status(
    ctl: &StatefulSetController,
    key: &ObjectKey,
    set: &StatefulSet,
    new_status: &StatefulSetStatus,
) -> Result<(), SyncError> {
    if set.status.as_ref() == Some(new_status) {
        return Ok(());
    }
    let api: Api<StatefulSet> = Api::namespaced(ctl.client.clone(), &key.namespace);
    api.patch_status(
        &key.name,
        &PatchParams::default(),
        &Patch::Merge(status_merge_patch(set.status.as_ref(), new_status)),
    )
    .await
    .map_err(api_error("writing status"))?;
    Ok(())
}

/// Deletes revisions beyond the history limit that no pod uses.
async fn truncate_history(
    ctl: &StatefulSetController,
    key: &ObjectKey,
    set: &StatefulSet,
    owned: &Owned,
) -> Result<(), SyncError> {
    let pod_labels: Vec<Option<&str>> = (owned.pods.iter())
        .map(|p| {
            (p.metadata.labels.as_ref())
                .and_then(|l| l.get(REVISION_LABEL))
                .map(String::as_str)
        })
        .collect();
    let name = set.name_any();
    history_writer(ctl, key, &name)
        .truncate(&owned.history, &pod_labels, set.spec.history_limit())
        .await?;
    Ok(())
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;

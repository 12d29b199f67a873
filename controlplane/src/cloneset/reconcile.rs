//! The CloneSet reconciler: reads the shared caches, claims pods, keeps the revision
//! history, asks `plan` what to do and carries it out (`execute`), then writes status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource as _, ResourceExt as _};
use serde_json::json;

use super::claim::{Claim, claim};
use super::execute::Executor;
use super::guards;
use super::plan::{self, PlanError, Snapshot};
use super::pods::{RevisionSpec, new_revision, owner_reference};
use super::predownload;
use super::status::{SyncProblems, compute_status};
use crate::api::CloneSet;
use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::ApiError;
use crate::controller::create_backoff::CreateBackoff;
use crate::controller::events::EventSink;
use crate::controller::expectations::{EXPECTATION_TIMEOUT, Expectations, Seen};
use crate::controller::pod_conditions::PodConditions;
use crate::controller::runner::{Outcome, Reconciler};
use crate::predownload::jobs;
use crate::workload::deletion::REVISION_LABEL;
use crate::workload::ownership::is_controlled_by;
use crate::workload::revision::{
    self, Revision, RevisionError, UpdateRevisionPlan, current_revision_name, revisions_to_truncate,
};
use crate::workload::template_check::TemplateChecks;

/// Why a CloneSet sync failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Revision(#[from] RevisionError),
    #[error("creating pods: {0}")]
    Create(String),
}

pub(super) use crate::controller::api_error::api_error;

/// The CloneSet controller's state, shared by its workers.
pub struct CloneSetController {
    pub(super) client: kube::Client,
    pub(super) stores: Stores,
    pub(super) agents: Arc<dyn PodConditions>,
    pub(super) events: EventSink,
    pub(super) expectations: Expectations<ObjectKey>,
    pub(super) create_backoff: CreateBackoff<ObjectKey>,
    pub(super) template_checks: TemplateChecks<ObjectKey>,
}

impl CloneSetController {
    pub fn new(
        client: kube::Client,
        stores: Stores,
        agents: Arc<dyn PodConditions>,
        events: EventSink,
    ) -> Self {
        Self {
            client,
            stores,
            agents,
            events,
            expectations: Expectations::new(EXPECTATION_TIMEOUT),
            create_backoff: CreateBackoff::default(),
            template_checks: TemplateChecks::default(),
        }
    }

    fn seen(&self, namespace: &str, kind: &str, name: &str) -> Option<Seen> {
        match kind {
            "Pod" => self
                .stores
                .pods
                .get(&ObjectRef::new(name).within(namespace))
                .map(|p| Seen::of(&p.metadata)),
            "PersistentVolumeClaim" => self
                .stores
                .pvcs
                .get(&ObjectRef::new(name).within(namespace))
                .map(|p| Seen::of(&p.metadata)),
            _ => None,
        }
    }
}

impl Reconciler for CloneSetController {
    type Key = ObjectKey;
    type Error = SyncError;
    const KIND: &'static str = "CloneSet";
    const READS: &'static [&'static str] = &[
        "Pod",
        "Node",
        "PersistentVolumeClaim",
        "ControllerRevision",
        "CloneSet",
    ];

    fn caches_synced(&self) -> bool {
        self.stores.sync.synced(Self::READS)
    }

    async fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, SyncError> {
        let Some(cloneset) = self
            .stores
            .clonesets
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
        else {
            self.expectations.forget(key);
            self.create_backoff.forget(key);
            self.template_checks.forget(key);
            return Ok(Outcome::Done);
        };
        if cloneset.meta().deletion_timestamp.is_some() {
            // Garbage collection removes the pods, claims and revisions it owns.
            return Ok(Outcome::Done);
        }
        if let Err(pending) = self
            .expectations
            .satisfied(key, &|kind, name| self.seen(&key.namespace, kind, name))
        {
            tracing::debug!(?pending, "waiting for the cache to show earlier writes");
            return Ok(Outcome::RequeueAfter(Duration::from_secs(5)));
        }
        sync(self, key, &cloneset).await
    }

    fn all_keys(&self) -> Vec<ObjectKey> {
        self.stores
            .clonesets
            .state()
            .iter()
            .map(|cs| ObjectKey::of(cs.as_ref()))
            .collect()
    }
}

/// The reference Events are attached to.
pub(super) fn reference(cloneset: &CloneSet) -> ObjectReference {
    cloneset.object_ref(&())
}

async fn sync(
    ctl: &CloneSetController,
    key: &ObjectKey,
    cloneset: &CloneSet,
) -> Result<Outcome, SyncError> {
    // Before any claim or create: a selector that misses the template would release every
    // pod, and create pods it cannot own without end.
    if let Err(mismatch) = guards::check_selector(cloneset) {
        return guards::refuse_mismatched_selector(ctl, key, cloneset, &mismatch).await;
    }
    let uid = cloneset.uid().unwrap_or_default();
    let selector = &cloneset.spec.selector;
    let pods_api: Api<Pod> = Api::namespaced(ctl.client.clone(), &key.namespace);

    let mut pods: Vec<Arc<Pod>> = Vec::new();
    for pod in ctl.stores.pods.state() {
        if pod.metadata.namespace.as_deref() != Some(&key.namespace) {
            continue;
        }
        match claim(&pod.metadata, &uid, selector, false) {
            Claim::Owned => pods.push(pod),
            Claim::Ignore => {}
            Claim::Adopt => {
                let patch = json!({ "metadata": {
                    "ownerReferences": [super::pods::owner_reference(cloneset)],
                    "uid": pod.metadata.uid,
                } });
                let adopted = pods_api
                    .patch(
                        &pod.name_any(),
                        &PatchParams::default(),
                        &Patch::Strategic(patch),
                    )
                    .await
                    .map_err(api_error(format!("adopting pod {}", pod.name_any())))?;
                pods.push(Arc::new(adopted));
            }
            Claim::Release => {
                let patch = json!({ "metadata": {
                    "ownerReferences": [{ "$patch": "delete", "uid": uid }],
                    "uid": pod.metadata.uid,
                } });
                pods_api
                    .patch(
                        &pod.name_any(),
                        &PatchParams::default(),
                        &Patch::Strategic(patch),
                    )
                    .await
                    .map_err(api_error(format!("releasing pod {}", pod.name_any())))?;
            }
        }
    }
    let pvcs: Vec<Arc<PersistentVolumeClaim>> = ctl
        .stores
        .pvcs
        .state()
        .into_iter()
        .filter(|p| {
            p.metadata.namespace.as_deref() == Some(&key.namespace)
                && is_controlled_by(&p.metadata, &uid)
        })
        .collect();

    // Revisions.
    let history: Vec<Arc<ControllerRevision>> = ctl
        .stores
        .revisions
        .state()
        .into_iter()
        .filter(|r| {
            r.metadata.namespace.as_deref() == Some(&key.namespace)
                && is_controlled_by(&r.metadata, &uid)
        })
        .collect();
    let revisions: Vec<Revision> = history.iter().map(|r| to_revision(r)).collect();
    let spec = RevisionSpec::of(cloneset);
    let data = spec.to_data()?;
    let status = cloneset.status.clone().unwrap_or_default();
    let mut collision_count = status.collision_count.unwrap_or(0);
    let name = cloneset.name_any();
    let revisions_api: Api<ControllerRevision> =
        Api::namespaced(ctl.client.clone(), &key.namespace);
    let update_plan = revision::plan_update_revision(&name, &revisions, &data, collision_count);
    match &update_plan {
        UpdateRevisionPlan::Unchanged { .. } => {}
        UpdateRevisionPlan::Renumber { name, number } => {
            revisions_api
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "revision": number })),
                )
                .await
                .map_err(api_error(format!("renumbering revision {name}")))?;
        }
        UpdateRevisionPlan::Create {
            name: revision_name,
            hash,
            number,
            collision_count: count,
        } => {
            collision_count = *count;
            let object = new_revision(cloneset, revision_name, hash, *number, data.clone())?;
            match revisions_api.create(&PostParams::default(), &object).await {
                Ok(_) => {}
                // Already there (our own earlier write not yet in the cache): same data is
                // fine; other data is a hash collision, counted so the next name differs.
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    let existing = revisions_api
                        .get(revision_name)
                        .await
                        .map_err(api_error(format!("reading revision {revision_name}")))?;
                    if to_revision(&existing).data != data {
                        collision_count += 1;
                        write_collision_count(ctl, key, collision_count).await?;
                        return Ok(Outcome::RequeueAfter(Duration::ZERO));
                    }
                }
                Err(err) => {
                    return Err(SyncError::from(api_error(format!(
                        "creating revision {revision_name}"
                    ))(err)));
                }
            }
        }
    }
    let update_revision = update_plan.name().to_owned();
    let current_revision =
        current_revision_name(&revisions, &status.current_revision, &update_revision).to_owned();
    let mut specs: BTreeMap<String, RevisionSpec> = revisions
        .iter()
        .filter_map(|r| Some((r.name.clone(), RevisionSpec::from_data(&r.data)?)))
        .collect();
    specs.insert(update_revision.clone(), spec);

    let now = Timestamp::now();
    let snapshot = Snapshot {
        cloneset,
        pods: pods.iter().map(AsRef::as_ref).collect(),
        pvcs: pvcs.iter().map(AsRef::as_ref).collect(),
        update_revision: &update_revision,
        current_revision: &current_revision,
        revisions: &specs,
        now,
    };
    let mut planned = plan::plan(&snapshot)?;
    let mut problems = SyncProblems::default();
    if guards::disrupts_for_update(&planned)
        && let Some(spec) = specs.get(&update_revision)
    {
        let verdict = guards::template_verdict(ctl, key, cloneset, &update_revision, spec).await;
        if let Some(message) = guards::hold_message(&verdict, &update_revision) {
            guards::hold_update_disruptions(&mut planned);
            problems.update = Some(message);
        }
    }
    let executor = Executor {
        ctl,
        key,
        cloneset,
        specs: &specs,
    };
    let executed = executor.execute(&planned, &mut problems).await;

    let (new_status, status_requeue) = compute_status(
        cloneset,
        &snapshot.pods,
        &update_revision,
        &current_revision,
        collision_count,
        &problems,
        now,
    );
    if cloneset.status.as_ref() != Some(&new_status) {
        let api: Api<CloneSet> = Api::namespaced(ctl.client.clone(), &key.namespace);
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": new_status })),
        )
        .await
        .map_err(api_error("writing status"))?;
    }

    pre_download(
        ctl,
        key,
        cloneset,
        &history,
        &specs,
        &current_revision,
        &update_revision,
        new_status.updated_ready_replicas,
    )
    .await;

    let pod_labels: Vec<Option<&str>> = pods
        .iter()
        .map(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(REVISION_LABEL))
                .map(String::as_str)
        })
        .collect();
    for dead in revisions_to_truncate(
        &revisions,
        &current_revision,
        &update_revision,
        &pod_labels,
        cloneset.spec.history_limit(),
    ) {
        let result = revisions_api
            .delete(&dead.name, &DeleteParams::default())
            .await;
        if let Err(err) = result
            && !is_not_found(&err)
        {
            return Err(api_error(format!("deleting old revision {}", dead.name))(err).into());
        }
    }

    let create_retry = executed?;
    let mut outcome = Outcome::Done;
    for requeue in [
        create_retry,
        planned.requeue_after,
        status_requeue,
        problems_requeue(&problems),
    ]
    .into_iter()
    .flatten()
    {
        outcome = outcome.min(Outcome::RequeueAfter(requeue));
    }
    Ok(outcome)
}

/// Pre-pulls the update revision's new images on the nodes of pods still to update (see
/// `crate::predownload`), and removes the pre-download jobs once they are not needed.
#[allow(clippy::too_many_arguments)]
async fn pre_download(
    ctl: &CloneSetController,
    key: &ObjectKey,
    cloneset: &CloneSet,
    history: &[Arc<ControllerRevision>],
    specs: &BTreeMap<String, RevisionSpec>,
    current_revision: &str,
    update_revision: &str,
    updated_ready: i32,
) {
    // A revision created in this sync is not cached yet; the next sync sees it.
    let Some(update) = history
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(update_revision))
    else {
        return;
    };
    // A converged rollout only cleans up: no template diff on every steady-state sync.
    let images = match (specs.get(current_revision), specs.get(update_revision)) {
        _ if current_revision == update_revision => None,
        (Some(old), Some(new)) => {
            predownload::in_place_images(cloneset.spec.update_strategy.policy(), old, new)
        }
        _ => None,
    };
    let rollout = match predownload::rollout(
        cloneset,
        current_revision,
        update,
        updated_ready,
        images.as_ref(),
    ) {
        Ok(rollout) => rollout,
        // The planner reported the same error as FailedUpdate already.
        Err(err) => {
            tracing::debug!(%err, "no image pre-download");
            return;
        }
    };
    let reference = reference(cloneset);
    let workload = jobs::Workload {
        namespace: &key.namespace,
        owner: owner_reference(cloneset),
        reference: &reference,
    };
    jobs::sync(&ctl.client, &ctl.stores, &ctl.events, &workload, &rollout).await;
}

/// An unreachable agent or a refused update is looked at again soon, without backoff
/// growing: nothing is wrong with the CloneSet itself.
fn problems_requeue(problems: &SyncProblems) -> Option<Duration> {
    problems.update.as_ref().map(|_| Duration::from_secs(15))
}

async fn write_collision_count(
    ctl: &CloneSetController,
    key: &ObjectKey,
    count: i32,
) -> Result<(), SyncError> {
    let api: Api<CloneSet> = Api::namespaced(ctl.client.clone(), &key.namespace);
    api.patch_status(
        &key.name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": { "collisionCount": count } })),
    )
    .await
    .map_err(api_error("writing status.collisionCount"))?;
    Ok(())
}

pub(super) fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}

fn to_revision(r: &ControllerRevision) -> Revision {
    Revision {
        name: r.name_any(),
        number: r.revision,
        hash_label: r
            .labels()
            .get(crate::workload::revision::REVISION_HASH_LABEL)
            .cloned(),
        data: r
            .data
            .as_ref()
            .and_then(|d| serde_json::to_vec(&d.0).ok())
            .unwrap_or_default(),
        created: r
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second()),
    }
}

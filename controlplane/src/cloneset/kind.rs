//! The CloneSet as the generic pod-set sync (`pod_set::sync`) runs it: revisions that
//! record the template and the claim templates, its pure plan and status, and what is its
//! own — fresh instance ids, the `podsToDelete` clean-up, the claims no pod uses, and the
//! event behind each change of its Progressing reason.

use std::borrow::Cow;
use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;

use super::plan::{self, CloneSetPlan, PlanError, Snapshot};
use super::pods::{new_pod, revision_spec};
use super::pods_to_delete;
use super::progress::progress_event;
use super::status::{FAILED_UPDATE, SyncProblems, compute_status};
use crate::api::{CloneSet, CloneSetStatus};
use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::api_error;
use crate::pod_set::kind::{ClaimScope, KindStatus, KindSyncError, PodSetKind, SyncScope};
use crate::workload::actions::Plan;
use crate::workload::instance_id::{fresh_instance_id, random_u64};
use crate::workload::revision_spec::RevisionSpec;
use crate::workload::set_controller::PodSetParts;

/// The CloneSet kind; it keeps nothing of its own between syncs.
#[derive(Default)]
pub struct CloneSetKind;

impl PodSetKind for CloneSetKind {
    type Set = CloneSet;
    type Revision = RevisionSpec;
    type Workload<'a> = CloneSet;
    type Planned = CloneSetPlan;
    type PlanError = PlanError;
    type Problems = SyncProblems;

    const KIND: &'static str = "CloneSet";
    const UPDATE_CONDITION: &'static str = FAILED_UPDATE;
    const CLAIMS: ClaimScope = ClaimScope::Controlled;

    fn objects(stores: &Stores) -> &Store<CloneSet> {
        &stores.clonesets
    }

    fn workload<'a>(&'a self, cloneset: &'a CloneSet) -> Cow<'a, CloneSet> {
        Cow::Borrowed(cloneset)
    }

    fn revision_spec(cloneset: &CloneSet) -> RevisionSpec {
        revision_spec(cloneset)
    }

    fn recorded_revisions(cloneset: &CloneSet) -> (String, i32) {
        let status = cloneset.status.clone().unwrap_or_default();
        (status.current_revision, status.collision_count.unwrap_or(0))
    }

    fn history_limit(cloneset: &CloneSet) -> i32 {
        cloneset.spec.history_limit()
    }

    fn plan(&self, scope: &SyncScope<'_, Self>) -> Result<CloneSetPlan, PlanError> {
        let (owned, history) = (&scope.owned, &scope.owned.history);
        plan::plan(&Snapshot {
            cloneset: scope.set,
            pods: owned.pods(),
            pvcs: owned.claims(),
            update_revision: &history.update_revision,
            current_revision: &history.current_revision,
            revisions: &owned.revisions,
            now: scope.now,
        })
    }

    fn shared_plan(planned: &CloneSetPlan) -> &Plan {
        &planned.plan
    }

    fn shared_plan_mut(planned: &mut CloneSetPlan) -> &mut Plan {
        &mut planned.plan
    }

    fn problems(planned: &CloneSetPlan) -> SyncProblems {
        SyncProblems {
            update_hold: planned.plan.update_hold.clone(),
            ..SyncProblems::default()
        }
    }

    /// A pod of the update revision as the rollout would create it, with a fresh id.
    fn update_revision_pod(&self, scope: &SyncScope<'_, Self>) -> Option<Pod> {
        let revision = &scope.owned.history.update_revision;
        let spec = scope.owned.revisions.get(revision)?;
        let instance_id = fresh_instance_id(&BTreeSet::new(), &mut random_u64);
        Some(new_pod(scope.set, revision, spec, &instance_id))
    }

    /// An id none of the set's pods and claims holds, nor a create of this batch.
    fn fresh_instance_id(planned: &CloneSetPlan, taken: &BTreeSet<String>) -> String {
        let held = planned.taken_ids.union(taken).cloned().collect();
        fresh_instance_id(&held, &mut random_u64)
    }

    fn unused_claims(planned: &CloneSetPlan) -> &[String] {
        &planned.unused_claims
    }

    fn after_execute<'a>(
        &'a self,
        scope: &'a SyncScope<'a, Self>,
        planned: &'a CloneSetPlan,
    ) -> impl Future<Output = Result<(), KindSyncError<Self>>> + Send + 'a {
        let kept = planned.pods_to_delete.as_deref();
        clean_pods_to_delete(scope.parts, scope.key, scope.set, kept)
    }

    fn status(
        &self,
        scope: &SyncScope<'_, Self>,
        _planned: &CloneSetPlan,
        problems: &SyncProblems,
    ) -> KindStatus<CloneSetStatus> {
        let history = &scope.owned.history;
        let (status, requeue) = compute_status(
            scope.set,
            &scope.owned.pods(),
            &history.update_revision,
            &history.current_revision,
            history.collision_count,
            problems,
            scope.now,
        );
        KindStatus { status, requeue }
    }

    /// Publishes the event behind a change of the Progressing reason.
    async fn after_status<'a>(
        &'a self,
        scope: &'a SyncScope<'a, Self>,
        _planned: &'a CloneSetPlan,
        _problems: &'a SyncProblems,
        status: &'a CloneSetStatus,
    ) {
        let Some(event) = progress_event(scope.set.status.as_ref(), status) else {
            return;
        };
        let (events, object) = (&scope.parts.events, &scope.object);
        if event.warning {
            (events.warning(object, &event.reason, "Progress", event.note)).await;
        } else {
            (events.normal(object, &event.reason, "Progress", event.note)).await;
        }
    }

    fn updated_ready(
        _scope: &SyncScope<'_, Self>,
        _planned: &CloneSetPlan,
        status: &CloneSetStatus,
    ) -> i32 {
        status.updated_ready_replicas
    }
}

/// Writes the plan's clean `podsToDelete` list (`kept`, when some names went), conditional
/// on the resourceVersion it was computed from; a 409 re-reads the CloneSet and drops the
/// same names again.
async fn clean_pods_to_delete(
    parts: &PodSetParts,
    key: &ObjectKey,
    cloneset: &CloneSet,
    kept: Option<&[String]>,
) -> Result<(), KindSyncError<CloneSetKind>> {
    let Some(kept) = kept else {
        return Ok(());
    };
    let api: Api<CloneSet> = Api::namespaced(parts.client.clone(), &key.namespace);
    let listed = &cloneset.spec.scale_strategy.pods_to_delete;
    let dropped = pods_to_delete::dropped(listed, kept);
    let mut resource_version = cloneset.metadata.resource_version.clone();
    let mut current = listed.clone();
    for _ in 0..pods_to_delete::MAX_ATTEMPTS {
        let Some(list) = pods_to_delete::without(&current, &dropped) else {
            return Ok(());
        };
        let patch = pods_to_delete::clean_patch(resource_version.as_deref(), &list);
        match api
            .patch(&key.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let fresh = api
                    .get(&key.name)
                    .await
                    .map_err(api_error("re-reading the CloneSet to clean podsToDelete"))?;
                resource_version = fresh.metadata.resource_version;
                current = fresh.spec.scale_strategy.pods_to_delete;
            }
            Err(err) => {
                return Err(api_error("cleaning scaleStrategy.podsToDelete")(err).into());
            }
        }
    }
    tracing::debug!("podsToDelete kept changing; the next sync cleans it");
    Ok(())
}

#[cfg(test)]
#[path = "kind_tests.rs"]
mod tests;

//! The Advanced StatefulSet as the generic pod-set sync (`workload::pod_set_sync`) runs
//! it: its template-only revisions, its pure plan and status, and what is its own — the
//! claims' owner references the retention policy asks for, written before any pod is
//! deleted, and the warning naming the pod an OrderedReady set waits on.

use std::borrow::Cow;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use kube::ResourceExt as _;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;

use super::claim_status::volume_claims;
use super::plan::{self, Snapshot, StatefulSetPlan, StatefulSetPlanError};
use super::retention::ClaimOwners;
use super::status::{
    FAILED_UPDATE_POD, Revisions, SyncProblems, WAITING_FOR_POD, compute_status, stuck_warning,
};
use crate::api::{StatefulSet, StatefulSetStatus};
use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::{ApiError, api_error};
use crate::controller::expectations::{Expectation, resource_version};
use crate::pod_set::kind::{ClaimScope, KindStatus, PodSetKind, SyncScope};
use crate::pod_set::sync::PROBLEM_RECHECK;
use crate::workload::actions::{Create, Plan};
use crate::workload::adapter::new_pod_and_claims;
use crate::workload::set_controller::PodSetParts;

/// The Advanced StatefulSet kind; it keeps nothing of its own between syncs.
#[derive(Default)]
pub struct StatefulSetKind;

impl PodSetKind for StatefulSetKind {
    type Set = StatefulSet;
    type Revision = PodTemplateSpec;
    type Workload<'a> = StatefulSet;
    type Planned = StatefulSetPlan;
    type PlanError = StatefulSetPlanError;
    type Problems = SyncProblems;

    const KIND: &'static str = "StatefulSet";
    const UPDATE_CONDITION: &'static str = FAILED_UPDATE_POD;
    // Its claims carry no controller reference (the native controller's do not either);
    // the plan finds them by name.
    const CLAIMS: ClaimScope = ClaimScope::Namespace;

    fn objects(stores: &Stores) -> &Store<StatefulSet> {
        &stores.statefulsets
    }

    fn workload<'a>(&'a self, set: &'a StatefulSet) -> Cow<'a, StatefulSet> {
        Cow::Borrowed(set)
    }

    fn recorded_revisions(set: &StatefulSet) -> (String, i32) {
        let status = set.status.clone().unwrap_or_default();
        (status.current_revision, status.collision_count.unwrap_or(0))
    }

    fn history_limit(set: &StatefulSet) -> i32 {
        set.spec.history_limit()
    }

    fn plan(&self, scope: &SyncScope<'_, Self>) -> Result<StatefulSetPlan, StatefulSetPlanError> {
        plan::plan(&snapshot(scope))
    }

    fn shared_plan(planned: &StatefulSetPlan) -> &Plan {
        &planned.plan
    }

    fn shared_plan_mut(planned: &mut StatefulSetPlan) -> &mut Plan {
        &mut planned.plan
    }

    fn problems(planned: &StatefulSetPlan) -> SyncProblems {
        SyncProblems {
            halted: planned.halted.clone(),
            update_hold: planned.plan.update_hold.clone(),
            ..SyncProblems::default()
        }
    }

    /// The pod of the first ordinal, under a generated name so the dry run cannot collide
    /// with a live pod.
    fn update_revision_pod(&self, scope: &SyncScope<'_, Self>) -> Option<Pod> {
        let set = scope.set;
        let create = Create {
            instance_id: set.spec.start_ordinal().to_string(),
            revision: scope.owned.history.update_revision.clone(),
        };
        let (mut pod, _) = new_pod_and_claims(set, &scope.owned.revisions, &create)?;
        pod.metadata.generate_name = Some(format!("{}-", set.name_any()));
        pod.metadata.name = None;
        Some(pod)
    }

    /// Before any delete: a scaled-away pod must own its claims when it goes.
    fn before_execute<'a>(
        &'a self,
        scope: &'a SyncScope<'a, Self>,
        planned: &'a StatefulSetPlan,
    ) -> impl Future<Output = Result<(), ApiError>> + Send + 'a {
        write_claim_owners(scope.parts, scope.key, &planned.claim_owners)
    }

    fn status(
        &self,
        scope: &SyncScope<'_, Self>,
        _planned: &StatefulSetPlan,
        problems: &SyncProblems,
    ) -> KindStatus<StatefulSetStatus> {
        let history = &scope.owned.history;
        let revisions = Revisions {
            update: &history.update_revision,
            current: &history.current_revision,
            collision_count: history.collision_count,
        };
        let pods = scope.owned.pods();
        let (mut status, requeue) =
            compute_status(scope.set, &pods, revisions, problems, scope.now);
        status.volume_claims = volume_claims(scope.set, &pods, &scope.owned.claims());
        KindStatus { status, requeue }
    }

    /// Names the pod an OrderedReady set waits on while it waits too long; repeated every
    /// look while it lasts, which the event recorder counts as one series.
    async fn after_status<'a>(
        &'a self,
        scope: &'a SyncScope<'a, Self>,
        _planned: &'a StatefulSetPlan,
        problems: &'a SyncProblems,
        _status: &'a StatefulSetStatus,
    ) {
        let pods = scope.owned.pods();
        let halted = problems.halted.as_ref();
        let note = halted.and_then(|h| stuck_warning(h, &pods, scope.now));
        if let Some(note) = note {
            (scope.parts.events)
                .warning(&scope.object, WAITING_FOR_POD, "Scale", note)
                .await;
        }
    }

    fn updated_ready(
        _scope: &SyncScope<'_, Self>,
        _planned: &StatefulSetPlan,
        status: &StatefulSetStatus,
    ) -> i32 {
        status.updated_ready_replicas
    }

    /// A halt is looked at again soon, without backoff growing.
    fn requeue(_planned: &StatefulSetPlan, problems: &SyncProblems) -> Option<Duration> {
        problems.halted.is_some().then_some(PROBLEM_RECHECK)
    }
}

/// What the plan sees of one sync.
fn snapshot<'a>(scope: &'a SyncScope<'a, StatefulSetKind>) -> Snapshot<'a> {
    let (owned, history) = (&scope.owned, &scope.owned.history);
    Snapshot {
        set: scope.set,
        pods: owned.pods(),
        claims: owned.claims(),
        update_revision: &history.update_revision,
        current_revision: &history.current_revision,
        revisions: &owned.revisions,
        now: scope.now,
    }
}

/// Writes the claims' owner references the retention policy asks for, each conditional
/// on the resourceVersion it was computed from; the cache must show each write before
/// the next sync plans (expectations).
async fn write_claim_owners(
    parts: &PodSetParts,
    key: &ObjectKey,
    changes: &[ClaimOwners],
) -> Result<(), ApiError> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(parts.client.clone(), &key.namespace);
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
        parts.expectations.expect(
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

#[cfg(test)]
#[path = "kind_tests.rs"]
mod tests;

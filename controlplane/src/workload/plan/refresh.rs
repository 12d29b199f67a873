//! Refreshing a pod on every sync (OpenKruise `refreshPodState` and the in-place
//! `Refresh`): finish grace periods and in-place updates, move lifecycle states, and set
//! the readiness conditions of new pods to True.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::{PlanError, PodSet, PodSetWorkload, hook_view, now_string};
use crate::workload::actions::{ChangeReason, ConditionChange, Plan, PodChange, pod_patch_json};
use crate::workload::inplace::{
    self, GRACE_ANNOTATION, GraceStep, INPLACE_UPDATE_READY, REASON_DONE, RefreshStep,
};
use crate::workload::lifecycle::{self, KRUISE_POD_READY, LifecycleState, RefreshFacts};
use crate::workload::pod_view::{PodView, has_gate, pod_condition};

/// A condition set to True on a pod that never had it: the gate is satisfied at creation.
fn created_true(condition_type: &'static str) -> ConditionChange {
    ConditionChange {
        condition_type,
        status: true,
        reason: "PodCreated",
        message: String::new(),
    }
}

impl<W: PodSetWorkload> PodSet<'_, '_, W> {
    /// Refreshes every active pod.
    pub fn refresh(&self, plan: &mut Plan) -> Result<(), PlanError> {
        for (pod, view) in self.active.iter().zip(&self.views) {
            if let Some(change) = self.refresh_pod(pod, view, plan)? {
                plan.pod_changes.push(change);
            }
        }
        Ok(())
    }

    fn refresh_pod(
        &self,
        pod: &Pod,
        view: &PodView,
        plan: &mut Plan,
    ) -> Result<Option<PodChange>, PlanError> {
        let mut change = PodChange::new(pod, ChangeReason::Refresh);
        let completed = in_place_step(pod, &mut change, plan, self.snap.now)?;
        let state = view.lifecycle;
        if has_gate(pod, KRUISE_POD_READY)
            && pod_condition(pod, KRUISE_POD_READY).is_none()
            && !matches!(
                state,
                Some(LifecycleState::PreparingDelete | LifecycleState::PreparingUpdate)
            )
        {
            change.conditions.push(created_true(KRUISE_POD_READY));
        }
        let facts = RefreshFacts {
            on_update_revision: view.updated,
            update_completed: completed,
        };
        let hooks = self.snap.workload.lifecycle();
        if let Some(next) = lifecycle::refresh_state(hooks, hook_view(pod), facts) {
            change
                .conditions
                .extend(next.readiness.map(ConditionChange::from_readiness));
            change.merge_patch(next.merge_patch(&now_string(self.snap.now)));
        }
        Ok((!change.is_empty()).then_some(change))
    }
}

/// The in-place part of a refresh, added to `change`; true when no in-place update is
/// left to wait for (finished now, or none under way).
fn in_place_step(
    pod: &Pod,
    change: &mut PodChange,
    plan: &mut Plan,
    now: Timestamp,
) -> Result<bool, PlanError> {
    let step = inplace::plan_refresh(pod, now).map_err(PlanError::in_place(pod))?;
    match step {
        RefreshStep::Grace(GraceStep::PatchNow(patch)) => {
            change.reason = ChangeReason::InPlaceGraceOver;
            change.merge_patch(pod_patch_json(&patch));
            change.resource_version = pod.metadata.resource_version.clone();
        }
        RefreshStep::Grace(GraceStep::Drop) => {
            change.merge_patch(serde_json::json!({
                "metadata": { "annotations": { GRACE_ANNOTATION: null } }
            }));
        }
        RefreshStep::Grace(GraceStep::Wait {
            requeue_after_seconds,
        }) => plan.requeue(Duration::from_secs(requeue_after_seconds)),
        RefreshStep::Grace(GraceStep::NotInGrace) | RefreshStep::Wait(_) => {}
        RefreshStep::Finish { set_ready, cleanup } => {
            change.reason = ChangeReason::InPlaceDone;
            if set_ready {
                change.conditions.push(ConditionChange {
                    condition_type: INPLACE_UPDATE_READY,
                    status: true,
                    reason: REASON_DONE,
                    message: String::new(),
                });
            }
            change.merge_patch(pod_patch_json(&cleanup));
            return Ok(true);
        }
        RefreshStep::Nothing => {
            if has_gate(pod, INPLACE_UPDATE_READY)
                && pod_condition(pod, INPLACE_UPDATE_READY).is_none()
            {
                change.conditions.push(created_true(INPLACE_UPDATE_READY));
            }
            return Ok(true);
        }
    }
    Ok(false)
}

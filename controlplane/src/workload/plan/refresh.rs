//! Refreshing a pod on every sync (OpenKruise `refreshPodState` and the in-place
//! `Refresh`): finish grace periods and in-place updates, move lifecycle states, and set
//! the readiness conditions of new pods to True.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::{PlanError, PodSet, PodSetWorkload, hook_view, now_string};
use crate::api::common::PodUpdatePolicy;
use crate::workload::actions::{
    ChangeReason, ConditionChange, DeleteReason, Plan, PodChange, pod_patch_json,
};
use crate::workload::inplace::{
    self, GRACE_ANNOTATION, GraceStep, INPLACE_UPDATE_READY, REASON_DONE, RefreshStep, resize,
};
use crate::workload::lifecycle::{self, KRUISE_POD_READY, LifecycleState, RefreshFacts};
use crate::workload::pod_view::{has_gate, pod_condition};

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
    /// Refreshes every active pod. A pod whose in-place update this sync finishes no
    /// longer counts as updating for the update step that follows: its containers run the
    /// new spec and its conditions are what they will be (the finishing patch only marks
    /// the state annotation finished), so the next pods may start now rather than one watch
    /// round trip later. A pod whose InPlaceUpdateReady this sync still has to set stays
    /// unavailable through its conditions.
    pub fn refresh(&mut self, plan: &mut Plan) -> Result<(), PlanError> {
        for i in 0..self.active.len() {
            let (change, settled) = self.refresh_pod(i, plan)?;
            if settled {
                self.views[i].updating_in_place = false;
            }
            plan.pod_changes.extend(change);
        }
        Ok(())
    }

    /// The pod's refresh change, and whether no in-place update is under way after it.
    fn refresh_pod(
        &self,
        i: usize,
        plan: &mut Plan,
    ) -> Result<(Option<PodChange>, bool), PlanError> {
        let (pod, view) = (self.active[i], &self.views[i]);
        let mut change = PodChange::new(pod, ChangeReason::Refresh);
        let completed = match in_place_step(pod, &mut change, plan, self.snap.now)? {
            InPlaceProgress::Settled => true,
            InPlaceProgress::UnderWay => false,
            InPlaceProgress::Infeasible(message) => {
                self.resize_infeasible(i, &message, plan);
                return Ok((None, false));
            }
        };
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
            awaiting_schedule: self.snap.workload.normal_waits_for_scheduling()
                && view.node_name.is_empty(),
        };
        let hooks = self.snap.workload.lifecycle();
        if let Some(next) = lifecycle::refresh_state(hooks, hook_view(pod), facts) {
            change
                .conditions
                .extend(next.readiness.map(ConditionChange::from_readiness));
            change.merge_patch(next.merge_patch(&now_string(self.snap.now)));
        }
        Ok(((!change.is_empty()).then_some(change), completed))
    }

    /// The kubelet cannot resize the pod at `i` on its node: recreate it (the scheduler
    /// may find a node that fits), or under InPlaceOnly leave it and report why.
    fn resize_infeasible(&self, i: usize, message: &str, plan: &mut Plan) {
        let name = &self.views[i].name;
        if self.snap.workload.update_policy() == PodUpdatePolicy::InPlaceOnly {
            plan.refusal = Some(format!(
                "pod {name} cannot be resized in place on its node ({message}); updateStrategy.type is InPlaceOnly, so it is not recreated"
            ));
            return;
        }
        let detail = format!("the kubelet cannot resize it in place: {message}");
        self.delete(i, DeleteReason::RecreateUpdate, detail, plan);
    }
}

/// Where a pod's in-place update stands after this sync's refresh.
enum InPlaceProgress {
    /// None under way (finished now, or none started).
    Settled,
    UnderWay,
    /// The kubelet reports the resize infeasible: the kubelet's message.
    Infeasible(String),
}

/// The in-place part of a refresh, added to `change`.
fn in_place_step(
    pod: &Pod,
    change: &mut PodChange,
    plan: &mut Plan,
    now: Timestamp,
) -> Result<InPlaceProgress, PlanError> {
    let step = inplace::plan_refresh(pod, now).map_err(PlanError::in_place(pod))?;
    match step {
        RefreshStep::Grace(GraceStep::PatchNow(patch)) => {
            change.reason = ChangeReason::InPlaceGraceOver;
            change.resize = resize::resize_patch(&patch.container_resources);
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
        RefreshStep::RestartContainers { containers, record } => {
            // No resourceVersion precondition: once the agent has restarted them, the
            // record must land, or a later sync would ask again.
            change.reason = ChangeReason::InPlaceRestart;
            change.agent_restarts = containers;
            change.merge_patch(pod_patch_json(&record));
        }
        RefreshStep::NextBatch(patch) => {
            change.reason = ChangeReason::InPlaceNextBatch;
            // This batch's containers are resized with it (their launch priority).
            change.resize = resize::resize_patch(&patch.container_resources);
            change.merge_patch(pod_patch_json(&patch));
            change.resource_version = pod.metadata.resource_version.clone();
        }
        RefreshStep::BatchFailed {
            message, record, ..
        } => {
            change.reason = ChangeReason::InPlaceBatchFailed;
            change.failure = Some(message);
            change.merge_patch(pod_patch_json(&record));
            change.resource_version = pod.metadata.resource_version.clone();
        }
        RefreshStep::Infeasible(message) => return Ok(InPlaceProgress::Infeasible(message)),
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
            return Ok(InPlaceProgress::Settled);
        }
        RefreshStep::Nothing => {
            if has_gate(pod, INPLACE_UPDATE_READY)
                && pod_condition(pod, INPLACE_UPDATE_READY).is_none()
            {
                change.conditions.push(created_true(INPLACE_UPDATE_READY));
            } else if inplace::workload_gate_left_closed(pod) {
                // Closed by an update whose patch never landed (the control plane died
                // between the two writes): nothing else would ever open it again.
                change.conditions.push(ConditionChange {
                    condition_type: INPLACE_UPDATE_READY,
                    status: true,
                    reason: REASON_DONE,
                    message: "No in-place update is under way.".to_owned(),
                });
            }
            return Ok(InPlaceProgress::Settled);
        }
    }
    Ok(InPlaceProgress::UnderWay)
}

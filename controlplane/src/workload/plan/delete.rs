//! Deleting pods: one pod (at once, or through the preDelete hook) and the scale-down step
//! (pods already in PreparingDelete, then specified pods, then surplus pods by ranking).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::{PodSet, PodSetWorkload, hook_view, now_string};
use crate::workload::actions::{
    ChangeReason, ConditionChange, Delete, DeleteReason, Plan, PodChange,
};
use crate::workload::deletion::{self, ScaleDown};
use crate::workload::lifecycle::{self, DeleteStep, KRUISE_POD_READY};
use crate::workload::pod_view::{has_gate, pod_condition};
use crate::workload::rollout::RolloutDiffs;

/// Deletes `pod` (with `claims`) now, or moves it to PreparingDelete while a preDelete
/// hook holds it (OpenKruise `deletePods`).
pub fn plan_delete<W: PodSetWorkload>(
    workload: &W,
    pod: &Pod,
    claims: Vec<String>,
    reason: DeleteReason,
    detail: String,
    now: Timestamp,
    plan: &mut Plan,
) {
    match lifecycle::plan_delete(workload.lifecycle(), hook_view(pod)) {
        DeleteStep::Delete => plan.deletes.push(Delete {
            pod: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            pvcs: claims,
            reason,
            detail,
        }),
        DeleteStep::Prepare(change) => {
            let mut c = PodChange::new(pod, ChangeReason::PreparingDelete);
            c.conditions
                .extend(change.readiness.map(ConditionChange::from_readiness));
            c.merge_patch(change.merge_patch(&now_string(now)));
            plan.pod_changes.push(c);
        }
        DeleteStep::Wait { readiness } => {
            if let Some(change) = readiness.map(ConditionChange::from_readiness)
                && pod_condition(pod, KRUISE_POD_READY)
                    != Some(if change.status { "True" } else { "False" })
                && has_gate(pod, KRUISE_POD_READY)
            {
                let mut c = PodChange::new(pod, ChangeReason::HoldNotReady);
                c.conditions.push(change);
                plan.pod_changes.push(c);
            }
        }
    }
}

impl<W: PodSetWorkload> PodSet<'_, '_, W> {
    /// Deletes the pod at `i` of the active pods, with its claims.
    pub(super) fn delete(&self, i: usize, reason: DeleteReason, detail: String, plan: &mut Plan) {
        let pod = self.active[i];
        let claims = self.snap.workload.claims_of(pod, &self.snap.claims);
        plan_delete(
            self.snap.workload,
            pod,
            claims,
            reason,
            detail,
            self.snap.now,
            plan,
        );
    }

    /// The scale-down step; true when it changed something, which ends the sync
    /// (OpenKruise's `modified`): pods held by a hook must not stall the update.
    pub(super) fn scale_down(&self, diffs: &RolloutDiffs, plan: &mut Plan) -> bool {
        let planned = |plan: &Plan| plan.deletes.len() + plan.pod_changes.len();
        let before = planned(plan);
        // Pods in PreparingDelete go once the preDelete hook releases them (OpenKruise
        // scale step 4); still hooked, they wait.
        for (i, view) in self.views.iter().enumerate() {
            if view.preparing_delete() {
                let reason = if view.specified_delete {
                    DeleteReason::Specified
                } else {
                    DeleteReason::ScaleDown
                };
                self.delete(i, reason, String::new(), plan);
            }
        }
        if planned(plan) > before {
            return true;
        }
        let mut ready_budget = diffs.delete_ready_limit.max(0);
        let mut delete_within_budget = |i: usize, reason, plan: &mut Plan| {
            if self.views[i].ready {
                if ready_budget <= 0 {
                    return;
                }
                ready_budget -= 1;
            }
            self.delete(i, reason, String::new(), plan);
        };
        let specified = self
            .views
            .iter()
            .enumerate()
            .filter(|(_, v)| v.specified_delete && !v.preparing_delete());
        for (i, _) in specified {
            delete_within_budget(i, DeleteReason::Specified, plan);
        }
        if planned(plan) > before {
            return true;
        }
        if diffs.scale_down > 0 {
            let chosen = deletion::pods_to_delete(
                &self.views,
                self.snap.named_for_deletion,
                ScaleDown {
                    total: usize::try_from(diffs.scale_down).unwrap_or(0),
                    old_revision_surplus: usize::try_from(diffs.scale_down_old_revision)
                        .unwrap_or(0),
                },
            );
            for i in chosen.iter().filter_map(|name| self.pod_named(name)) {
                delete_within_budget(i, DeleteReason::ScaleDown, plan);
            }
        }
        planned(plan) > before
    }
}

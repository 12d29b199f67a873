//! The update step: which pods move to the update revision now (ordering and the
//! maxUnavailable budget), and how each one moves — in place (through the inPlaceUpdate
//! hook) or by recreating it.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::{PlanError, PodSet, PodSetWorkload, hook_view, now_string};
use crate::api::common::PodUpdatePolicy;
use crate::workload::actions::{
    ChangeReason, ConditionChange, DeleteReason, Plan, PodChange, pod_patch_json,
};
use crate::workload::adapter::UpdateStrategyType;
use crate::workload::claim_resize::{ClaimStep, PodClaims};
use crate::workload::inplace::{
    self, INPLACE_UPDATE_READY, InPlaceError, InPlaceUpdateSpec, REASON_START, STATE_ANNOTATION,
    UpdateMethod, resize,
};
use crate::workload::lifecycle::{self, LifecycleState, UpdateStep};
use crate::workload::ordering;
use crate::workload::pod_view::pod_labels;
use crate::workload::revision_adapter::RevisionAdapter;
use crate::workload::rollout::{self, RolloutDiffs};
use crate::workload::update_hold::{UpdateHold, UpdateHoldSeen};

/// Where the update step stopped, and the pods it started moving.
enum UpdateStop {
    /// OnDelete, paused, or no pod to move (the partition reached).
    NotRun,
    /// maxUnavailable is used up.
    Budget { started: BTreeSet<String> },
    /// InPlaceOnly refused the change (a condition of its own says so).
    Refused,
    /// Every pod the counts allow was started.
    Done { started: BTreeSet<String> },
}

/// What a pod's claims let the update step do with the pod.
enum ClaimsFirst {
    /// Nothing to grow or wait for: update the pod.
    Ready,
    /// Its claims were patched now or are still growing: the pod waits (and counts as
    /// started, so the budget sees it as unavailable).
    Wait,
    /// A claim cannot be patched: the update stops (a condition says why).
    Refused,
}

/// Pod annotation naming the revision whose claim templates made the pod's claims, set
/// when the pod is first relabelled to another revision without a restart.
pub const CLAIMS_REVISION_ANNOTATION: &str = "stevedore.dev/claims-revision";

impl<'a, W: PodSetWorkload> PodSet<'_, 'a, W> {
    /// Starts moving up to `diffs.update` pods to the update revision, in update order,
    /// within maxUnavailable; none under OnDelete, where only pods deleted from outside
    /// move (their replacements are created at the update revision by the scale step).
    pub(super) fn update(&self, diffs: &RolloutDiffs, plan: &mut Plan) -> Result<(), PlanError> {
        let stop = self.start_updates(diffs, plan)?;
        plan.update_hold = match self.hold(diffs, &stop) {
            Some(hold) => UpdateHoldSeen::Held(hold),
            None => UpdateHoldSeen::Clear,
        };
        Ok(())
    }

    /// Why the pods not on the update revision (and not started now) stay where they are.
    fn hold(&self, diffs: &RolloutDiffs, stop: &UpdateStop) -> Option<UpdateHold> {
        let workload = self.snap.workload;
        let old = || {
            self.views
                .iter()
                .filter(|v| !v.updated && !v.preparing_delete() && !v.specified_delete)
        };
        let none_started = BTreeSet::new();
        let started = match stop {
            UpdateStop::Refused => return None,
            UpdateStop::NotRun => &none_started,
            UpdateStop::Budget { started } | UpdateStop::Done { started } => started,
        };
        // Only pods still on an older revision count (a pod started only to grow its
        // claims is on the update revision already).
        let waiting = old().filter(|v| !started.contains(&v.name)).count();
        if waiting == 0 {
            return None;
        }
        if workload.update_strategy_type() == UpdateStrategyType::OnDelete {
            return Some(UpdateHold::OnDelete { waiting });
        }
        if self.params.paused {
            return Some(UpdateHold::Paused { waiting });
        }
        if matches!(stop, UpdateStop::Budget { .. }) {
            return Some(UpdateHold::MaxUnavailable {
                limit: diffs.update_max_unavailable,
                unavailable: self
                    .views
                    .iter()
                    .filter(|v| !v.serving() || v.preparing_delete() || started.contains(&v.name))
                    .map(|v| v.name.clone())
                    .collect(),
                waiting,
            });
        }
        // Every pod the counts allow was started (or none could be): the rest are kept.
        Some(UpdateHold::Partition {
            kept: old()
                .filter(|v| !started.contains(&v.name))
                .map(|v| v.name.clone())
                .collect(),
        })
    }

    /// Starts the updates this sync may start, and says why it stopped there.
    fn start_updates(
        &self,
        diffs: &RolloutDiffs,
        plan: &mut Plan,
    ) -> Result<UpdateStop, PlanError> {
        let workload = self.snap.workload;
        let on_delete = workload.update_strategy_type() == UpdateStrategyType::OnDelete;
        if on_delete || self.params.paused {
            return Ok(UpdateStop::NotRun);
        }
        let views = &self.views;
        let claims: Vec<PodClaims> = (self.active.iter())
            .map(|pod| workload.pod_claims(pod, &self.snap.claims))
            .collect();
        let waiting = self.waiting(&claims, diffs);
        let claims_only = waiting.iter().filter(|&&i| views[i].updated).count();
        let limit = diffs.update.max(0) + i32::try_from(claims_only).unwrap_or(i32::MAX);
        if limit <= 0 {
            return Ok(UpdateStop::NotRun);
        }
        let max_unavailable = self.max_unavailable(diffs)?;
        let order = workload.update_order(views, &waiting).unwrap_or_else(|| {
            ordering::update_order(
                views,
                &waiting,
                workload.update_priority(),
                workload.update_scatter(),
            )
        });
        // A pod whose claims' capacity is short of their request is unavailable too.
        let available = |i: usize| views[i].serving() && claims[i].ready;
        let unavailable = (0..views.len())
            .filter(|&i| !available(i) || views[i].preparing_delete())
            .count();
        let mut budget = i64::from(max_unavailable) - i64::try_from(unavailable).unwrap_or(0);
        // OpenKruise `limitUpdateIndexes`: unavailable pods of the update revision plus the
        // pods started now stay within maxUnavailable, so a bad revision cannot take every
        // already-unready pod at once.
        let updated_unavailable = views.iter().filter(|v| v.updated && !v.serving()).count();
        let max_unavailable = usize::try_from(max_unavailable).unwrap_or(0);
        let mut started = 0;
        // The pods started now and those refreshed earlier in this sync (their next sync
        // plans from the new object): all of them are moving, none is held.
        let mut moving = BTreeSet::new();
        let touched: BTreeSet<String> = plan.pod_changes.iter().map(|c| c.pod.clone()).collect();
        for i in order {
            if started >= limit {
                break;
            }
            if touched.contains(&views[i].name) {
                moving.insert(views[i].name.clone());
                continue;
            }
            if updated_unavailable + usize::try_from(started).unwrap_or(0) >= max_unavailable {
                return Ok(UpdateStop::Budget { started: moving });
            }
            if available(i) {
                if budget <= 0 {
                    return Ok(UpdateStop::Budget { started: moving });
                }
                budget -= 1;
            }
            started += 1;
            moving.insert(views[i].name.clone());
            match self.claims_first(i, &claims[i].step, plan) {
                ClaimsFirst::Wait => continue,
                ClaimsFirst::Refused => return Ok(UpdateStop::Refused),
                ClaimsFirst::Ready if views[i].updated => continue,
                ClaimsFirst::Ready => {}
            }
            if !self.update_pod(i, plan)? {
                return Ok(UpdateStop::Refused);
            }
        }
        Ok(UpdateStop::Done { started: moving })
    }

    /// The update's maxUnavailable; worked out here when only claims are left to grow
    /// (the diffs leave it at 0 when no pod changes revision).
    fn max_unavailable(&self, diffs: &RolloutDiffs) -> Result<i32, PlanError> {
        if diffs.update > 0 {
            return Ok(diffs.update_max_unavailable);
        }
        Ok(rollout::update_max_unavailable(&self.params, &self.views)?)
    }

    /// The pods the update step may take, by index: those not on the update revision (when
    /// the counts ask for updates) and, as OpenKruise's rolling update takes a pod whose
    /// claims do not match, those whose claims must still grow; never one being deleted or
    /// held back (the partition).
    fn waiting(&self, claims: &[PodClaims], diffs: &RolloutDiffs) -> Vec<usize> {
        let (workload, views) = (self.snap.workload, &self.views);
        let moves_revisions = diffs.update > 0;
        (0..views.len())
            .filter(|&i| (!views[i].updated && moves_revisions) || claims[i].step.needs_patch())
            .filter(|&i| !views[i].preparing_delete())
            .filter(|&i| !views[i].specified_delete && !workload.holds_back(&views[i]))
            .collect()
    }

    /// The claims of the pod at `i` before the pod itself (OpenKruise's `TryPatchPVC` then
    /// `IsOwnedPVCsCompleted`): claims to grow are patched and the pod waits for them, as
    /// it does while they grow; a claim that cannot be patched stops the update.
    fn claims_first(&self, i: usize, step: &ClaimStep, plan: &mut Plan) -> ClaimsFirst {
        match step {
            ClaimStep::Complete => ClaimsFirst::Ready,
            ClaimStep::Resizing => ClaimsFirst::Wait,
            ClaimStep::Expand(resizes) => {
                plan.claim_resizes.extend(resizes.iter().cloned());
                ClaimsFirst::Wait
            }
            ClaimStep::Incompatible { claim } => {
                plan.claim_refusal = Some(format!(
                    "claim {claim} of pod {} differs from its template in more than its storage request (storage class or access modes), so it cannot be updated; delete the claim to have it made again from the template",
                    self.views[i].name
                ));
                ClaimsFirst::Refused
            }
        }
    }

    /// Starts moving the pod at `i` to the update revision; `false` stops the update loop
    /// (an InPlaceOnly refusal applies to every pod alike).
    fn update_pod(&self, i: usize, plan: &mut Plan) -> Result<bool, PlanError> {
        let pod = self.active[i];
        let method = match self.update_method(pod) {
            Ok(method) => method,
            Err(err @ InPlaceError::InPlaceOnlyRefused { .. }) => {
                plan.refusal = Some(err.to_string());
                return Ok(false);
            }
            Err(source) => return Err(PlanError::in_place(pod)(source)),
        };
        match method {
            UpdateMethod::Recreate { changed } => {
                let detail = if changed.is_empty() {
                    String::new()
                } else {
                    format!("changed: {}", changed.join(", "))
                };
                self.delete(i, DeleteReason::RecreateUpdate, detail, plan);
            }
            UpdateMethod::InPlace(spec) => self.update_in_place(pod, &spec, plan)?,
        }
        Ok(true)
    }

    /// The revision the pod's label names, by its full name.
    fn pod_revision(&self, pod: &Pod) -> Option<(&'a String, &'a W::Revision)> {
        let label = RevisionAdapter::pod_revision(pod_labels(pod));
        self.snap
            .revisions
            .iter()
            .find(|(name, _)| RevisionAdapter::label_names(label, name))
    }

    /// How `pod` moves from its revision to the update revision; recreate when its
    /// revision is gone. A pod relabelled without a restart (a claim-template change)
    /// still has what it was created with: when that revision (its claims-revision
    /// annotation) is known and could not reach the update revision in place, neither
    /// can the pod.
    fn update_method(&self, pod: &Pod) -> Result<UpdateMethod, InPlaceError> {
        let revisions = self.snap.revisions;
        let Some(((old_name, old), new)) = self
            .pod_revision(pod)
            .zip(revisions.get(self.snap.update_revision))
        else {
            return Ok(UpdateMethod::Recreate {
                changed: vec!["the pod's revision is gone".to_owned()],
            });
        };
        let method = self.method_from(old_name, old, new)?;
        let created_from = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CLAIMS_REVISION_ANNOTATION))
            .and_then(|name| revisions.get_key_value(name));
        let method = match (&method, created_from) {
            (UpdateMethod::InPlace(spec), Some((created_name, created_from)))
                if *spec != InPlaceUpdateSpec::default() =>
            {
                match self.method_from(created_name, created_from, new)? {
                    recreate @ UpdateMethod::Recreate { .. } => recreate,
                    UpdateMethod::InPlace(_) => method,
                }
            }
            _ => method,
        };
        self.unless_resize_refused(pod, method)
    }

    /// `workload.update_method(from, to)` for the revision named `name` (`to` is always
    /// the update revision), from the sync's memo when it was worked out already.
    fn method_from(
        &self,
        name: &str,
        from: &W::Revision,
        to: &W::Revision,
    ) -> Result<UpdateMethod, InPlaceError> {
        if let Some(method) = self.update_methods.borrow().get(name) {
            return Ok(method.clone());
        }
        let method = self.snap.workload.update_method(from, to)?;
        (self.update_methods.borrow_mut()).insert(name.to_owned(), method.clone());
        Ok(method)
    }

    /// An in-place update that resizes a pod the apiserver would refuse to resize (see
    /// [`resize::resize_refusal`]) recreates it instead (InPlaceIfPossible) or is refused
    /// (InPlaceOnly), naming the containers, rather than failing at the write every sync.
    fn unless_resize_refused(
        &self,
        pod: &Pod,
        method: UpdateMethod,
    ) -> Result<UpdateMethod, InPlaceError> {
        let UpdateMethod::InPlace(spec) = &method else {
            return Ok(method);
        };
        let Some(why) =
            resize::resize_refusal(pod).filter(|_| !spec.container_resources.is_empty())
        else {
            return Ok(method);
        };
        let changed = spec
            .container_resources
            .keys()
            .map(|name| format!("spec.containers[{name}].resources ({why})"))
            .collect();
        match self.snap.workload.update_policy() {
            PodUpdatePolicy::InPlaceOnly => Err(InPlaceError::InPlaceOnlyRefused { changed }),
            _ => Ok(UpdateMethod::Recreate { changed }),
        }
    }

    /// The in-place branch of OpenKruise `updatePod`: through the inPlaceUpdate hook,
    /// then the state annotation, images and revision labels in one patch.
    fn update_in_place(
        &self,
        pod: &Pod,
        spec: &InPlaceUpdateSpec,
        plan: &mut Plan,
    ) -> Result<(), PlanError> {
        let workload = self.snap.workload;
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        match lifecycle::plan_in_place_update(workload.lifecycle(), name, hook_view(pod)) {
            Err(_) | Ok(UpdateStep::Wait) => Ok(()),
            Ok(UpdateStep::Prepare(change)) => {
                let mut c = PodChange::new(pod, ChangeReason::PreparingUpdate);
                c.conditions
                    .extend(change.readiness.map(ConditionChange::from_readiness));
                c.merge_patch(change.merge_patch(&now_string(self.snap.now)));
                plan.pod_changes.push(c);
                Ok(())
            }
            Ok(UpdateStep::UpdateNow) => {
                let c = self.start_in_place(pod, spec, plan)?;
                plan.pod_changes.push(c);
                Ok(())
            }
        }
    }

    /// The change that starts an in-place update now (OpenKruise `updatePodInPlace`).
    fn start_in_place(
        &self,
        pod: &Pod,
        spec: &InPlaceUpdateSpec,
        plan: &mut Plan,
    ) -> Result<PodChange, PlanError> {
        let workload = self.snap.workload;
        let revision = self.snap.update_revision;
        let adapter = workload.revision_adapter();
        let grace = workload.in_place_grace_seconds();
        let begin = inplace::begin_update(adapter, revision, spec, pod, grace, self.snap.now)
            .map_err(PlanError::in_place(pod))?;
        let mut c = PodChange::new(pod, ChangeReason::InPlaceStart);
        if begin.mark_not_ready {
            c.conditions.push(ConditionChange {
                condition_type: INPLACE_UPDATE_READY,
                status: false,
                reason: REASON_START,
                message: format!("updating in place to {revision}"),
            });
        }
        let mut patch = begin.patch;
        patch.labels.extend(
            adapter
                .pod_labels(revision)
                .into_iter()
                .map(|(k, v)| (k, Some(v))),
        );
        let relabel_only = *spec == InPlaceUpdateSpec::default();
        if relabel_only {
            // Nothing restarts, so no state to track; the pod keeps the name of the
            // revision it was created with (see `update_method`).
            patch.annotations.remove(STATE_ANNOTATION);
            c.conditions.clear();
            let annotations = pod.metadata.annotations.as_ref();
            let recorded = annotations.is_some_and(|a| a.contains_key(CLAIMS_REVISION_ANNOTATION));
            if let Some((created_from, _)) = self.pod_revision(pod).filter(|_| !recorded) {
                patch.annotations.insert(
                    CLAIMS_REVISION_ANNOTATION.to_owned(),
                    Some(created_from.clone()),
                );
            }
        }
        c.resize = resize::resize_patch(&patch.container_resources);
        c.merge_patch(pod_patch_json(&patch));
        if workload.lifecycle().is_some() && !relabel_only {
            c.merge_patch(serde_json::json!({ "metadata": { "labels": {
                lifecycle::STATE_LABEL: LifecycleState::Updating.as_str()
            } } }));
        }
        c.resource_version = pod.metadata.resource_version.clone();
        if let Some(secs) = begin.requeue_after_seconds {
            plan.requeue(Duration::from_secs(secs));
        }
        Ok(c)
    }
}

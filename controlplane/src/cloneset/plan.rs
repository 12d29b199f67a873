//! One CloneSet sync as a pure decision (OpenKruise's `syncCloneSet`): from the set, its
//! pods and claims, and its revisions, what to create, delete and patch now.
//!
//! Order of a sync, as in OpenKruise: refresh pods (finish grace periods and in-place
//! updates, move lifecycle states), then scale (create, delete specified or surplus pods);
//! only a sync that did not scale goes on to update pods to the update revision — so one
//! sync never both creates and updates against the same stale counts.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;

use super::pods::{RevisionSpec, instance_id};
use crate::api::CloneSet;
use crate::api::common::PodUpdatePolicy;
use crate::workload::actions::{
    ChangeReason, ConditionChange, Create, Delete, DeleteReason, Plan, PodChange, pod_patch_json,
};
use crate::workload::deletion::{self, PodFacts, SPECIFIED_DELETE_LABEL, ScaleDown};
use crate::workload::inplace::{
    self, GRACE_ANNOTATION, GraceStep, INPLACE_UPDATE_READY, InPlaceError, InPlaceUpdateSpec,
    REASON_DONE, REASON_START, RefreshStep, STATE_ANNOTATION, UpdateMethod,
};
use crate::workload::lifecycle::{
    self, DeleteStep, KRUISE_POD_READY, LifecycleState, PodHookView, RefreshFacts, UpdateStep,
};
use crate::workload::ordering::{self, OrderPod};
use crate::workload::revision::{POD_TEMPLATE_HASH_LABEL, label_matches_revision, short_hash};
use crate::workload::rollout::{self, IntOrPercentError, RolloutParams, RolloutPod};

/// What the sync sees.
pub struct Snapshot<'a> {
    pub cloneset: &'a CloneSet,
    /// Pods the set controls (after adoption and release), terminating ones included.
    pub pods: Vec<&'a Pod>,
    /// Claims the set controls.
    pub pvcs: Vec<&'a PersistentVolumeClaim>,
    pub update_revision: &'a str,
    pub current_revision: &'a str,
    /// Revision name → what it records.
    pub revisions: &'a BTreeMap<String, RevisionSpec>,
    pub now: Timestamp,
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    IntOrPercent(#[from] IntOrPercentError),
    #[error("pod {pod}: {source}")]
    InPlace {
        pod: String,
        #[source]
        source: InPlaceError,
    },
}

fn labels(pod: &Pod) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    pod.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

fn hook_view(pod: &Pod) -> PodHookView<'_> {
    PodHookView {
        labels: labels(pod),
        finalizers: pod.metadata.finalizers.as_deref().unwrap_or_default(),
    }
}

fn condition<'p>(pod: &'p Pod, type_: &str) -> Option<&'p str> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .map(|c| c.status.as_str())
}

fn has_gate(pod: &Pod, gate: &str) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|g| g.condition_type == gate))
}

fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Kubernetes' `IsPodActive`: not terminating, not finished.
pub fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !is_terminating(pod) && !matches!(phase, Some("Succeeded" | "Failed"))
}

fn on_revision(pod: &Pod, revision: &str) -> bool {
    label_matches_revision(
        labels(pod)
            .get(crate::workload::deletion::REVISION_LABEL)
            .map(String::as_str),
        revision,
    )
}

fn in_place_in_progress(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(STATE_ANNOTATION) || a.contains_key(GRACE_ANNOTATION))
}

/// Plans one sync.
pub fn plan(snap: &Snapshot<'_>) -> Result<Plan, PlanError> {
    let cs = snap.cloneset;
    let spec = &cs.spec;
    let min_ready = spec.min_ready_seconds;
    let mut plan = Plan::default();
    let active: Vec<&Pod> = snap.pods.iter().copied().filter(|p| is_active(p)).collect();
    for pod in &snap.pods {
        plan.taken_ids
            .extend(instance_id(pod.metadata.labels.as_ref()).map(str::to_owned));
    }
    for pvc in &snap.pvcs {
        plan.taken_ids
            .extend(instance_id(pvc.metadata.labels.as_ref()).map(str::to_owned));
    }

    // 1. Refresh: in-place progress, lifecycle states, initial readiness conditions.
    for pod in &active {
        refresh_pod(snap, pod, &mut plan)?;
    }

    // Orphan claims go before scaling (OpenKruise `cleanupPVCs`), so the sync that replaces
    // a pod deleted from outside also deletes its old claims.
    if spec.scale_strategy.disable_pvc_reuse {
        plan.delete_pvcs = orphan_pvcs(snap).into_iter().map(str::to_owned).collect();
    }

    // 2. Scale.
    let names_to_delete: BTreeSet<String> =
        spec.scale_strategy.pods_to_delete.iter().cloned().collect();
    let pod_names: BTreeSet<&str> = snap
        .pods
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    if names_to_delete
        .iter()
        .any(|n| !pod_names.contains(n.as_str()))
    {
        plan.pods_to_delete = Some(
            spec.scale_strategy
                .pods_to_delete
                .iter()
                .filter(|n| pod_names.contains(n.as_str()))
                .cloned()
                .collect(),
        );
    }
    let facts: Vec<PodFacts> = active
        .iter()
        .map(|p| PodFacts::from_pod(p, snap.update_revision, min_ready, snap.now))
        .collect();
    let is_specified = |pod: &Pod| {
        labels(pod).contains_key(SPECIFIED_DELETE_LABEL)
            || pod
                .metadata
                .name
                .as_ref()
                .is_some_and(|n| names_to_delete.contains(n))
    };
    let rollout_pods: Vec<RolloutPod> = active
        .iter()
        .zip(&facts)
        .map(|(pod, f)| RolloutPod {
            updated: on_revision(pod, snap.update_revision),
            available: f.available && !in_place_in_progress(pod) && is_normal(pod),
            preparing_delete: f.preparing_delete,
            specified_delete: is_specified(pod),
            terminating: false,
        })
        .collect();
    let params = RolloutParams::from_spec(spec, snap.current_revision, snap.update_revision);
    let diffs = rollout::calculate_diffs(&params, &rollout_pods)?;

    if diffs.scale_up > 0 && diffs.scale_up_limit > 0 {
        // A pod deleted from outside is replaced under its own instance id (and name), with
        // its claims, once it is gone: not before, or the replacement takes a fresh id and
        // the claims are left behind. Its deletion event brings the next sync.
        let awaited = i32::try_from(ids_awaiting_their_pod(snap)).unwrap_or(i32::MAX);
        let count = diffs.scale_up.min(diffs.scale_up_limit) - awaited;
        if count <= 0 {
            return Ok(plan);
        }
        let old = diffs.scale_up_old_revision.clamp(0, count);
        let reusable = reusable_ids(snap);
        let mut reusable = reusable.into_iter();
        for i in 0..count {
            let revision = if i < old && snap.revisions.contains_key(snap.current_revision) {
                snap.current_revision
            } else {
                snap.update_revision
            };
            let id = reusable.next().unwrap_or_default();
            plan.creates.push(Create {
                instance_id: id,
                revision: revision.to_owned(),
            });
        }
        return Ok(plan);
    }

    let mut ready_budget = diffs.delete_ready_limit.max(0);
    let mut delete = |pod: &Pod, f: &PodFacts, reason, plan: &mut Plan| {
        if f.ready {
            if ready_budget <= 0 {
                return;
            }
            ready_budget -= 1;
        }
        plan_delete(snap, pod, reason, String::new(), plan);
    };
    // Only a scale step that changed something ends the sync (OpenKruise's `modified`):
    // pods held by a hook must not stall the update.
    let planned = |plan: &Plan| plan.deletes.len() + plan.pod_changes.len();
    let before = planned(&plan);
    // Pods in PreparingDelete go once the preDelete hook releases them (OpenKruise scale
    // step 4); still hooked, they wait.
    for i in (0..active.len()).filter(|&i| facts[i].preparing_delete) {
        let reason = if rollout_pods[i].specified_delete {
            DeleteReason::Specified
        } else {
            DeleteReason::ScaleDown
        };
        plan_delete(snap, active[i], reason, String::new(), &mut plan);
    }
    if planned(&plan) > before {
        return Ok(plan);
    }
    let specified: Vec<usize> = (0..active.len())
        .filter(|&i| rollout_pods[i].specified_delete && !facts[i].preparing_delete)
        .collect();
    if !specified.is_empty() {
        for i in specified {
            delete(active[i], &facts[i], DeleteReason::Specified, &mut plan);
        }
        if planned(&plan) > before {
            return Ok(plan);
        }
    }
    if diffs.scale_down > 0 {
        let chosen = deletion::pods_to_delete(
            &facts,
            &names_to_delete,
            ScaleDown {
                total: usize::try_from(diffs.scale_down).unwrap_or(0),
                old_revision_surplus: usize::try_from(diffs.scale_down_old_revision).unwrap_or(0),
            },
        );
        for name in chosen {
            if let Some(i) = facts.iter().position(|f| f.name == name) {
                delete(active[i], &facts[i], DeleteReason::ScaleDown, &mut plan);
            }
        }
        if planned(&plan) > before {
            return Ok(plan);
        }
    }

    // 3. Update.
    if spec.update_strategy.paused || diffs.update <= 0 {
        return Ok(plan);
    }
    let order_pods: Vec<OrderPod> = active.iter().map(|p| order_pod(p)).collect();
    let waiting: Vec<usize> = (0..active.len())
        .filter(|&i| {
            !rollout_pods[i].updated
                && !rollout_pods[i].preparing_delete
                && !rollout_pods[i].specified_delete
        })
        .collect();
    let order = ordering::update_order(
        &order_pods,
        &waiting,
        spec.update_strategy.priority_strategy.as_ref(),
        &spec.update_strategy.scatter_strategy,
    );
    let unavailable = rollout_pods
        .iter()
        .filter(|p| !p.available || p.preparing_delete)
        .count();
    let mut budget =
        i64::from(diffs.update_max_unavailable) - i64::try_from(unavailable).unwrap_or(0);
    // OpenKruise `limitUpdateIndexes`: unavailable pods of the update revision plus the
    // pods started now stay within maxUnavailable, so a bad revision cannot take every
    // already-unready pod at once.
    let updated_unavailable = rollout_pods
        .iter()
        .filter(|p| p.updated && !p.available)
        .count();
    let update_max_unavailable = usize::try_from(diffs.update_max_unavailable).unwrap_or(0);
    let mut started = 0;
    let touched: BTreeSet<String> = plan.pod_changes.iter().map(|c| c.pod.clone()).collect();
    for i in order {
        if started >= diffs.update {
            break;
        }
        if touched.contains(&facts[i].name) {
            // Refreshed in this sync already; its next sync plans from the new object.
            continue;
        }
        if updated_unavailable + usize::try_from(started).unwrap_or(0) >= update_max_unavailable {
            break;
        }
        if rollout_pods[i].available {
            if budget <= 0 {
                break;
            }
            budget -= 1;
        }
        started += 1;
        if !update_pod(snap, active[i], &mut plan)? {
            break;
        }
    }
    Ok(plan)
}

/// Lifecycle state Normal, or no lifecycle label: the pod may count as available.
fn is_normal(pod: &Pod) -> bool {
    matches!(
        LifecycleState::of(labels(pod)),
        None | Some(LifecycleState::Normal)
    )
}

fn order_pod(pod: &Pod) -> OrderPod {
    let facts = PodFacts::from_pod(pod, "", 0, Timestamp::UNIX_EPOCH);
    OrderPod {
        name: facts.name,
        labels: labels(pod).clone(),
        node_name: Some(facts.node_name).filter(|n| !n.is_empty()),
        phase: facts.phase,
        ready: facts.ready,
        ready_since: facts.ready_since.map(|t| t.as_second()),
        max_restarts: facts.max_restarts,
        created: facts.created.map(|t| t.as_second()),
        preparing_update: LifecycleState::of(labels(pod)) == Some(LifecycleState::PreparingUpdate),
    }
}

/// Instance ids whose claims survive while no pod uses them (a pod deleted from outside):
/// the replacement reuses them, unless `disablePVCReuse`.
fn reusable_ids(snap: &Snapshot<'_>) -> Vec<String> {
    if snap.cloneset.spec.scale_strategy.disable_pvc_reuse {
        return Vec::new();
    }
    let mut ids: Vec<String> = orphan_pvcs(snap)
        .into_iter()
        .filter_map(|name| {
            snap.pvcs
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
                .and_then(|p| instance_id(p.metadata.labels.as_ref()))
                .map(str::to_owned)
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// Instance ids whose claims (not terminating) are kept for reuse while the only pod that
/// carries the id is still terminating.
fn ids_awaiting_their_pod(snap: &Snapshot<'_>) -> usize {
    if snap.cloneset.spec.scale_strategy.disable_pvc_reuse {
        return 0;
    }
    let id = |p: &Pod| instance_id(p.metadata.labels.as_ref()).map(str::to_owned);
    let live: BTreeSet<String> = snap
        .pods
        .iter()
        .filter(|p| !is_terminating(p))
        .filter_map(|p| id(p))
        .collect();
    let terminating: BTreeSet<String> = snap
        .pods
        .iter()
        .filter(|p| is_terminating(p))
        .filter_map(|p| id(p))
        .filter(|i| !live.contains(i))
        .collect();
    snap.pvcs
        .iter()
        .filter(|pvc| pvc.metadata.deletion_timestamp.is_none())
        .filter_map(|pvc| instance_id(pvc.metadata.labels.as_ref()))
        .filter(|i| terminating.contains(*i))
        .collect::<BTreeSet<_>>()
        .len()
}

/// Claims (not terminating) whose instance id no pod of the set carries.
fn orphan_pvcs<'a>(snap: &Snapshot<'a>) -> Vec<&'a str> {
    let used: BTreeSet<&str> = snap
        .pods
        .iter()
        .filter_map(|p| instance_id(p.metadata.labels.as_ref()))
        .collect();
    snap.pvcs
        .iter()
        .filter(|pvc| pvc.metadata.deletion_timestamp.is_none())
        .filter(|pvc| {
            instance_id(pvc.metadata.labels.as_ref()).is_some_and(|id| !used.contains(id))
        })
        .filter_map(|pvc| pvc.metadata.name.as_deref())
        .collect()
}

/// The claims of `pod` (same instance id).
fn pod_pvcs(snap: &Snapshot<'_>, pod: &Pod) -> Vec<String> {
    let Some(id) = instance_id(pod.metadata.labels.as_ref()) else {
        return Vec::new();
    };
    snap.pvcs
        .iter()
        .filter(|pvc| instance_id(pvc.metadata.labels.as_ref()) == Some(id))
        .map(|pvc| pvc.name_any())
        .collect()
}

fn now_string(now: Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Delete now, or move to PreparingDelete while a preDelete hook holds the pod.
fn plan_delete(
    snap: &Snapshot<'_>,
    pod: &Pod,
    reason: DeleteReason,
    detail: String,
    plan: &mut Plan,
) {
    match lifecycle::plan_delete(snap.cloneset.spec.lifecycle.as_ref(), hook_view(pod)) {
        DeleteStep::Delete => plan.deletes.push(Delete {
            pod: pod.name_any(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            pvcs: pod_pvcs(snap, pod),
            reason,
            detail,
        }),
        DeleteStep::Prepare(change) => {
            let mut c = PodChange::new(pod, ChangeReason::PreparingDelete);
            c.conditions
                .extend(change.readiness.map(ConditionChange::from_readiness));
            c.merge_patch(change.merge_patch(&now_string(snap.now)));
            plan.pod_changes.push(c);
        }
        DeleteStep::Wait { readiness } => {
            if let Some(change) = readiness.map(ConditionChange::from_readiness)
                && condition(pod, KRUISE_POD_READY)
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

/// Finishes grace periods and in-place updates, moves lifecycle states, and sets the
/// readiness conditions of new pods to True.
fn refresh_pod(snap: &Snapshot<'_>, pod: &Pod, plan: &mut Plan) -> Result<(), PlanError> {
    let name = pod.name_any();
    let mut change = PodChange::new(pod, ChangeReason::Refresh);
    let step = inplace::plan_refresh(pod, snap.now).map_err(|source| PlanError::InPlace {
        pod: name.clone(),
        source,
    })?;
    let mut completed = false;
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
            completed = true;
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
        }
        RefreshStep::Nothing => {
            completed = true;
            if has_gate(pod, INPLACE_UPDATE_READY) && condition(pod, INPLACE_UPDATE_READY).is_none()
            {
                change.conditions.push(ConditionChange {
                    condition_type: INPLACE_UPDATE_READY,
                    status: true,
                    reason: "PodCreated",
                    message: String::new(),
                });
            }
        }
    }
    let lifecycle = snap.cloneset.spec.lifecycle.as_ref();
    let state = LifecycleState::of(labels(pod));
    if has_gate(pod, KRUISE_POD_READY)
        && condition(pod, KRUISE_POD_READY).is_none()
        && !matches!(
            state,
            Some(LifecycleState::PreparingDelete | LifecycleState::PreparingUpdate)
        )
    {
        change.conditions.push(ConditionChange {
            condition_type: KRUISE_POD_READY,
            status: true,
            reason: "PodCreated",
            message: String::new(),
        });
    }
    let facts = RefreshFacts {
        on_update_revision: on_revision(pod, snap.update_revision),
        update_completed: completed,
    };
    if let Some(next) = lifecycle::refresh_state(lifecycle, hook_view(pod), facts) {
        change
            .conditions
            .extend(next.readiness.map(ConditionChange::from_readiness));
        change.merge_patch(next.merge_patch(&now_string(snap.now)));
    }
    if !change.is_empty() {
        plan.pod_changes.push(change);
    }
    Ok(())
}

/// Starts moving one pod to the update revision; `false` stops the update loop (an
/// InPlaceOnly refusal applies to every pod alike).
fn update_pod(snap: &Snapshot<'_>, pod: &Pod, plan: &mut Plan) -> Result<bool, PlanError> {
    let cs = snap.cloneset;
    let policy = cs.spec.update_strategy.policy();
    let name = pod.name_any();
    let new = snap.revisions.get(snap.update_revision);
    let old = labels(pod)
        .get(crate::workload::deletion::REVISION_LABEL)
        .and_then(|label| {
            snap.revisions
                .iter()
                .find(|(rev, _)| label_matches_revision(Some(label), rev))
                .map(|(_, spec)| spec)
        });
    let method = match (old, new) {
        (Some(old), Some(new)) if old.template == new.template => {
            // Only the claim templates changed: relabel, never roll the pod.
            UpdateMethod::InPlace(InPlaceUpdateSpec::default())
        }
        (Some(old), Some(new))
            if old.volume_claim_templates != new.volume_claim_templates
                && policy != PodUpdatePolicy::ReCreate =>
        {
            UpdateMethod::Recreate {
                changed: vec!["spec.volumeClaimTemplates".to_owned()],
            }
        }
        (Some(old), Some(new)) => {
            match inplace::choose_update_method(policy, &old.template, &new.template) {
                Ok(method) => method,
                Err(err @ InPlaceError::InPlaceOnlyRefused { .. }) => {
                    plan.refusal = Some(err.to_string());
                    return Ok(false);
                }
                Err(source) => return Err(PlanError::InPlace { pod: name, source }),
            }
        }
        _ => UpdateMethod::Recreate {
            changed: vec!["the pod's revision is gone".to_owned()],
        },
    };
    match method {
        UpdateMethod::Recreate { changed } => {
            let detail = if changed.is_empty() {
                String::new()
            } else {
                format!("changed: {}", changed.join(", "))
            };
            plan_delete(snap, pod, DeleteReason::RecreateUpdate, detail, plan);
        }
        UpdateMethod::InPlace(spec) => {
            let step =
                lifecycle::plan_in_place_update(cs.spec.lifecycle.as_ref(), &name, hook_view(pod));
            match step {
                Err(_) | Ok(UpdateStep::Wait) => {}
                Ok(UpdateStep::Prepare(change)) => {
                    let mut c = PodChange::new(pod, ChangeReason::PreparingUpdate);
                    c.conditions
                        .extend(change.readiness.map(ConditionChange::from_readiness));
                    c.merge_patch(change.merge_patch(&now_string(snap.now)));
                    plan.pod_changes.push(c);
                }
                Ok(UpdateStep::UpdateNow) => {
                    let grace = cs
                        .spec
                        .update_strategy
                        .in_place_update_strategy
                        .as_ref()
                        .map_or(0, |s| s.grace_period_seconds);
                    let begin =
                        inplace::begin_update(snap.update_revision, &spec, pod, grace, snap.now)
                            .map_err(|source| PlanError::InPlace {
                                pod: name.clone(),
                                source,
                            })?;
                    let mut c = PodChange::new(pod, ChangeReason::InPlaceStart);
                    if begin.mark_not_ready {
                        c.conditions.push(ConditionChange {
                            condition_type: INPLACE_UPDATE_READY,
                            status: false,
                            reason: REASON_START,
                            message: format!("updating in place to {}", snap.update_revision),
                        });
                    }
                    let mut patch = begin.patch.clone();
                    patch.labels.insert(
                        POD_TEMPLATE_HASH_LABEL.to_owned(),
                        Some(short_hash(snap.update_revision).to_owned()),
                    );
                    if spec == InPlaceUpdateSpec::default() {
                        // A relabel only: nothing restarts, so no state to track.
                        patch.annotations.remove(STATE_ANNOTATION);
                        c.conditions.clear();
                    }
                    c.merge_patch(pod_patch_json(&patch));
                    if cs.spec.lifecycle.is_some() && spec != InPlaceUpdateSpec::default() {
                        c.merge_patch(serde_json::json!({ "metadata": { "labels": {
                            lifecycle::STATE_LABEL: LifecycleState::Updating.as_str()
                        } } }));
                    }
                    c.resource_version = pod.metadata.resource_version.clone();
                    plan.pod_changes.push(c);
                    if let Some(secs) = begin.requeue_after_seconds {
                        plan.requeue(Duration::from_secs(secs));
                    }
                }
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

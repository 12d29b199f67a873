//! The one view of a pod that every pod-set rule reads: update ordering, scale-down
//! ranking, rollout arithmetic and status counts. Extracted once per sync from the pod,
//! so each rule is a plain function over plain values and no two rules can read the same
//! fact differently (which revision a pod is on, whether it is available).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::deletion_marks::{
    POD_DELETION_COST_ANNOTATION, SPECIFIED_DELETE_LABEL, parse_deletion_cost,
};
use super::inplace::{
    GRACE_ANNOTATION, INPLACE_UPDATE_READY, STATE_ANNOTATION, update_in_progress,
};
use super::lifecycle::LifecycleState;
use super::revision_adapter::RevisionAdapter;

/// What a pod-set rule knows about one pod. The labels are borrowed from the pod: a sync
/// views every pod of the set, and copying each pod's labels was the largest cost of a
/// 3,500-pod CloneSet's plan after the allocator (`examples/plan_cost.rs`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodView<'p> {
    pub name: String,
    pub labels: Cow<'p, BTreeMap<String, String>>,
    /// Empty when the pod is not scheduled yet.
    pub node_name: String,
    /// `status.phase` as Kubernetes spells it; phases other than Pending, Unknown and
    /// Running rank with Pending, as in Kubernetes' `podPhaseToOrdinal` map lookup.
    pub phase: String,
    /// The Ready condition is True.
    pub ready: bool,
    /// When the Ready condition last became True (None: ready for an unknown time).
    pub ready_since: Option<Timestamp>,
    /// Ready for at least `minReadySeconds`.
    pub available: bool,
    /// The `InPlaceUpdateReady` condition is present and not True: an in-place update
    /// holds the pod back (OpenKruise's `IsPodUpdateReady` reads it besides Ready).
    pub in_place_not_ready: bool,
    /// Parsed `controller.kubernetes.io/pod-deletion-cost`; invalid values count as 0.
    pub deletion_cost: i32,
    /// Highest restart count among the pod's containers.
    pub max_restarts: i32,
    pub created: Option<Timestamp>,
    /// On the workload's update revision (OpenKruise's `isPodUpdate`).
    pub updated: bool,
    /// Labelled `apps.kruise.io/specified-delete` or named by the workload for deletion
    /// (CloneSet's `scaleStrategy.podsToDelete`).
    pub specified_delete: bool,
    /// `lifecycle.apps.kruise.io/state`, if set to a known state.
    pub lifecycle: Option<LifecycleState>,
    /// An in-place update (or its grace period) is under way.
    pub updating_in_place: bool,
    /// Has a deletionTimestamp.
    pub terminating: bool,
}

/// What the view of a pod depends on besides the pod.
#[derive(Clone, Copy, Debug)]
pub struct ViewContext<'a> {
    pub update_revision: &'a str,
    pub min_ready_seconds: i32,
    pub now: Timestamp,
    /// Pod names the workload asks to delete.
    pub named_for_deletion: &'a BTreeSet<String>,
}

impl<'p> PodView<'p> {
    /// The view of `pod` in `ctx`.
    pub fn of(pod: &'p Pod, ctx: &ViewContext<'_>) -> Self {
        let labels = pod_labels(pod);
        let status = pod.status.as_ref();
        let ready_condition = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
        let ready = ready_condition.is_some_and(|c| c.status == "True");
        let ready_since = ready_condition
            .filter(|_| ready)
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0);
        let min_ready = SignedDuration::from_secs(i64::from(ctx.min_ready_seconds));
        let available = ready
            && (ctx.min_ready_seconds <= 0
                || ready_since.is_some_and(|since| since + min_ready <= ctx.now));
        let annotations = pod.metadata.annotations.as_ref();
        let name = pod.metadata.name.clone().unwrap_or_default();
        Self {
            specified_delete: labels.contains_key(SPECIFIED_DELETE_LABEL)
                || ctx.named_for_deletion.contains(&name),
            name,
            node_name: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
            phase: status.and_then(|s| s.phase.clone()).unwrap_or_default(),
            ready,
            ready_since,
            available,
            in_place_not_ready: pod_condition(pod, INPLACE_UPDATE_READY)
                .is_some_and(|status| status != "True"),
            deletion_cost: annotations
                .and_then(|a| a.get(POD_DELETION_COST_ANNOTATION))
                .map_or(0, |v| parse_deletion_cost(v)),
            max_restarts: status
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.iter().map(|c| c.restart_count).max())
                .unwrap_or(0),
            created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
            updated: RevisionAdapter::is_on(labels, ctx.update_revision),
            lifecycle: LifecycleState::of(labels),
            updating_in_place: annotations.is_some_and(|a| {
                a.contains_key(GRACE_ANNOTATION)
                    || a.get(STATE_ANNOTATION)
                        .is_some_and(|s| update_in_progress(s))
            }),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            labels: Cow::Borrowed(labels),
        }
    }

    /// The view with its own copy of the labels, to keep apart from the pod.
    pub fn into_owned(self) -> PodView<'static> {
        PodView {
            labels: Cow::Owned(self.labels.into_owned()),
            ..self
        }
    }

    /// In lifecycle state PreparingDelete: its deletion is already under way.
    pub fn preparing_delete(&self) -> bool {
        self.lifecycle == Some(LifecycleState::PreparingDelete)
    }

    /// In lifecycle state PreparingUpdate: its update has started.
    pub fn preparing_update(&self) -> bool {
        self.lifecycle == Some(LifecycleState::PreparingUpdate)
    }

    /// Ready as OpenKruise's `IsPodUpdateReady` counts it: Ready, and not held back by an
    /// in-place update (`InPlaceUpdateReady` absent or True) — a pod whose containers are
    /// about to restart is not ready yet, whatever its Ready condition still says.
    pub fn update_ready(&self) -> bool {
        self.ready && !self.in_place_not_ready
    }

    /// Available as a rollout and the status count it (OpenKruise's `IsPodAvailable`):
    /// update-ready for `minReadySeconds`, no in-place update under way, and in lifecycle
    /// state Normal (or none) — a pod held by a hook (PreparingNormal, PreparingUpdate,
    /// PreparingDelete) does not serve.
    pub fn serving(&self) -> bool {
        self.available
            && !self.in_place_not_ready
            && !self.updating_in_place
            && matches!(self.lifecycle, None | Some(LifecycleState::Normal))
    }
}

/// The pod's labels (empty when it has none).
pub fn pod_labels(pod: &Pod) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    pod.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

/// The status (`"True"`, `"False"`, ...) of the pod's condition `type_`, if present.
pub fn pod_condition<'p>(pod: &'p Pod, type_: &str) -> Option<&'p str> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .map(|c| c.status.as_str())
}

/// The pod carries readiness gate `gate`.
pub fn has_gate(pod: &Pod, gate: &str) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|g| g.condition_type == gate))
}

/// Kubernetes' `IsPodActive`: not terminating, not finished.
pub fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// Kubernetes' `podPhaseToOrdinal`, by which both update order and deletion order rank
/// pods: phases not in its map count as Pending.
pub(super) fn phase_ordinal(phase: &str) -> u8 {
    match phase {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

/// Kubernetes' `afterOrZero`: whether `a` is after `b`, a missing time counting as after
/// any real one.
pub(super) fn after_or_zero(a: Option<Timestamp>, b: Option<Timestamp>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a > b,
        (a, _) => a.is_none(),
    }
}

#[cfg(test)]
#[path = "pod_view_tests.rs"]
mod tests;

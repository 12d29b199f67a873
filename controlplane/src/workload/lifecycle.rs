//! The pod lifecycle state machine behind `lifecycle.apps.kruise.io/state`.
//!
//! A user's controller holds a pod in a state by putting the hook's labels or finalizers on
//! it (OpenKruise `pkg/util/lifecycle`, `cloneset_update.go` `refreshPodState` / `updatePod`,
//! `cloneset_scale.go` `deletePods`):
//! - preDelete / inPlaceUpdate block while the pod is *hooked*: any one hook label with its
//!   value or any one hook finalizer is present. The workload moves the pod to
//!   PreparingDelete / PreparingUpdate and waits until the user controller removes them.
//! - preNormal and the end of an in-place update wait for *all* hook labels and finalizers
//!   to be present: the user controller attaches them once the pod is registered again.
//!
//! Every function here is pure; the returned values say what to patch.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::api::common::{Lifecycle, LifecycleHook};

/// Pod label holding the lifecycle state.
pub const STATE_LABEL: &str = "lifecycle.apps.kruise.io/state";
/// Pod annotation holding when the state last changed (RFC 3339, seconds).
pub const TIMESTAMP_ANNOTATION: &str = "lifecycle.apps.kruise.io/timestamp";
/// Readiness-gate condition that markPodNotReady sets to False.
pub const KRUISE_POD_READY: &str = "KruisePodReady";

/// The lifecycle states OpenKruise writes into `lifecycle.apps.kruise.io/state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LifecycleState {
    PreparingNormal,
    Normal,
    PreparingUpdate,
    Updating,
    Updated,
    PreparingDelete,
}

impl LifecycleState {
    pub const ALL: [LifecycleState; 6] = [
        Self::PreparingNormal,
        Self::Normal,
        Self::PreparingUpdate,
        Self::Updating,
        Self::Updated,
        Self::PreparingDelete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::PreparingNormal => "PreparingNormal",
            Self::Normal => "Normal",
            Self::PreparingUpdate => "PreparingUpdate",
            Self::Updating => "Updating",
            Self::Updated => "Updated",
            Self::PreparingDelete => "PreparingDelete",
        }
    }

    /// Reads the state label value; None for a missing or unknown value.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == value)
    }

    /// The state of a pod from its labels.
    pub fn of(labels: &BTreeMap<String, String>) -> Option<Self> {
        labels.get(STATE_LABEL).and_then(|v| Self::parse(v))
    }
}

/// The hook-relevant parts of a pod.
#[derive(Clone, Copy, Debug)]
pub struct PodHookView<'a> {
    pub labels: &'a BTreeMap<String, String>,
    pub finalizers: &'a [String],
}

impl PodHookView<'_> {
    fn has_label(&self, key: &str, value: &str) -> bool {
        self.labels.get(key).is_some_and(|v| v == value)
    }
    fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }
}

/// OpenKruise `IsPodHooked`: any hook finalizer or any hook label (with its value) is present.
pub fn is_hooked(hook: Option<&LifecycleHook>, pod: PodHookView<'_>) -> bool {
    hook.is_some_and(|h| {
        h.finalizers_handler.iter().any(|f| pod.has_finalizer(f))
            || h.labels_handler.iter().any(|(k, v)| pod.has_label(k, v))
    })
}

/// OpenKruise `IsPodAllHooked`: every hook finalizer and every hook label is present.
/// False without a hook, which callers treat as "nothing to wait for" explicitly.
pub fn is_all_hooked(hook: Option<&LifecycleHook>, pod: PodHookView<'_>) -> bool {
    hook.is_some_and(|h| {
        h.finalizers_handler.iter().all(|f| pod.has_finalizer(f))
            && h.labels_handler.iter().all(|(k, v)| pod.has_label(k, v))
    })
}

/// A change to the pod's `KruisePodReady` condition (OpenKruise `executePodNotReadyPolicy`):
/// the key names which lifecycle step holds the pod not ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadinessChange {
    AddNotReadyKey(&'static str),
    RemoveNotReadyKey(&'static str),
}

/// The readiness change markPodNotReady asks for when a pod enters `state`.
pub fn not_ready_policy(
    state: LifecycleState,
    mark_pod_not_ready: bool,
) -> Option<ReadinessChange> {
    if !mark_pod_not_ready {
        return None;
    }
    match state {
        LifecycleState::PreparingDelete => Some(ReadinessChange::AddNotReadyKey("preparingDelete")),
        LifecycleState::PreparingUpdate => Some(ReadinessChange::AddNotReadyKey("preparingUpdate")),
        LifecycleState::Updated => Some(ReadinessChange::RemoveNotReadyKey("preparingUpdate")),
        _ => None,
    }
}

/// Moving a pod to a state: the label and timestamp patch, the readiness change, and, when
/// an in-place update restarts from Updated, the hook labels and finalizers to put back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateChange {
    pub state: LifecycleState,
    pub readiness: Option<ReadinessChange>,
    pub add_labels: BTreeMap<String, String>,
    pub add_finalizers: Vec<String>,
}

impl StateChange {
    fn to(state: LifecycleState, mark_pod_not_ready: bool) -> Self {
        Self {
            state,
            readiness: not_ready_policy(state, mark_pod_not_ready),
            add_labels: BTreeMap::new(),
            add_finalizers: Vec::new(),
        }
    }

    /// The strategic-merge patch OpenKruise sends; `now` is RFC 3339 in seconds.
    pub fn merge_patch(&self, now: &str) -> Value {
        let mut labels = serde_json::Map::new();
        labels.insert(STATE_LABEL.to_owned(), Value::from(self.state.as_str()));
        for (k, v) in &self.add_labels {
            labels.insert(k.clone(), Value::from(v.as_str()));
        }
        let mut metadata = json!({
            "labels": labels,
            "annotations": { TIMESTAMP_ANNOTATION: now },
        });
        if !self.add_finalizers.is_empty() {
            metadata["finalizers"] = json!(self.add_finalizers);
        }
        json!({ "metadata": metadata })
    }
}

/// The lifecycle state every new pod is created in, with or without hooks (OpenKruise's
/// `createPods`): a later sync's refresh moves it to Normal, without a preNormal hook at
/// once (a CloneSet's once the pod is scheduled), else once the user controller has
/// attached all the hook's labels and finalizers.
/// So a pod is never available before a sync has seen it, and tools that wait for the
/// state label see it from the start, even while the pod is unscheduled.
pub const CREATED_STATE: LifecycleState = LifecycleState::PreparingNormal;

/// What to do with a pod the workload wants to delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteStep {
    /// Move to PreparingDelete (or, already there, keep its readiness change applied) and
    /// wait for the user controller to release the preDelete hook.
    Prepare(StateChange),
    /// Already in PreparingDelete and still hooked.
    Wait { readiness: Option<ReadinessChange> },
    /// No hook holds the pod: delete it.
    Delete,
}

/// OpenKruise `deletePods`: a hooked pod is moved to PreparingDelete instead of deleted.
pub fn plan_delete(lifecycle: Option<&Lifecycle>, pod: PodHookView<'_>) -> DeleteStep {
    let hook = lifecycle.and_then(|l| l.pre_delete.as_ref());
    if !is_hooked(hook, pod) {
        return DeleteStep::Delete;
    }
    let mark = hook.is_some_and(|h| h.mark_pod_not_ready);
    if LifecycleState::of(pod.labels) == Some(LifecycleState::PreparingDelete) {
        DeleteStep::Wait {
            readiness: not_ready_policy(LifecycleState::PreparingDelete, mark),
        }
    } else {
        DeleteStep::Prepare(StateChange::to(LifecycleState::PreparingDelete, mark))
    }
}

/// What to do with a pod chosen for an in-place update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpdateStep {
    /// Move to PreparingUpdate and wait for the user controller to release the hook.
    Prepare(StateChange),
    /// Held by the inPlaceUpdate hook, or in Updated with no hook to re-arm.
    Wait,
    /// Update in place now, setting the state to Updating in the same patch.
    UpdateNow,
}

/// Why a pod cannot be updated in place.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LifecycleError {
    #[error("not allowed to in-place update pod {pod} in lifecycle state {state:?}")]
    UpdateNotAllowed { pod: String, state: String },
}

/// OpenKruise `updatePod` (in-place branch): gate an in-place update on the pod's state and
/// its inPlaceUpdate hook. A pod in PreparingDelete (or an unknown state) is refused.
pub fn plan_in_place_update(
    lifecycle: Option<&Lifecycle>,
    pod_name: &str,
    pod: PodHookView<'_>,
) -> Result<UpdateStep, LifecycleError> {
    let hook = lifecycle.and_then(|l| l.in_place_update.as_ref());
    let mark = hook.is_some_and(|h| h.mark_pod_not_ready);
    let raw_state = pod
        .labels
        .get(STATE_LABEL)
        .map(String::as_str)
        .unwrap_or("");
    match LifecycleState::parse(raw_state) {
        None if raw_state.is_empty() => Ok(gate_normal(hook, mark, pod)),
        Some(LifecycleState::PreparingNormal | LifecycleState::Normal) => {
            Ok(gate_normal(hook, mark, pod))
        }
        Some(LifecycleState::Updated) => Ok(match hook {
            // Re-arm the hook: the user controller released it for the previous update.
            Some(h) => UpdateStep::Prepare(StateChange {
                add_labels: h.labels_handler.clone(),
                add_finalizers: h.finalizers_handler.clone(),
                ..StateChange::to(LifecycleState::PreparingUpdate, mark)
            }),
            None => UpdateStep::Wait,
        }),
        Some(LifecycleState::PreparingUpdate) if is_hooked(hook, pod) => Ok(UpdateStep::Wait),
        Some(LifecycleState::PreparingUpdate | LifecycleState::Updating) => {
            Ok(UpdateStep::UpdateNow)
        }
        Some(LifecycleState::PreparingDelete) | None => Err(LifecycleError::UpdateNotAllowed {
            pod: pod_name.to_owned(),
            state: raw_state.to_owned(),
        }),
    }
}

fn gate_normal(hook: Option<&LifecycleHook>, mark: bool, pod: PodHookView<'_>) -> UpdateStep {
    if is_hooked(hook, pod) {
        UpdateStep::Prepare(StateChange::to(LifecycleState::PreparingUpdate, mark))
    } else {
        UpdateStep::UpdateNow
    }
}

/// What the reconciler observed about a pod beyond its labels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RefreshFacts {
    /// The pod's revision label equals the update revision.
    pub on_update_revision: bool,
    /// The in-place update check passed (see `inplace::check_completion`).
    pub update_completed: bool,
    /// The workload keeps a new pod PreparingNormal until it is bound to a node, and this
    /// pod is not bound yet (CloneSet without a preNormal hook, OpenKruise 1.9:
    /// kruise#2087, `cloneset_update.go` `refreshPodState`).
    pub awaiting_schedule: bool,
}

/// OpenKruise `refreshPodState`: the state transition a sync makes on its own, if any.
/// PreparingNormal → Normal once preNormal is all hooked or, without a preNormal hook, once
/// nothing waits for the pod to be scheduled (`RefreshFacts::awaiting_schedule`); Updating (done) and PreparingUpdate
/// (rolled back to the update revision, kruise#1156) → Updated while the inPlaceUpdate hook
/// is not yet re-attached, else Normal; Updated → Normal once all hooked.
pub fn refresh_state(
    lifecycle: Option<&Lifecycle>,
    pod: PodHookView<'_>,
    facts: RefreshFacts,
) -> Option<StateChange> {
    let pre_normal = lifecycle.and_then(|l| l.pre_normal.as_ref());
    let in_place = lifecycle.and_then(|l| l.in_place_update.as_ref());
    let after_update = || {
        // OpenKruise checks `Lifecycle != nil` only, so a lifecycle without an inPlaceUpdate
        // hook still passes through Updated (and leaves it on the next sync).
        if lifecycle.is_some() && !is_all_hooked(in_place, pod) {
            LifecycleState::Updated
        } else {
            LifecycleState::Normal
        }
    };
    let next = match LifecycleState::of(pod.labels)? {
        LifecycleState::PreparingNormal
            if (pre_normal.is_none() && !facts.awaiting_schedule)
                || is_all_hooked(pre_normal, pod) =>
        {
            LifecycleState::Normal
        }
        LifecycleState::PreparingUpdate if facts.on_update_revision => after_update(),
        LifecycleState::Updating if facts.update_completed => after_update(),
        LifecycleState::Updated if in_place.is_none() || is_all_hooked(in_place, pod) => {
            LifecycleState::Normal
        }
        _ => return None,
    };
    Some(StateChange::to(
        next,
        in_place.is_some_and(|h| h.mark_pod_not_ready),
    ))
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;

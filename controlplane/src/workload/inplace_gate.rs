//! Who may open an `InPlaceUpdateReady` gate left closed (pure).
//!
//! Both the workload's in-place update and a SidecarSet's upgrade close the gate through
//! the pod's agent *before* they patch the pod (so the pod leaves endpoints before a
//! container restarts). A control plane that dies between the two writes leaves the gate
//! False with nothing under way that would ever set it True again: the pod stays out of
//! endpoints for good. OpenKruise's `refreshCondition` sets the gate True whenever no
//! in-place update is under way; these rules say when, without opening a gate the other
//! party closed for an upgrade of its own that is about to be recorded.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use serde_json::Value;

use super::{INPLACE_UPDATE_READY, has_readiness_gate, update_in_progress};

/// Reason on the `InPlaceUpdateReady=False` a SidecarSet sets while it upgrades the pod's
/// sidecars (the workload's own update uses `StartInPlaceUpdate`).
pub const REASON_SIDECAR_START: &str = "StartSidecarSetUpgrade";

/// The annotation recording each SidecarSet's upgrade under way (SidecarSet name → entry),
/// as OpenKruise names it.
pub const SIDECAR_UPGRADE_STATE_ANNOTATION: &str = "kruise.io/sidecarset-inplace-update-state";

/// The message on the `InPlaceUpdateReady=False` SidecarSet `set` sets: it names the set,
/// so that only this set's (serialized) syncs reopen a gate it left closed.
pub fn sidecar_gate_message(set: &str) -> String {
    format!("The pod's sidecars are being upgraded in place by SidecarSet {set}.")
}

/// The workload side, for a pod none of whose own in-place updates is under way: its gate
/// is False, and not because a SidecarSet closed it or records an upgrade on it.
pub fn workload_gate_left_closed(pod: &Pod) -> bool {
    has_readiness_gate(pod)
        && gate_condition(pod).is_some_and(|c| c.status == "False")
        && gate_condition(pod).is_none_or(|c| c.reason.as_deref() != Some(REASON_SIDECAR_START))
        && !sidecar_upgrades_recorded(pod)
}

/// The SidecarSet side: SidecarSet `set` closed the pod's gate (its reason and message),
/// records no upgrade on it, and the pod's own workload is not updating it in place.
pub fn sidecar_gate_left_closed(pod: &Pod, set: &str) -> bool {
    let closed_by_set = gate_condition(pod).is_some_and(|c| {
        c.status == "False"
            && c.reason.as_deref() == Some(REASON_SIDECAR_START)
            && c.message.as_deref() == Some(sidecar_gate_message(set).as_str())
    });
    let annotations = pod.metadata.annotations.as_ref();
    let workload_updating = annotations
        .and_then(|a| a.get(super::STATE_ANNOTATION))
        .is_some_and(|s| update_in_progress(s));
    closed_by_set
        && has_readiness_gate(pod)
        && !workload_updating
        && sidecar_upgrade_entries(pod).is_none_or(|entries| !entries.contains_key(set))
}

fn gate_condition(pod: &Pod) -> Option<&PodCondition> {
    (pod.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == INPLACE_UPDATE_READY))
}

/// Whether any SidecarSet records an upgrade under way on the pod; an annotation that does
/// not parse counts as one (the gate is then left to the SidecarSet).
fn sidecar_upgrades_recorded(pod: &Pod) -> bool {
    let present = (pod.metadata.annotations.as_ref())
        .is_some_and(|a| a.contains_key(SIDECAR_UPGRADE_STATE_ANNOTATION));
    present && sidecar_upgrade_entries(pod).is_none_or(|entries| !entries.is_empty())
}

/// The SidecarSet upgrade entries on the pod; `None` when there is no annotation or it is
/// not a JSON object.
fn sidecar_upgrade_entries(pod: &Pod) -> Option<serde_json::Map<String, Value>> {
    let raw = pod
        .metadata
        .annotations
        .as_ref()?
        .get(SIDECAR_UPGRADE_STATE_ANNOTATION)?;
    match serde_json::from_str(raw) {
        Ok(Value::Object(entries)) => Some(entries),
        _ => None,
    }
}

#[cfg(test)]
#[path = "inplace_gate_tests.rs"]
mod tests;

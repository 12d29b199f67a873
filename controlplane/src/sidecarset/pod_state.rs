//! One pod as a SidecarSet's upgrade reads it (pure): whether the SidecarSet was injected
//! into it, the versions it records (`marks::HASH_ANNOTATION` and the one without
//! images), whether it is ready, whether an upgrade of its sidecars is under way
//! ([`STATE_ANNOTATION`]), due to empty a hot sidecar's old container, or done, and
//! whether its own workload is updating it in place (then its sidecars wait: two in-place
//! updates never share the readiness gate).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::hot::resets;
use super::marks::{
    HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION, INJECTED_LIST_ANNOTATION, recorded,
};
use crate::api::SidecarSet;
use crate::workload::inplace::{
    STATE_ANNOTATION as WORKLOAD_STATE_ANNOTATION, sidecar_gate_left_closed, update_in_progress,
};
use crate::workload::pod_view::{PodView, ViewContext, is_active, pod_labels};
use crate::workload::selector::selector_matches;

/// The annotation recording each SidecarSet's upgrade under way (JSON: SidecarSet name →
/// the version it moves to, when, and the image ID each upgraded sidecar ran before), as
/// OpenKruise names it; shared with the workloads, which leave a gate alone while a
/// SidecarSet records an upgrade.
pub use crate::workload::inplace::SIDECAR_UPGRADE_STATE_ANNOTATION as STATE_ANNOTATION;

/// A pod as the upgrade of one SidecarSet reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SidecarPod {
    /// The pod as the shared update order reads it (name, readiness, labels, ...).
    pub view: PodView<'static>,
    pub injected: bool,
    pub active: bool,
    /// The SidecarSet version the pod records (empty: none).
    pub hash: String,
    pub hash_without_image: String,
    /// An upgrade of this SidecarSet's sidecars is under way.
    pub upgrading: bool,
    /// ... and its sidecars run their new images, ready (a hot sidecar's old container
    /// emptied too).
    pub upgrade_done: bool,
    /// ... and its sidecars run their new images, ready, but a hot sidecar's old container
    /// still runs the old image: it is set to the empty image now.
    pub reset_due: bool,
    /// The pod's own workload is updating it in place.
    pub workload_updating: bool,
    /// `updateStrategy.selector` selects the pod (no selector: every pod).
    pub selected_for_update: bool,
    /// This SidecarSet closed the pod's `InPlaceUpdateReady` gate but records no upgrade
    /// on it (its patch never landed): the gate is opened again.
    pub gate_left_closed: bool,
}

impl SidecarPod {
    pub fn of(pod: &Pod, set: &SidecarSet, now: Timestamp) -> Self {
        let name = set.metadata.name.clone().unwrap_or_default();
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let injected = (annotations.get(INJECTED_LIST_ANNOTATION).into_iter())
            .flat_map(|list| list.split(','))
            .any(|n| n == name);
        let entry = upgrade_entry(&annotations, &name);
        let restarted = (entry.clone()).is_some_and(|e| sidecars_restarted(pod, e));
        let resets_left = !resets(pod, &set.spec.containers).is_empty();
        let selected_for_update = (set.spec.update_strategy.selector.as_ref())
            .is_none_or(|s| selector_matches(s, pod_labels(pod)) == Some(true));
        let context = ViewContext {
            update_revision: "",
            min_ready_seconds: 0,
            now,
            named_for_deletion: &BTreeSet::new(),
        };
        Self {
            view: PodView::of(pod, &context).into_owned(),
            injected,
            active: is_active(pod),
            hash: recorded_hash(&annotations, HASH_ANNOTATION, &name),
            hash_without_image: recorded_hash(&annotations, HASH_WITHOUT_IMAGE_ANNOTATION, &name),
            upgrading: entry.is_some(),
            upgrade_done: restarted && !resets_left,
            reset_due: restarted && resets_left,
            workload_updating: annotations
                .get(WORKLOAD_STATE_ANNOTATION)
                .is_some_and(|s| update_in_progress(s)),
            selected_for_update,
            gate_left_closed: sidecar_gate_left_closed(pod, &name),
        }
    }
}

fn recorded_hash(annotations: &BTreeMap<String, String>, key: &str, set: &str) -> String {
    let versions = recorded(annotations, key);
    (versions
        .get(set)
        .and_then(|v| v.get("hash"))
        .and_then(Value::as_str))
    .unwrap_or_default()
    .to_owned()
}

/// This SidecarSet's entry in the pod's upgrade state, if an upgrade is under way.
fn upgrade_entry(annotations: &BTreeMap<String, String>, set: &str) -> Option<Value> {
    recorded(annotations, STATE_ANNOTATION).get(set).cloned()
}

/// Every sidecar the upgrade restarted runs a new container (its image ID or container
/// ID moved on from what the state recorded) and is ready.
fn sidecars_restarted(pod: &Pod, entry: Value) -> bool {
    let Some(before) = entry
        .get("lastContainerStatuses")
        .and_then(Value::as_object)
    else {
        return true;
    };
    let statuses = (pod.status.as_ref())
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    before.iter().all(|(name, was)| {
        let Some(status) = statuses.iter().find(|s| &s.name == name) else {
            return false;
        };
        // Compared as `container_ids` records them: an ID not reported yet is "", so a
        // container that had none then and has none now has not moved on.
        let recorded = |key: &str| was.get(key).and_then(Value::as_str).unwrap_or_default();
        let moved = status.image_id != recorded("imageID")
            || status.container_id.as_deref().unwrap_or_default() != recorded("containerID");
        moved && status.ready
    })
}

/// The state entry an upgrade to `hash` at `now` records: the image and container IDs the
/// `containers` run before.
pub fn upgrade_entry_for(pod: &Pod, containers: &[String], hash: &str, now: &str) -> Value {
    let last: serde_json::Map<String, Value> = (containers.iter())
        .map(|name| (name.clone(), container_ids(pod, name)))
        .collect();
    json!({ "revision": hash, "updateTimestamp": now, "lastContainerStatuses": last })
}

/// The image and container IDs container `name` of `pod` runs now (empty when unknown).
pub fn container_ids(pod: &Pod, name: &str) -> Value {
    let statuses = (pod.status.as_ref())
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    let status = statuses.iter().find(|s| s.name == name);
    json!({
        "imageID": status.map(|s| s.image_id.clone()).unwrap_or_default(),
        "containerID": status.and_then(|s| s.container_id.clone()).unwrap_or_default(),
    })
}

#[cfg(test)]
#[path = "pod_state_tests.rs"]
mod tests;

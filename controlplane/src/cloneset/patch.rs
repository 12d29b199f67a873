//! Pod changes as data: readiness conditions set through the pod's agent, then one
//! strategic-merge patch. Pure, so the plan can be compared in tests.

use serde_json::{Map, Value, json};

use crate::workload::inplace::PodPatch;
use crate::workload::lifecycle::{KRUISE_POD_READY, ReadinessChange};

/// One pod condition to set through the pod's agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionChange {
    pub condition_type: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl ConditionChange {
    /// The `KruisePodReady` change a lifecycle step asks for.
    pub fn from_readiness(change: ReadinessChange) -> Self {
        match change {
            ReadinessChange::AddNotReadyKey(key) => Self {
                condition_type: KRUISE_POD_READY,
                status: false,
                reason: "LifecycleNotReady",
                message: format!("held not ready by the lifecycle hook ({key})"),
            },
            ReadinessChange::RemoveNotReadyKey(key) => Self {
                condition_type: KRUISE_POD_READY,
                status: true,
                reason: "LifecycleReady",
                message: format!("released by the lifecycle hook ({key})"),
            },
        }
    }
}

/// The `why` of the change that starts a pod's in-place update.
pub const WHY_IN_PLACE_START: &str = "in-place update: start";
/// The `why` of the change that takes a pod into its in-place update's PreparingUpdate hook.
pub const WHY_PREPARING_UPDATE: &str = "lifecycle: PreparingUpdate";

/// Everything one sync changes on one pod, applied in order: conditions, then the patch.
#[derive(Clone, Debug, PartialEq)]
pub struct PodChange {
    pub pod: String,
    pub uid: String,
    /// `spec.nodeName`: whose agent sets the conditions.
    pub node: Option<String>,
    pub conditions: Vec<ConditionChange>,
    /// A strategic-merge patch, or `None`.
    pub patch: Option<Value>,
    /// Make the patch conditional on the resourceVersion the plan was made from, for
    /// changes that must not land on a pod that changed meanwhile (starting an update).
    pub resource_version: Option<String>,
    /// What the change is for, in logs and events.
    pub why: &'static str,
}

impl PodChange {
    pub fn new(pod: &k8s_openapi::api::core::v1::Pod, why: &'static str) -> Self {
        Self {
            pod: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            conditions: Vec::new(),
            patch: None,
            resource_version: None,
            why,
        }
    }

    /// Adds `more` to the patch (deep merge; `more` wins on conflicts).
    pub fn merge_patch(&mut self, more: Value) {
        match &mut self.patch {
            Some(existing) => deep_merge(existing, more),
            None => self.patch = Some(more),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty() && self.patch.is_none()
    }
}

/// The strategic-merge patch of an in-place step: labels and annotations (null removes
/// one) and container images (containers merge by name).
pub fn pod_patch_json(patch: &PodPatch) -> Value {
    let mut metadata = Map::new();
    if !patch.labels.is_empty() {
        metadata.insert("labels".into(), json!(patch.labels));
    }
    if !patch.annotations.is_empty() {
        metadata.insert("annotations".into(), json!(patch.annotations));
    }
    let mut body = Map::new();
    if !metadata.is_empty() {
        body.insert("metadata".into(), Value::Object(metadata));
    }
    if !patch.container_images.is_empty() {
        let containers: Vec<Value> = patch
            .container_images
            .iter()
            .map(|(name, image)| json!({ "name": name, "image": image }))
            .collect();
        body.insert("spec".into(), json!({ "containers": containers }));
    }
    Value::Object(body)
}

/// Merges `more` into `base`: objects key by key, anything else replaced.
pub fn deep_merge(base: &mut Value, more: Value) {
    match (base, more) {
        (Value::Object(base), Value::Object(more)) => {
            for (key, value) in more {
                match base.get_mut(&key) {
                    Some(existing) => deep_merge(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, more) => *base = more,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_place_patch_sets_and_removes_metadata_and_merges_containers_by_name() {
        let mut patch = PodPatch::default();
        patch.labels.insert("a".into(), Some("1".into()));
        patch.annotations.insert("gone".into(), None);
        patch.container_images.insert("app".into(), "web:v2".into());
        assert_eq!(
            pod_patch_json(&patch),
            json!({
                "metadata": { "labels": { "a": "1" }, "annotations": { "gone": null } },
                "spec": { "containers": [{ "name": "app", "image": "web:v2" }] }
            })
        );
        assert_eq!(pod_patch_json(&PodPatch::default()), json!({}));
    }

    #[test]
    fn deep_merge_keeps_both_sides() {
        let mut base = json!({ "metadata": { "labels": { "a": "1" } } });
        deep_merge(
            &mut base,
            json!({ "metadata": { "labels": { "b": "2" }, "annotations": { "c": "3" } } }),
        );
        assert_eq!(
            base,
            json!({ "metadata": { "labels": { "a": "1", "b": "2" }, "annotations": { "c": "3" } } })
        );
    }
}

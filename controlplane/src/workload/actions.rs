//! What a pod-set sync decides, as data: pods to create, pods to delete (with their
//! claims), and pod changes (readiness conditions set through the pod's agent, then one
//! strategic-merge patch). Pure, so a plan can be compared in tests; the shared executor
//! carries it out.

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::workload::claim_resize::ClaimResize;
use crate::workload::inplace::PodPatch;
use crate::workload::lifecycle::{KRUISE_POD_READY, ReadinessChange};
use crate::workload::update_hold::UpdateHoldSeen;

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

/// A pod to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Create {
    pub instance_id: String,
    pub revision: String,
}

/// Why a pod is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteReason {
    ScaleDown,
    Specified,
    RecreateUpdate,
    /// A failed pod whose identity a replacement takes (StatefulSet).
    Failed,
}

impl DeleteReason {
    /// How the deletion is described in events and logs.
    pub fn describe(self) -> &'static str {
        match self {
            Self::ScaleDown => "scale down",
            Self::Specified => "specified for deletion",
            Self::RecreateUpdate => "recreate update",
            Self::Failed => "failed pod replaced",
        }
    }
}

/// A pod to delete, with the claims that go with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delete {
    pub pod: String,
    pub uid: String,
    pub pvcs: Vec<String>,
    pub reason: DeleteReason,
    /// For a recreate update: the fields that could not change in place.
    pub detail: String,
}

/// The decision of one sync.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// In slow-start order.
    pub creates: Vec<Create>,
    /// Live pods whose claims are gone: the claims the workload builds for each create
    /// are made again, the pod is not (a StatefulSet's Pending pod, whose claim was
    /// deleted, say after its node was drained, waits for it forever otherwise).
    pub missing_claims: Vec<Create>,
    pub deletes: Vec<Delete>,
    pub pod_changes: Vec<PodChange>,
    /// Claims of pods in the rolling update to grow to their template's storage request
    /// before the pods move (StatefulSet's `volumeClaimUpdateStrategy: OnPodRollingUpdate`).
    pub claim_resizes: Vec<ClaimResize>,
    /// A claim of a pod in the rolling update differs from its template in more than
    /// size, so it cannot be patched: the message for the FailedUpdate condition.
    pub claim_refusal: Option<String>,
    /// InPlaceOnly refused the template change: the message for the FailedUpdate
    /// condition.
    pub refusal: Option<String>,
    /// Why pods stay on an older revision, when the update step ran.
    pub update_hold: UpdateHoldSeen,
    /// Look again after this long (grace periods, minReadySeconds).
    pub requeue_after: Option<Duration>,
}

impl Plan {
    /// Look again after `after` at the latest (the sooner of two asks wins).
    pub fn requeue(&mut self, after: Duration) {
        self.requeue_after = Some(self.requeue_after.map_or(after, |d| d.min(after)));
    }
}

/// What a pod change is for: chooses its event and whether it disrupts the pod for an
/// update; its description is what logs and error messages say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeReason {
    /// Routine upkeep: new pods' readiness conditions, lifecycle state moves.
    Refresh,
    /// The in-place update's grace period is over: the held patch lands.
    InPlaceGraceOver,
    /// The in-place update finished: its state is cleaned up, the pod is ready again.
    InPlaceDone,
    /// Starts a pod's in-place update.
    InPlaceStart,
    /// Has the node's agent restart containers whose env reads changed pod metadata.
    InPlaceRestart,
    /// Starts the next batch of an in-place update's containers (launch priority).
    InPlaceNextBatch,
    /// Records that a container of the running batch failed, stopping the later ones.
    InPlaceBatchFailed,
    /// Takes a pod into its in-place update's PreparingUpdate hook.
    PreparingUpdate,
    /// Takes a pod into its PreparingDelete hook.
    PreparingDelete,
    /// Holds a pod waiting in PreparingDelete not ready.
    HoldNotReady,
    /// Restores the identity labels of a StatefulSet pod that lost them.
    Identity,
}

impl ChangeReason {
    /// How the change is described in logs and error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Refresh => "refresh",
            Self::InPlaceGraceOver => "in-place update: grace period over",
            Self::InPlaceDone => "in-place update done",
            Self::InPlaceStart => "in-place update: start",
            Self::InPlaceRestart => {
                "in-place update: restart containers whose env reads changed metadata"
            }
            Self::InPlaceNextBatch => "in-place update: next container batch",
            Self::InPlaceBatchFailed => "in-place update: a container batch failed",
            Self::PreparingUpdate => "lifecycle: PreparingUpdate",
            Self::PreparingDelete => "lifecycle: PreparingDelete",
            Self::HoldNotReady => "lifecycle: hold not ready",
            Self::Identity => "identity labels restored",
        }
    }

    /// Whether the change begins disrupting a pod for an update (what a template the
    /// apiserver refuses must hold back).
    pub fn starts_update(self) -> bool {
        matches!(self, Self::InPlaceStart | Self::PreparingUpdate)
    }

    /// The Normal event (reason, action, message) a successful patch of `pod` publishes.
    pub fn patched_event(self, pod: &str) -> Option<(&'static str, &'static str, String)> {
        match self {
            Self::InPlaceStart => Some((
                "SuccessfulUpdatePodInPlace",
                "Update",
                format!("updating pod {pod} in place"),
            )),
            _ => None,
        }
    }
}

impl fmt::Display for ChangeReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

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
    /// A strategic-merge patch of the pod's `resize` subresource (new container
    /// resources), applied before `patch` so a refused resize leaves the pod untouched.
    pub resize: Option<Value>,
    /// Make the patch conditional on the resourceVersion the plan was made from, for
    /// changes that must not land on a pod that changed meanwhile (starting an update).
    pub resource_version: Option<String>,
    /// Containers the node's agent restarts (RestartContainers) before `patch`.
    pub agent_restarts: Vec<String>,
    /// Published as a FailedUpdate Warning event once `patch` lands.
    pub failure: Option<String>,
    /// What the change is for: its event and its description in logs.
    pub reason: ChangeReason,
}

impl PodChange {
    pub fn new(pod: &k8s_openapi::api::core::v1::Pod, reason: ChangeReason) -> Self {
        Self {
            pod: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            conditions: Vec::new(),
            patch: None,
            resize: None,
            resource_version: None,
            agent_restarts: Vec::new(),
            failure: None,
            reason,
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
        self.conditions.is_empty()
            && self.patch.is_none()
            && self.resize.is_none()
            && self.agent_restarts.is_empty()
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
    fn only_starting_an_update_disrupts_and_only_an_in_place_start_has_an_event() {
        use ChangeReason::*;
        let table = [
            (Refresh, "refresh", false, None),
            (
                InPlaceGraceOver,
                "in-place update: grace period over",
                false,
                None,
            ),
            (InPlaceDone, "in-place update done", false, None),
            (
                InPlaceStart,
                "in-place update: start",
                true,
                Some((
                    "SuccessfulUpdatePodInPlace",
                    "Update",
                    "updating pod p in place",
                )),
            ),
            (PreparingUpdate, "lifecycle: PreparingUpdate", true, None),
            (PreparingDelete, "lifecycle: PreparingDelete", false, None),
            (HoldNotReady, "lifecycle: hold not ready", false, None),
        ];
        for (reason, described, starts_update, event) in table {
            assert_eq!(reason.to_string(), described);
            assert_eq!(reason.starts_update(), starts_update, "{reason}");
            let got = reason.patched_event("p");
            let got = got.as_ref().map(|(r, a, note)| (*r, *a, note.as_str()));
            assert_eq!(got, event, "{reason}");
        }
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

//! The annotations OpenKruise writes on a pod during an in-place update, byte-compatible
//! with `apis/apps/pub/inplace_update.go` and `pkg/util/inplaceupdate` so pods updated by
//! OpenKruise and by Stevedore can be taken over by either.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Pod annotation holding [`InPlaceUpdateState`] as JSON.
pub const STATE_ANNOTATION: &str = "apps.kruise.io/inplace-update-state";
/// Pod annotation holding [`GraceSpec`] as JSON while the grace period runs.
pub const GRACE_ANNOTATION: &str = "apps.kruise.io/inplace-update-grace";

/// `InPlaceUpdateState`: the revision being rolled to, when the update started and the
/// image IDs the changed containers ran before it, which the completion check compares.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateState {
    pub revision: String,
    pub update_timestamp: Time,
    /// Not omitempty in Go: `{}` or `null` are both accepted on read.
    #[serde(default, deserialize_with = "null_as_default")]
    pub last_container_statuses: BTreeMap<String, InPlaceUpdateContainerStatus>,
    /// Fields of newer OpenKruise versions (nextContainerImages, containerBatchesRecord, ...),
    /// kept so a rewrite does not drop them.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// `InPlaceUpdateContainerStatus`: what a changed container ran before the update.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct InPlaceUpdateContainerStatus {
    /// Recorded for an image change.
    #[serde(rename = "imageID", default, skip_serializing_if = "String::is_empty")]
    pub image_id: String,
    /// Recorded for a resize: the resources the container had before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Stevedore's own: the container that ran before an image change, so a new tag of
    /// the same digest is told done by a new container, not by the status image string.
    #[serde(
        rename = "containerID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub container_id: String,
}

impl InPlaceUpdateContainerStatus {
    /// Whether the container's image changed (a resize alone records no image ID; an
    /// image change of a container that had no status yet records neither and counts as
    /// a resize only when it also records resources).
    pub fn image_changed(&self) -> bool {
        self.resources.is_none() || !self.image_id.is_empty()
    }
}

/// `UpdateSpec` as stored in the grace annotation: what to patch once the grace period ends.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GraceSpec {
    pub revision: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_images: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_resources: BTreeMap<String, ResourceRequirements>,
    /// Go `[]byte`, so base64 of a JSON merge patch of the pod's labels and annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta_data_patch: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub grace_seconds: i32,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

fn is_zero(value: &i32) -> bool {
    *value == 0
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Why an annotation could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AnnotationError {
    #[error("pod annotation {key} is not valid JSON for its type: {source}")]
    Malformed {
        key: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("could not encode pod annotation {key}: {source}")]
    Encode {
        key: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

impl InPlaceUpdateState {
    pub fn parse(value: &str) -> Result<Self, AnnotationError> {
        serde_json::from_str(value).map_err(|source| AnnotationError::Malformed {
            key: STATE_ANNOTATION,
            source,
        })
    }

    pub fn to_annotation(&self) -> Result<String, AnnotationError> {
        serde_json::to_string(self).map_err(|source| AnnotationError::Encode {
            key: STATE_ANNOTATION,
            source,
        })
    }

    /// Whether the update this state records has finished. OpenKruise keeps the annotation
    /// after an update (people and tools read `containerBatchesRecord` and the rest
    /// afterwards) and re-runs its completion check on every sync; Stevedore keeps it too
    /// and records the end in a field of its own, so a finished update is never taken
    /// for one in progress (a container that restarts later would fail the check again).
    pub fn completed(&self) -> bool {
        self.other.get(COMPLETED_FIELD) == Some(&Value::Bool(true))
    }

    /// Records that the update has finished (see [`Self::completed`]).
    pub fn mark_completed(&mut self) {
        self.other
            .insert(COMPLETED_FIELD.to_owned(), Value::Bool(true));
    }

    /// Newer OpenKruise splits an update into batches; a pod with a batch still queued is
    /// not done even if the first batch is.
    pub fn has_next_batch(&self) -> bool {
        BATCH_MAPS.iter().any(|key| {
            self.other
                .get(*key)
                .is_some_and(|v| v.as_object().is_some_and(|m| !m.is_empty()))
        })
    }

    /// The batch fields, read from where they are kept (`other`, so a state written by
    /// another OpenKruise version round-trips); malformed ones read as absent.
    pub fn batches(&self) -> Batches {
        let fields: serde_json::Map<String, Value> = self
            .other
            .iter()
            .filter(|(k, _)| BATCH_FIELDS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        serde_json::from_value(Value::Object(fields)).unwrap_or_default()
    }

    /// Replaces the batch fields with `batches` (empty ones are left out).
    pub fn set_batches(&mut self, batches: &Batches) -> Result<(), AnnotationError> {
        self.other
            .retain(|k, _| !BATCH_FIELDS.contains(&k.as_str()));
        let value = serde_json::to_value(batches).map_err(|source| AnnotationError::Encode {
            key: STATE_ANNOTATION,
            source,
        })?;
        if let Value::Object(fields) = value {
            self.other.extend(fields);
        }
        Ok(())
    }
}

/// Stevedore's field in the state annotation marking a finished update.
const COMPLETED_FIELD: &str = "stevedoreCompleted";

/// Whether the state annotation `value` records an update still under way: one whose end
/// is not recorded. A malformed value counts as under way (its refresh reports it).
pub fn update_in_progress(value: &str) -> bool {
    InPlaceUpdateState::parse(value).map_or(true, |state| !state.completed())
}

/// The maps of containers still to update in a later batch.
const BATCH_MAPS: &[&str] = &[
    "nextContainerImages",
    "nextContainerResources",
    "nextContainerRefMetadata",
];

/// Every field [`Batches`] reads and writes.
const BATCH_FIELDS: &[&str] = &[
    "nextContainerImages",
    "nextContainerResources",
    "nextContainerRefMetadata",
    "preCheckBeforeNext",
    "containerBatchesRecord",
    "updateEnvFromMetadata",
    "stevedoreAgentRestarts",
    "stevedoreFailedContainer",
];

/// The labels and annotations a container's env reads (OpenKruise's
/// `ContainerRefMetadata`, an ObjectMeta of which only these two are used).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct RefMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl RefMetadata {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// `InPlaceUpdatePreCheckBeforeNext`: the containers that must be ready before the next
/// batch starts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PreCheckBeforeNext {
    #[serde(default)]
    pub containers_required_ready: Vec<String>,
}

/// `InPlaceUpdateContainerBatch`: when a batch started and its containers.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ContainerBatch {
    pub timestamp: Time,
    #[serde(default)]
    pub containers: Vec<String>,
}

/// The batch fields of the state (OpenKruise's names, plus two of Stevedore's own).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Batches {
    /// Container → image, for a later batch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_images: BTreeMap<String, String>,
    /// Container → resources, resized with that container's batch (OpenKruise 1.8's
    /// `nextContainerResources`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_resources: BTreeMap<String, ResourceRequirements>,
    /// Container → the metadata its env reads, restarted in a later batch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_ref_metadata: BTreeMap<String, RefMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_check_before_next: Option<PreCheckBeforeNext>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_batches_record: Vec<ContainerBatch>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update_env_from_metadata: bool,
    /// Stevedore's own: containers of the running batch the node's agent is still to be
    /// asked to restart (their env reads changed metadata; no image change restarts
    /// them). Emptied once the agent accepted, so a new leader does not ask twice.
    #[serde(
        rename = "stevedoreAgentRestarts",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub agent_restarts: Vec<String>,
    /// Stevedore's own: the container whose failure stopped the later batches, once
    /// reported (so the FailedUpdate event is published once).
    #[serde(
        rename = "stevedoreFailedContainer",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub failed_container: String,
}

impl Batches {
    /// The containers queued for a later batch, for any change (image, resources, or
    /// metadata their env reads).
    pub fn waiting(&self) -> BTreeSet<String> {
        (self.next_container_images.keys())
            .chain(self.next_container_resources.keys())
            .chain(self.next_container_ref_metadata.keys())
            .cloned()
            .collect()
    }
}

impl GraceSpec {
    pub fn parse(value: &str) -> Result<Self, AnnotationError> {
        serde_json::from_str(value).map_err(|source| AnnotationError::Malformed {
            key: GRACE_ANNOTATION,
            source,
        })
    }

    pub fn to_annotation(&self) -> Result<String, AnnotationError> {
        serde_json::to_string(self).map_err(|source| AnnotationError::Encode {
            key: GRACE_ANNOTATION,
            source,
        })
    }
}

//! ImageList (`stevedore.dev/v1alpha1`, seed 004): the images one node should have,
//! one object per node named after it, and how far its agent got pulling them.
//!
//! `spec.images` is a granular map keyed by image reference, so several writers (a
//! person, each ImagePullJob, the pre-download logic) each own their own keys through
//! server-side apply under distinct field managers; an entry stays while any of them
//! applies it. `status.images` is keyed the same way: a map rather than a list with
//! `image` as its key, because the distributor's progress updates can then be small JSON
//! merge patches of one key (or `null` to drop one) as well as server-side applies; a
//! list would merge per item only under server-side apply.
//!
//! `spec`, `spec.images` and `status.images` are nullable: on Kubernetes before 1.36,
//! when the last manager removes the last image by server-side apply, the apiserver
//! stores `null` there (kubernetes/kubernetes#117447) and would otherwise refuse the
//! apply. The types read `null` as empty.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::null_as_default;
use super::duration::{DurationError, parse_duration};
use super::image_reference as reference;

/// The default of `pullInterval`.
pub const DEFAULT_PULL_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);
/// The default of `timeoutSeconds` (OpenKruise's pull timeout).
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 600;
/// The default of `backoffLimit` (OpenKruise's).
pub const DEFAULT_BACKOFF_LIMIT: i32 = 3;
/// The most images one ImageList holds; bounds the CEL cost estimate of the key rules.
pub const MAX_IMAGES: u32 = 1024;

/// pullInterval: Go duration syntax (checked first, so `duration()` never errors) and at
/// least a minute.
const PULL_INTERVAL_RULE: &str = "self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') \
    && duration(self) >= duration('1m')";

/// The images one node should have.
// clippy reads the repeated keys of separate `printcolumn(...)` entries as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "stevedore.dev",
    version = "v1alpha1",
    kind = "ImageList",
    status = "ImageListStatus",
    doc = "ImageList lists the images one node should have pulled; there is one per node, named after it. Its agent pulls what is missing, re-pulls alwaysPull images on their interval, and reports per-image progress in status.",
    printcolumn(
        name = "DESIRED",
        type_ = "integer",
        json_path = ".status.desired",
        description = "The number of images in spec."
    ),
    printcolumn(
        name = "SUCCEEDED",
        type_ = "integer",
        json_path = ".status.succeeded",
        description = "The number of images pulled."
    ),
    printcolumn(
        name = "FAILED",
        type_ = "integer",
        json_path = ".status.failed",
        description = "The number of images whose pull failed after all retries."
    ),
    printcolumn(
        name = "PULLING",
        type_ = "integer",
        json_path = ".status.pulling",
        description = "The number of images being pulled."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the ImageList was created."
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("nullable" = true))]
pub struct ImageListSpec {
    /// The images the node should have, keyed by image reference
    /// (`[registry[:port]/]path[:tag][@sha256:<digest>]`, as in a pod's `image`). Each
    /// writer owns its own keys through server-side apply; an image stays while any
    /// writer applies it.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    #[schemars(extend("maxProperties" = MAX_IMAGES, "nullable" = true))]
    #[x_kube(
        merge_strategy = MapMerge::Granular,
        validation = Rule::new(reference::KEYS_LENGTH_RULE)
            .message(Message::Expression(reference::KEYS_LENGTH_MESSAGE.into())),
        validation = Rule::new(reference::KEYS_GRAMMAR_RULE)
            .message(Message::Expression(reference::KEYS_GRAMMAR_MESSAGE.into())),
        validation = Rule::new(reference::KEYS_HEX_NAME_RULE)
            .message(Message::Expression(reference::KEYS_HEX_NAME_MESSAGE.into())),
        validation = Rule::new(reference::KEYS_NAME_LENGTH_RULE)
            .message(Message::Expression(reference::KEYS_NAME_LENGTH_MESSAGE.into()))
    )]
    pub images: BTreeMap<String, ImageListEntry>,
}

/// `spec: null` (see the module doc) reads as an empty spec.
impl<'de> Deserialize<'de> for ImageListSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Fields {
            #[serde(default, deserialize_with = "entries_null_as_default")]
            images: BTreeMap<String, ImageListEntry>,
        }
        let fields = Option::<Fields>::deserialize(deserializer)?;
        Ok(fields.map_or_else(Self::default, |f| Self { images: f.images }))
    }
}

/// Reads a `null` map, and `null` entries in it, as empty: when one writer releases the
/// last fields of an entry another writer still holds by its key alone, server-side apply
/// on Kubernetes before 1.36 leaves the entry `null` (kubernetes/kubernetes#117447). Such
/// an entry means the image with every default.
fn entries_null_as_default<'de, D>(
    deserializer: D,
) -> Result<BTreeMap<String, ImageListEntry>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let entries: Option<BTreeMap<String, Option<ImageListEntry>>> =
        Option::deserialize(deserializer)?;
    Ok(entries
        .unwrap_or_default()
        .into_iter()
        .map(|(image, entry)| (image, entry.unwrap_or_default()))
        .collect())
}

/// How one image is pulled and kept; `null` reads as every default (server-side apply
/// leaves `null` where one writer released the last fields of an entry that another
/// writer still holds).
// Nullable for the reason in `entries_null_as_default`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("nullable" = true))]
pub struct ImageListEntry {
    /// Pull the image again every pullInterval even when it is present, to follow a
    /// moving tag. Defaults to false: an image present on the node is not pulled again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub always_pull: bool,

    /// How often an alwaysPull image is pulled again: a duration such as 24h, 30m or
    /// 1h30m, at least 1m. Defaults to 24h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new(PULL_INTERVAL_RULE).message("pullInterval must be a duration of at least 1m, such as 24h, 30m or 1h30m"))]
    pub pull_interval: Option<String>,

    /// The time of the next pull of an alwaysPull image, when it is later than the last
    /// pull (set it to now to ask for a pull at once); otherwise the next pull is
    /// pullInterval after the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_pull: Option<Time>,

    /// Secrets with registry credentials for the pull, tried in order. The control plane
    /// reads them and passes the credentials to the agent, which cannot read Secrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["namespace".into(), "name".into()]))]
    pub pull_secrets: Vec<PullSecretReference>,

    /// Seconds a pull may go without progress (no byte written, no step begun) before it
    /// fails; at least 1. Defaults to 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<i32>,

    /// Retries after a failed pull (with exponential backoff) before the image is marked
    /// Failed; at least 0. Defaults to 3. A Failed image is still retried, at most 5
    /// minutes apart, and turns Succeeded once a retry works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub backoff_limit: Option<i32>,
}

/// A Secret of type kubernetes.io/dockerconfigjson (or dockercfg).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct PullSecretReference {
    /// Namespace of the Secret.
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Where the pull of one image stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ImagePullPhase {
    /// Not started yet: queued, or waiting out a backoff before the next attempt.
    #[default]
    Waiting,
    /// Being pulled.
    Pulling,
    /// Present on the node (pulled, or found there).
    Succeeded,
    /// backoffLimit attempts have failed, the last one for the reason in `message`; the
    /// agent keeps retrying with backoff (at most 5 minutes apart) until one succeeds.
    Failed,
}

/// How far the agent got with the images of its node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageListStatus {
    /// The generation of the spec these counts and images were computed for.
    #[serde(default)]
    pub observed_generation: i64,
    /// The number of images in spec.
    #[serde(default)]
    pub desired: i32,
    /// The number of images in phase Succeeded.
    #[serde(default)]
    pub succeeded: i32,
    /// The number of images in phase Failed.
    #[serde(default)]
    pub failed: i32,
    /// The number of images in phase Pulling.
    #[serde(default)]
    pub pulling: i32,
    /// The number of images in phase Waiting, or without a status yet.
    #[serde(default)]
    pub waiting: i32,
    /// Per image, keyed by the reference as written in spec.images.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    #[schemars(extend("x-kubernetes-map-type" = "granular", "nullable" = true))]
    pub images: BTreeMap<String, ImageStatus>,
}

/// How far the pull of one image got.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageStatus {
    /// Waiting, Pulling, Succeeded or Failed.
    pub phase: ImagePullPhase,
    /// Bytes of the image's layers and config written so far.
    #[serde(default)]
    pub bytes_done: i64,
    /// Bytes of the image's layers and config in all; 0 until the manifest is read.
    #[serde(default)]
    pub bytes_total: i64,
    /// The image ID (config digest, `sha256:...`) once pulled.
    #[serde(default, rename = "imageID", skip_serializing_if = "String::is_empty")]
    pub image_id: String,
    /// When the image was last pulled successfully (or found present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pull_time: Option<Time>,
    /// Pull attempts since the last success or spec change.
    #[serde(default)]
    pub attempts: i32,
    /// Why the image is Waiting or Failed, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The status counts of an ImageList.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageCounts {
    pub desired: i32,
    pub succeeded: i32,
    pub failed: i32,
    pub pulling: i32,
    pub waiting: i32,
}

impl ImageListEntry {
    /// The interval between pulls of an alwaysPull image (default 24h).
    pub fn pull_interval(&self) -> Result<Duration, DurationError> {
        self.pull_interval
            .as_deref()
            .map_or(Ok(DEFAULT_PULL_INTERVAL), parse_duration)
    }

    /// How long a pull may go without progress (default 600 s; at least 1 s).
    pub fn timeout(&self) -> Duration {
        let seconds = self
            .timeout_seconds
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
            .max(1);
        Duration::from_secs(u64::from(seconds.unsigned_abs()))
    }

    /// Retries after a failed pull before the image is Failed (default 3; never below 0).
    pub fn backoff_limit(&self) -> u32 {
        self.backoff_limit
            .unwrap_or(DEFAULT_BACKOFF_LIMIT)
            .max(0)
            .unsigned_abs()
    }

    /// When an alwaysPull image last pulled at `last_pull` is due again: nextPull when it
    /// is later than the last pull, otherwise pullInterval after it. `None` for images
    /// that are not alwaysPull, which are pulled only when missing.
    pub fn next_pull_after(
        &self,
        last_pull: Timestamp,
    ) -> Result<Option<Timestamp>, DurationError> {
        if !self.always_pull {
            return Ok(None);
        }
        if let Some(Time(next)) = self.next_pull
            && next > last_pull
        {
            return Ok(Some(next));
        }
        let interval =
            SignedDuration::try_from(self.pull_interval()?).unwrap_or(SignedDuration::MAX);
        Ok(Some(
            last_pull.saturating_add(interval).unwrap_or(Timestamp::MAX),
        ))
    }
}

impl ImageCounts {
    /// Counts the images of `spec` by the phase in `statuses`; an image without a status
    /// is Waiting, and statuses of images no longer in spec are not counted.
    pub fn of(spec: &ImageListSpec, statuses: &BTreeMap<String, ImageStatus>) -> Self {
        let mut counts = Self::default();
        for image in spec.images.keys() {
            counts.desired += 1;
            let phase = statuses.get(image).map(|s| s.phase).unwrap_or_default();
            match phase {
                ImagePullPhase::Waiting => counts.waiting += 1,
                ImagePullPhase::Pulling => counts.pulling += 1,
                ImagePullPhase::Succeeded => counts.succeeded += 1,
                ImagePullPhase::Failed => counts.failed += 1,
            }
        }
        counts
    }
}

impl ImageListStatus {
    /// Sets the counts from the per-image statuses and spec.
    pub fn update_counts(&mut self, spec: &ImageListSpec) {
        let counts = ImageCounts::of(spec, &self.images);
        self.desired = counts.desired;
        self.succeeded = counts.succeeded;
        self.failed = counts.failed;
        self.pulling = counts.pulling;
        self.waiting = counts.waiting;
    }
}

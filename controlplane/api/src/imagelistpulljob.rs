//! ImageListPullJob (`apps.kruise.io/v1alpha1`, also served as `v1beta1`): pull a list
//! of images on a set of nodes. OpenKruise's field names: `images` and every ImagePullJob
//! field but `image`; the controller runs one ImagePullJob per image and sums their
//! status. Its webhook checks are CEL rules here, the same rules as ImagePullJob's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    CompletionPolicy, DNS_SUBDOMAIN_REGEX, INT_OR_PERCENT_RULE, MAX_PULL_SECRETS, is_default,
};
use super::image_reference as reference;
use super::imagepulljob::{
    DEADLINE_COVERS_TIMEOUT, ImagePullJobNodeSelector, ImagePullJobSpec, ImagePullPolicy,
    PullPolicy, PullProgress,
};

/// The most images one ImageListPullJob pulls; bounds the CEL cost of the image rules.
pub const MAX_IMAGES: u32 = 255;

/// The desired state of an ImageListPullJob.
// clippy reads the repeated keys of separate `printcolumn(...)` entries as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ImageListPullJob",
    namespaced,
    status = "ImageListPullJobStatus",
    doc = "ImageListPullJob pulls a list of images on a set of nodes, through one ImagePullJob per image (OpenKruise compatible).",
    printcolumn(
        name = "TOTAL",
        type_ = "integer",
        json_path = ".status.desired",
        description = "Number of image pull jobs."
    ),
    printcolumn(
        name = "SUCCEEDED",
        type_ = "integer",
        json_path = ".status.succeeded",
        description = "Number of image pull jobs succeeded."
    ),
    printcolumn(
        name = "COMPLETED",
        type_ = "integer",
        json_path = ".status.completed",
        description = "Number of image pull jobs finished."
    ),
    printcolumn(
        name = "PROGRESS",
        type_ = "integer",
        json_path = ".status.progress.percent",
        description = "Share of the pulls finished, in percent."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the ImageListPullJob was created."
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.selector) || !has(self.podSelector)")
        .message("spec.selector and spec.podSelector cannot both be set")
        .field_path(".podSelector"),
    validation = Rule::new(DEADLINE_COVERS_TIMEOUT)
        .message("spec.completionPolicy.activeDeadlineSeconds must be at least spec.pullPolicy.timeoutSeconds (default 600)")
        .field_path(".completionPolicy.activeDeadlineSeconds")
)]
pub struct ImageListPullJobSpec {
    /// Images to pull, each `[registry[:port]/]path[:tag][@sha256:<digest>]`, each once.
    #[schemars(length(min = 1, max = MAX_IMAGES), inner(length(min = 1, max = 512)))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new(reference::KEYS_GRAMMAR_RULE)
            .message(Message::Expression(reference::KEYS_GRAMMAR_MESSAGE.into())),
        validation = Rule::new(reference::KEYS_HEX_NAME_RULE)
            .message(Message::Expression(reference::KEYS_HEX_NAME_MESSAGE.into())),
        validation = Rule::new(reference::KEYS_NAME_LENGTH_RULE)
            .message(Message::Expression(reference::KEYS_NAME_LENGTH_MESSAGE.into()))
    )]
    pub images: Vec<String>,

    /// Names of Secrets in the job's namespace with registry credentials for the pulls;
    /// at most 64.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_PULL_SECRETS), inner(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_REGEX)))]
    pub pull_secrets: Vec<String>,

    /// Selector is a query over nodes that should pull the images: names, or labels.
    /// Unset (and no podSelector): all nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<ImagePullJobNodeSelector>,

    /// PodSelector selects pods; the images are pulled on the nodes they run on. Cannot
    /// be set with selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,

    /// The number (or percentage of the matched nodes) pulling each image at the same
    /// time. Defaults to 1; 0 pauses the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.parallelism must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"))]
    pub parallelism: Option<IntOrString>,

    /// Stall timeout and retries of each node's pull (see ImagePullJob). Defaults: 600
    /// seconds, 3 retries. An edit reaches the pulls under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub pull_policy: Option<PullPolicy>,

    /// When the job counts as finished. Defaults to type Always.
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(extend("default" = {}))]
    pub completion_policy: CompletionPolicy,

    /// Always pulls even when an image is present on the node; IfNotPresent (default)
    /// pulls only when it is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "IfNotPresent"))]
    pub image_pull_policy: Option<ImagePullPolicy>,
}

/// The observed state of an ImageListPullJob (OpenKruise's fields, and `progress`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageListPullJobStatus {
    /// When the controller first acted on the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When every ImagePullJob finished (completion policy Always only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// The number of ImagePullJobs wanted: the number of images.
    #[serde(default)]
    pub desired: i32,
    /// The number of ImagePullJobs with pulls under way.
    #[serde(default)]
    pub active: i32,
    /// The number of ImagePullJobs whose every node finished (pulled or failed).
    #[serde(default)]
    pub completed: i32,
    /// The number of ImagePullJobs whose every node pulled the image.
    #[serde(default)]
    pub succeeded: i32,
    /// The ImagePullJobs with failed nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_image_statuses: Vec<FailedImageStatus>,
    /// How far the pulls got, summed over the ImagePullJobs (a Stevedore addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<PullProgress>,
}

/// An ImagePullJob with failed nodes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedImageStatus {
    /// The name of the ImagePullJob.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_pull_job: String,
    /// The image.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// What failed, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl ImageListPullJobSpec {
    /// The spec of the ImagePullJob that pulls `image`: every field of this job's, but
    /// `ttlSecondsAfterFinished`, which deletes this job (and its ImagePullJobs with it),
    /// not each ImagePullJob on its own, which would then be created again.
    pub fn child_spec(&self, image: &str) -> ImagePullJobSpec {
        let mut completion_policy = self.completion_policy.clone();
        completion_policy.ttl_seconds_after_finished = None;
        ImagePullJobSpec {
            image: image.to_owned(),
            pull_secrets: self.pull_secrets.clone(),
            selector: self.selector.clone(),
            pod_selector: self.pod_selector.clone(),
            parallelism: self.parallelism.clone(),
            pull_policy: self.pull_policy.clone(),
            completion_policy,
            image_pull_policy: self.image_pull_policy,
        }
    }
}

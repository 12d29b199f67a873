//! ImagePullJob (`apps.kruise.io/v1alpha1`): pull one image on a set of nodes, chosen
//! by name, node labels, or the nodes of selected pods. OpenKruise's field names; its
//! webhook checks are CEL rules here. `sandboxConfig` (metadata for CRI `PullImage`) is
//! not supported: the agent pulls through containerd directly.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    CompletionPolicy, DNS_SUBDOMAIN_REGEX, INT_OR_PERCENT_RULE, MAX_NODE_NAMES, MAX_PULL_SECRETS,
    is_default,
};
use super::image_reference as reference;
use super::imagelist::{DEFAULT_BACKOFF_LIMIT, DEFAULT_TIMEOUT_SECONDS};

/// activeDeadlineSeconds must leave room for one whole pull (OpenKruise's webhook rule).
pub(crate) const DEADLINE_COVERS_TIMEOUT: &str = "!has(self.completionPolicy) \
    || !has(self.completionPolicy.activeDeadlineSeconds) \
    || self.completionPolicy.activeDeadlineSeconds >= \
    (has(self.pullPolicy) && has(self.pullPolicy.timeoutSeconds) ? self.pullPolicy.timeoutSeconds : 600)";

/// The desired state of an ImagePullJob.
// clippy reads the repeated keys of separate `printcolumn(...)` entries as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ImagePullJob",
    namespaced,
    status = "ImagePullJobStatus",
    doc = "ImagePullJob pulls one image on a set of nodes (by name, by node labels, or the nodes of selected pods), a few nodes at a time (OpenKruise compatible).",
    printcolumn(
        name = "TOTAL",
        type_ = "integer",
        json_path = ".status.desired",
        description = "Number of all nodes matched by this job."
    ),
    printcolumn(
        name = "ACTIVE",
        type_ = "integer",
        json_path = ".status.active",
        description = "Number of image pull tasks active."
    ),
    printcolumn(
        name = "SUCCEED",
        type_ = "integer",
        json_path = ".status.succeeded",
        description = "Number of image pull tasks succeeded."
    ),
    printcolumn(
        name = "FAILED",
        type_ = "integer",
        json_path = ".status.failed",
        description = "Number of image pull tasks failed."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the ImagePullJob was created."
    ),
    printcolumn(
        name = "MESSAGE",
        type_ = "string",
        json_path = ".status.message",
        description = "Summary of the job's state."
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
pub struct ImagePullJobSpec {
    /// Image is the image to pull (`[registry[:port]/]path[:tag][@sha256:<digest>]`).
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(
        validation = Rule::new(reference::FIELD_GRAMMAR_RULE)
            .message("spec.image must be a valid image reference: [registry[:port]/]path[:tag][@sha256:<64 hex>], with a lowercase path"),
        validation = Rule::new(reference::FIELD_HEX_NAME_RULE)
            .message("spec.image must not be a 64-character hexadecimal name, which reads as an image ID"),
        validation = Rule::new(reference::FIELD_NAME_LENGTH_RULE)
            .message("spec.image: the name (registry and path) must be at most 255 characters")
    )]
    pub image: String,

    /// Names of Secrets in the job's namespace with registry credentials for the pull; at
    /// most 64.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_PULL_SECRETS), inner(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_REGEX)))]
    pub pull_secrets: Vec<String>,

    /// Selector is a query over nodes that should pull the image: names, or labels.
    /// Unset (and no podSelector): all nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<ImagePullJobNodeSelector>,

    /// PodSelector selects pods; the image is pulled on the nodes they run on. Cannot be
    /// set with selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,

    /// The number (or percentage of the matched nodes) pulling at the same time. Defaults
    /// to 1; 0 pauses the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.parallelism must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"))]
    pub parallelism: Option<IntOrString>,

    /// Stall timeout and retries of each node's pull. Defaults: 600 seconds, 3 retries.
    /// An edit reaches the pulls under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub pull_policy: Option<PullPolicy>,

    /// When the job counts as finished. Defaults to type Always.
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(extend("default" = {}))]
    pub completion_policy: CompletionPolicy,

    /// Always pulls even when the image is present on the node; IfNotPresent (default)
    /// pulls only when it is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "IfNotPresent"))]
    pub image_pull_policy: Option<ImagePullPolicy>,
}

/// The nodes of an ImagePullJob: names, or a label query, not both.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.names) || (!has(self.matchLabels) && !has(self.matchExpressions))").message("spec.selector: names cannot be set with matchLabels or matchExpressions"))]
pub struct ImagePullJobNodeSelector {
    /// Names of the nodes, each at most once; at most 5000 (the largest cluster Kubernetes
    /// supports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(merge_strategy = ListMerge::Set)]
    #[schemars(length(max = MAX_NODE_NAMES), inner(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_REGEX)))]
    pub names: Option<Vec<String>>,
    /// Labels the nodes must carry with these values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Label selector requirements on the nodes, ANDed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<LabelSelectorRequirement>>,
}

/// Stall timeout and retries of each node's pull.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PullPolicy {
    /// Seconds a node's pull may go without progress (no byte written, no step begun)
    /// before it fails and is retried; at least 1. Defaults to 600. A large image keeps
    /// pulling as long as its bytes flow; completionPolicy.activeDeadlineSeconds bounds
    /// the whole job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = DEFAULT_TIMEOUT_SECONDS))]
    pub timeout_seconds: Option<i32>,
    /// Retries before a node's pull counts as failed; at least 0. Defaults to 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = DEFAULT_BACKOFF_LIMIT))]
    pub backoff_limit: Option<i32>,
}

/// Whether a present image is pulled again.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ImagePullPolicy {
    /// Pull even when the image is present.
    Always,
    /// Pull only when the image is missing.
    #[default]
    IfNotPresent,
}

/// The observed state of an ImagePullJob.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobStatus {
    /// When the controller first acted on the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the job finished (type Always only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// The number of nodes that should pull the image.
    #[serde(default)]
    pub desired: i32,
    /// The number of nodes pulling now.
    #[serde(default)]
    pub active: i32,
    /// The number of nodes that have the image.
    #[serde(default)]
    pub succeeded: i32,
    /// The number of nodes whose pull failed after all retries.
    #[serde(default)]
    pub failed: i32,
    /// A summary of the job's state, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The nodes whose pull failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_nodes: Vec<String>,
    /// How far the pulls got, from the bytes the agents report (a Stevedore addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<PullProgress>,
}

/// How far a job's pulls got. `percent` is the share of the work finished: each node
/// (or, for an ImageListPullJob, each image) counts fully once it finished (pulled, or
/// failed after all retries) and by its bytes written while it pulls. It moves with the
/// bytes while pulls run, and never goes back while the number of nodes (images) stays
/// the same: a retried pull that starts over does not undo what was reported.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PullProgress {
    /// The share of the work finished, from 0 to 100.
    #[serde(default)]
    pub percent: i32,
    /// Bytes written so far, summed over the nodes (and images).
    #[serde(default)]
    pub bytes_done: i64,
    /// Bytes in all, summed over the nodes whose pull has read its manifest.
    #[serde(default)]
    pub bytes_total: i64,
}

impl ImagePullJobSpec {
    /// The requested parallelism (default 1).
    pub fn parallelism_or_default(&self) -> IntOrString {
        self.parallelism.clone().unwrap_or(IntOrString::Int(1))
    }

    /// The image pull policy (default IfNotPresent).
    pub fn pull_policy_or_default(&self) -> ImagePullPolicy {
        self.image_pull_policy.unwrap_or_default()
    }

    /// How long a node's pull may go without progress (default 600 s).
    pub fn timeout(&self) -> Duration {
        let seconds = self
            .pull_policy
            .as_ref()
            .and_then(|p| p.timeout_seconds)
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
            .max(1);
        Duration::from_secs(u64::from(seconds.unsigned_abs()))
    }

    /// Retries before a node's pull counts as failed (default 3).
    pub fn backoff_limit(&self) -> u32 {
        self.pull_policy
            .as_ref()
            .and_then(|p| p.backoff_limit)
            .unwrap_or(DEFAULT_BACKOFF_LIMIT)
            .max(0)
            .unsigned_abs()
    }
}

impl ImagePullJobNodeSelector {
    /// The label part as a LabelSelector (empty when the nodes are chosen by name).
    pub fn label_selector(&self) -> LabelSelector {
        LabelSelector {
            match_labels: self.match_labels.clone(),
            match_expressions: self.match_expressions.clone(),
        }
    }
}

//! ContainerRecreateRequest (`apps.kruise.io/v1alpha1`): restart some containers of one
//! pod in place, carried out by the agent of the pod's node. OpenKruise's field names, its
//! webhook's default (`failurePolicy: Fail`) as a schema default, and its webhook's checks
//! that need no other object (containers named, names unique, spec immutable) as CEL.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{DNS_SUBDOMAIN_REGEX, is_default};

/// Label with the name of the pod a request restarts containers of.
pub const POD_NAME_LABEL: &str = "crr.apps.kruise.io/pod-name";
/// Label with the UID of that pod, fixed when the request is first seen.
pub const POD_UID_LABEL: &str = "crr.apps.kruise.io/pod-uid";
/// Label with the name of the pod's node (the `NODE` column).
pub const NODE_NAME_LABEL: &str = "crr.apps.kruise.io/node-name";

/// The most containers one request may name (a pod has far fewer).
pub const MAX_CONTAINERS: u32 = 64;

/// The desired state of a ContainerRecreateRequest.
// clippy reads the repeated keys of separate `printcolumn(...)` entries as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ContainerRecreateRequest",
    namespaced,
    status = "ContainerRecreateRequestStatus",
    shortname = "crr",
    doc = "ContainerRecreateRequest restarts some containers of one pod in place, through the agent of the pod's node (OpenKruise compatible).",
    printcolumn(
        name = "PHASE",
        type_ = "string",
        json_path = ".status.phase",
        description = "Phase of this ContainerRecreateRequest."
    ),
    printcolumn(
        name = "POD",
        type_ = "string",
        json_path = ".spec.podName",
        description = "Pod name of this ContainerRecreateRequest."
    ),
    printcolumn(
        name = "NODE",
        type_ = "string",
        json_path = ".metadata.labels.crr\\.apps\\.kruise\\.io/node-name",
        description = "Node name of the pod of this ContainerRecreateRequest."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the ContainerRecreateRequest was created."
    )
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec is immutable: create a new ContainerRecreateRequest instead"))]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestSpec {
    /// Name of the pod, in the request's namespace, whose containers are recreated.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_REGEX))]
    pub pod_name: String,

    /// The containers to recreate, each named once; they must exist in the pod's
    /// spec.containers.
    #[schemars(length(min = 1, max = MAX_CONTAINERS))]
    #[x_kube(validation = Rule::new("self.all(c, self.filter(d, d.name == c.name).size() == 1)").message("spec.containers: each container may be named only once"))]
    pub containers: Vec<ContainerRecreateRequestContainer>,

    /// How the containers are recreated. Defaults to failurePolicy Fail.
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(extend("default" = {}))]
    pub strategy: ContainerRecreateRequestStrategy,

    /// Seconds from creation after which an unfinished request is marked Failed, even
    /// while containers are still being recreated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub active_deadline_seconds: Option<i64>,

    /// Seconds after the request finished after which it is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
}

/// One container to recreate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestContainer {
    /// Name of the container; it must exist in the pod's spec.containers.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// The container as it ran when the request was admitted, set by the control plane's
    /// admission webhook from the pod's status (read-only: a request must not set it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_context: Option<ContainerRecreateRequestContainerContext>,
}

/// The container a request was admitted for, as the pod's status named it then.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestContainerContext {
    /// The container's ID (`containerd://...`) in the pod's status.
    #[serde(rename = "containerID")]
    #[schemars(length(max = 256))]
    pub container_id: String,
    /// The container's restartCount in the pod's status.
    #[schemars(range(min = 0))]
    pub restart_count: i32,
}

/// Whether a failed container fails the whole request.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum FailurePolicy {
    /// The request fails as soon as one container fails to recreate.
    #[default]
    Fail,
    /// The request completes once every container is done, failed ones included.
    Ignore,
}

/// The strategies of a recreation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestStrategy {
    /// Fail (default) or Ignore: whether one failed container fails the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Fail"))]
    pub failure_policy: Option<FailurePolicy>,
    /// Recreate one container at a time, in the listed order, each once the previous one
    /// runs again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ordered_recreate: bool,
    /// Seconds between SIGTERM and SIGKILL; unset means the pod's
    /// terminationGracePeriodSeconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub termination_grace_period_seconds: Option<i64>,
    /// Seconds the pod is marked not ready (KruisePodReady False, for pods gated on it)
    /// before any container is stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub unready_grace_period_seconds: Option<i64>,
    /// OpenKruise's flag to stop a container that is still starting; Stevedore's agent
    /// always stops the running container, so it is accepted and has no further effect.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force_recreate: bool,
    /// Seconds a new container must have run (without crashing) to count as Succeeded.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    #[schemars(range(min = 0))]
    pub min_started_seconds: i32,
}

impl ContainerRecreateRequestStrategy {
    /// The failure policy (default Fail).
    pub fn policy(&self) -> FailurePolicy {
        self.failure_policy.unwrap_or_default()
    }
}

fn is_zero_i32(value: &i32) -> bool {
    *value == 0
}

/// The phase of a request or of one of its containers, as OpenKruise spells it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ContainerRecreateRequestPhase {
    /// Not started: being checked, or waiting for an earlier request of the same pod.
    #[default]
    Pending,
    /// The agent is recreating the containers.
    Recreating,
    /// A container was recreated and its new container runs (container states only).
    Succeeded,
    /// The request (or a container) failed; see the message.
    Failed,
    /// Every container was recreated (or failed under failurePolicy Ignore).
    Completed,
}

impl ContainerRecreateRequestPhase {
    /// Whether a request in this phase is finished for good.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Succeeded)
    }
}

/// The observed state of a ContainerRecreateRequest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestStatus {
    /// Pending, Recreating, Completed or Failed.
    #[serde(default)]
    pub phase: ContainerRecreateRequestPhase,
    /// When the request finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// What the request is doing or why it ended as it did.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The recreation state of each container, in the order of spec.containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_recreate_states: Vec<ContainerRecreateState>,
}

/// The recreation state of one container.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ContainerRecreateState {
    /// Name of the container.
    pub name: String,
    /// Pending, Recreating, Succeeded or Failed.
    pub phase: ContainerRecreateRequestPhase,
    /// Why the container is in this phase, when there is more to say.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[cfg(test)]
#[path = "containerrecreaterequest_tests.rs"]
mod tests;

//! NodePodProbe (`apps.kruise.io/v1alpha1`, cluster-scoped): the probes one node's agent
//! runs, one object per node named after it, written by the control plane from the
//! PodProbeMarkers; and, in status, what each probe last found. OpenKruise's field names.
//!
//! The control plane writes both halves: the spec from the PodProbeMarkers and the pods,
//! the status from what the node's agent streams back, as it does for ImageLists, so the
//! agent reads and writes no object of the cluster to probe.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::podprobemarker::{ContainerProbeSpec, PortNumber, ProbeState};

/// The most pods one NodePodProbe lists: above a kubelet's default of 110 pods, and low
/// enough that the one-handler rule, costed for every probe of every pod, stays within
/// the apiserver's CEL budget.
pub const MAX_PODS: u32 = 256;
/// The most probes of one pod, from all the PodProbeMarkers selecting it.
pub const MAX_PROBES_PER_POD: u32 = 32;
/// The most characters of a probe state's message (the agent sends at most 1 KiB).
pub const MAX_MESSAGE_CHARS: u32 = 1024;
/// A probe of a NodePodProbe: its ports are numbers, the names resolved by the control
/// plane.
pub type ResolvedProbeSpec = ContainerProbeSpec<PortNumber>;

/// The probes of one node's pods.
// clippy reads the repeated keys of separate `printcolumn(...)` entries as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "NodePodProbe",
    status = "NodePodProbeStatus",
    doc = "NodePodProbe lists the probes one node's agent runs against its pods, one per node named after it, and what each last found (OpenKruise compatible; written by the control plane).",
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the NodePodProbe was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NodePodProbeSpec {
    /// The pods of the node to probe, and their probes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_PODS))]
    pub pod_probes: Vec<PodProbe>,
}

/// One pod and its probes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PodProbe {
    /// The pod's name.
    #[schemars(length(max = 253))]
    pub name: String,
    /// The pod's namespace.
    #[schemars(length(max = 63))]
    pub namespace: String,
    /// The pod's UID: a pod of the same name with another UID is not probed.
    #[schemars(length(max = 64))]
    pub uid: String,
    /// The pod's IP, which tcpSocket and httpGet probes connect to.
    #[serde(rename = "IP", default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 64))]
    pub ip: String,
    /// The probes to run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_PROBES_PER_POD))]
    pub probes: Vec<ContainerProbe>,
}

/// One probe of one container.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerProbe {
    /// The probe's name: `<PodProbeMarker>#<probe>`, unique in the pod.
    #[schemars(length(max = 317))]
    pub name: String,
    /// The container the probe runs in or against.
    #[schemars(length(max = 63))]
    pub container_name: String,
    /// What to run and how often, with named ports resolved to numbers.
    pub probe: ResolvedProbeSpec,
    /// The PodProbeMarker the probe comes from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 253))]
    pub pod_probe_marker_name: String,
}

/// What the node's agent last found.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePodProbeStatus {
    /// Per pod, the state of each probe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_PODS))]
    pub pod_probe_statuses: Vec<PodProbeStatus>,
}

/// The probe states of one pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PodProbeStatus {
    /// The pod's name.
    #[schemars(length(max = 253))]
    pub name: String,
    /// The pod's namespace.
    #[schemars(length(max = 63))]
    pub namespace: String,
    /// The pod's UID.
    #[schemars(length(max = 64))]
    pub uid: String,
    /// Per probe, its state.
    #[serde(rename = "probeStates", default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_PROBES_PER_POD))]
    pub probe_states: Vec<ContainerProbeState>,
}

/// The state of one probe.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerProbeState {
    /// The probe's name, as in spec.
    #[schemars(length(max = 317))]
    pub name: String,
    /// Succeeded, Failed or Unknown.
    pub state: ProbeState,
    /// When the probe last ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// When the state last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The probe's output on success, its error on failure (at most 1 KiB).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = MAX_MESSAGE_CHARS))]
    pub message: String,
}

/// The name of a probe in a NodePodProbe: the marker's name and the probe's, joined by
/// `#` (which neither may contain), as OpenKruise names them.
pub fn probe_key(marker: &str, probe: &str) -> String {
    format!("{marker}#{probe}")
}

/// The marker and probe names of a [`probe_key`], if it is one.
pub fn split_probe_key(key: &str) -> Option<(&str, &str)> {
    key.split_once('#')
}

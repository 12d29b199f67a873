//! What one node's agent should probe (pure): the PodProbeMarkers and the pods bound to
//! the node → the NodePodProbe spec, pods and probes in a stable order so an unchanged
//! input is an unchanged spec (and no write).
//!
//! A pod is probed while it is Running, not being deleted, has an IP, and has the
//! container a probe names; a probe whose named port the container does not declare is
//! left out (it could only ever fail). Named ports are resolved here, so the agent
//! connects to numbers only and never reads the pod. The spec keeps to the CRD's bounds
//! (pods per node, probes per pod), leaving out the last in its order beyond them, so its
//! write is never refused for its size.

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::nodepodprobe::{
    ContainerProbe, MAX_PODS, MAX_PROBES_PER_POD, NodePodProbeSpec, PodProbe, ResolvedProbeSpec,
    probe_key,
};
use crate::api::podprobemarker::{
    ContainerProbeSpec, PodContainerProbe, PodProbeMarker, PodProbeMarkerStatus, PortNumber,
    ProbePort,
};
use crate::workload::pod_view::is_active;
use crate::workload::selector::selector_matches;

/// A pod as the planner probes it: where it runs and the address probes connect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeablePod<'a> {
    pub node: &'a str,
    pub ip: &'a str,
    pub uid: &'a str,
}

/// The pod's node, IP and UID when it may be probed: Running, not being deleted, bound,
/// with an IP and a UID.
pub fn probeable(pod: &Pod) -> Option<ProbeablePod<'_>> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Running") {
        return None;
    }
    Some(ProbeablePod {
        node: non_empty(pod.spec.as_ref()?.node_name.as_ref())?,
        ip: non_empty(status.pod_ip.as_ref())?,
        uid: non_empty(pod.metadata.uid.as_ref())?,
    })
}

fn non_empty(value: Option<&String>) -> Option<&str> {
    value.map(String::as_str).filter(|s| !s.is_empty())
}

/// Whether `marker` selects `pod` (same namespace, selector matches; an invalid selector
/// selects nothing).
pub fn selects(marker: &PodProbeMarker, pod: &Pod) -> bool {
    let empty = Default::default();
    marker.metadata.namespace == pod.metadata.namespace
        && selector_matches(
            &marker.spec.selector,
            pod.metadata.labels.as_ref().unwrap_or(&empty),
        ) == Some(true)
}

/// The probes of the markers selecting `pod`, as NodePodProbe lists them: named
/// `<marker>#<probe>`, ports resolved, sorted by name, at most [`MAX_PROBES_PER_POD`].
pub fn pod_probes(markers: &[&PodProbeMarker], pod: &Pod) -> Vec<ContainerProbe> {
    let mut probes: Vec<ContainerProbe> = markers
        .iter()
        .filter(|marker| selects(marker, pod))
        .flat_map(|marker| {
            let name = marker.metadata.name.clone().unwrap_or_default();
            marker
                .spec
                .probes
                .iter()
                .filter_map(move |probe| container_probe(&name, probe, pod))
        })
        .collect();
    probes.sort_by(|a, b| a.name.cmp(&b.name));
    probes.truncate(bound(MAX_PROBES_PER_POD));
    probes
}

fn bound(limit: u32) -> usize {
    usize::try_from(limit).unwrap_or(usize::MAX)
}

fn container_probe(marker: &str, probe: &PodContainerProbe, pod: &Pod) -> Option<ContainerProbe> {
    let container = pod
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == probe.container_name)?;
    Some(ContainerProbe {
        name: probe_key(marker, &probe.name),
        container_name: probe.container_name.clone(),
        probe: resolve_ports(&probe.probe, container)?,
        pod_probe_marker_name: marker.to_owned(),
    })
}

/// The probe with its named port replaced by the container's number; `None` when the
/// container declares no port of that name (or the number is no port).
pub fn resolve_ports(
    probe: &ContainerProbeSpec,
    container: &Container,
) -> Option<ResolvedProbeSpec> {
    probe.try_map_ports(|port| resolve_port(port, container))
}

fn resolve_port(port: &ProbePort, container: &Container) -> Option<PortNumber> {
    let number = match &port.0 {
        IntOrString::Int(number) => *number,
        IntOrString::String(name) => {
            (container.ports.iter().flatten())
                .find(|p| p.name.as_deref() == Some(name.as_str()))?
                .container_port
        }
    };
    u16::try_from(number)
        .ok()
        .filter(|n| *n > 0)
        .map(PortNumber)
}

/// The NodePodProbe spec of `node`: every probeable pod bound there that some marker
/// probes, sorted by namespace and name, at most [`MAX_PODS`].
pub fn node_spec(node: &str, markers: &[&PodProbeMarker], pods: &[&Pod]) -> NodePodProbeSpec {
    let mut pod_probes: Vec<PodProbe> = pods
        .iter()
        .filter_map(|pod| {
            let at = probeable(pod).filter(|at| at.node == node)?;
            let probes = pod_probes(markers, pod);
            (!probes.is_empty()).then(|| PodProbe {
                name: pod.metadata.name.clone().unwrap_or_default(),
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                uid: at.uid.to_owned(),
                ip: at.ip.to_owned(),
                probes,
            })
        })
        .collect();
    pod_probes.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    pod_probes.truncate(bound(MAX_PODS));
    NodePodProbeSpec { pod_probes }
}

/// How many pods `marker` selects as OpenKruise counts its `matchedPods`: active (not
/// finished, not being deleted: Kubernetes' `IsPodActive`), bound to a node, and
/// Initialized.
pub fn matched_pods(marker: &PodProbeMarker, pods: &[&Pod]) -> i64 {
    let count = pods
        .iter()
        .filter(|pod| is_active(pod) && is_bound(pod) && is_initialized(pod))
        .filter(|pod| selects(marker, pod))
        .count();
    i64::try_from(count).unwrap_or(i64::MAX)
}

fn is_bound(pod: &Pod) -> bool {
    non_empty(pod.spec.as_ref().and_then(|s| s.node_name.as_ref())).is_some()
}

fn is_initialized(pod: &Pod) -> bool {
    (pod.status.as_ref().and_then(|s| s.conditions.as_ref())).is_some_and(|conditions| {
        conditions
            .iter()
            .any(|c| c.type_ == "Initialized" && c.status == "True")
    })
}

/// The status of `marker` given the pods of its namespace: the generation observed and
/// [`matched_pods`].
pub fn marker_status(marker: &PodProbeMarker, pods: &[&Pod]) -> PodProbeMarkerStatus {
    PodProbeMarkerStatus {
        observed_generation: marker.metadata.generation.unwrap_or_default(),
        matched_pods: matched_pods(marker, pods),
    }
}

//! PodProbeMarker: custom probes the node agents run, results recorded on the pods.
//! plan (pure: markers and a node's pods → its NodePodProbe spec), marks (pure: probe
//! states → the pod's condition, labels and annotations, and their patches), wire (pure:
//! NodePodProbe ↔ the agent's ProbeService), controller (keyed by node: writes the
//! NodePodProbe spec and marks the pods), sessions (per node, while leading: pushes the
//! spec to the agent and writes the states it streams into the NodePodProbe status),
//! status (keyed by marker: `observedGeneration` and `matchedPods`).

pub mod controller;
pub mod marks;
pub mod plan;
pub mod sessions;
pub mod status;
pub mod wire;

#[cfg(test)]
mod marks_tests;
#[cfg(test)]
mod plan_tests;

pub use controller::PodProbeMarkerController;
pub use sessions::ProbeSessions;
pub use status::PodProbeMarkerStatusController;

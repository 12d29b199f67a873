//! Custom pod probes (PodProbeMarker, through the node's NodePodProbe): the control
//! plane pushes the node's probe list (`ApplyPodProbes`), the agent runs each probe —
//! exec through containerd's task exec in the container, tcpSocket and httpGet from the
//! node's network to the pod's IP — with core/v1 Probe's timing and thresholds, and
//! streams every change of state (`WatchPodProbes`). The control plane writes the results
//! to the NodePodProbe status and the pods; the agent reads and writes no object for it.

pub mod handlers;
pub mod runner;
pub mod service;
pub mod spec;
pub mod state;

pub use runner::ProbeRunner;
pub use service::ProbeGrpc;

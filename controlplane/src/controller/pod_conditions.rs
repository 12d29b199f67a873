//! Setting a pod's readiness condition goes through the agent of the pod's node (it patches
//! `pods/status`; the control plane never writes pod status itself). Reconcilers see it
//! through this trait so their tests can run without agents.

use std::future::Future;
use std::pin::Pin;

use k8s_openapi::api::core::v1::Node;

/// The pod a condition is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodTarget {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// One condition to set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionRequest<'a> {
    pub condition_type: &'a str,
    pub status: bool,
    pub reason: &'a str,
    pub message: &'a str,
}

/// Why a condition could not be set.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConditionError {
    /// The agent could not be reached (or timed out): wait and retry, do not give up.
    pub unreachable: bool,
    pub message: String,
}

pub type ConditionFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(), ConditionError>> + Send + 'a>>;

/// Sets pod conditions through the pod's node agent, and restarts a pod's containers
/// where the kubelet would not (an in-place update of env read from pod metadata).
pub trait PodConditions: Send + Sync + 'static {
    fn set_condition<'a>(
        &'a self,
        node: &'a Node,
        pod: PodTarget,
        request: ConditionRequest<'a>,
    ) -> ConditionFuture<'a>;

    /// Asks the agent to restart `containers` of the pod (RestartContainers); returns once
    /// the agent accepted. An agent already restarting containers of the pod refuses, and
    /// that counts as unreachable: try again later.
    fn restart_containers<'a>(
        &'a self,
        node: &'a Node,
        pod: PodTarget,
        containers: &'a [String],
    ) -> ConditionFuture<'a> {
        let _ = (node, pod, containers);
        Box::pin(async {
            Err(ConditionError {
                unreachable: false,
                message: "these agents cannot restart containers".to_owned(),
            })
        })
    }
}

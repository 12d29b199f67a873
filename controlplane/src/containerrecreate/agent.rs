//! The narrow seam between the ContainerRecreateRequest controller and the node agents:
//! start a restart, read its progress. The agent pool implements it over
//! `ContainerService` (`agents/restarts.rs`); tests use a recording double.

use std::future::Future;
use std::pin::Pin;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;

use super::plan::{AgentView, ContainerProgress, RestartRequest};

/// Why an agent call did not give an answer the request can use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AgentFailure {
    /// The agent could not be reached or did not answer in time: try again.
    #[error("{0}")]
    Unreachable(String),
    /// The agent does not know the operation (it restarted since).
    #[error("{0}")]
    UnknownOperation(String),
    /// The agent is already restarting containers of this pod.
    #[error("{0}")]
    Busy(String),
    /// The agent refused the call; asking again will not help.
    #[error("{0}")]
    Refused(String),
}

/// A snapshot of a restart operation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestartSnapshot {
    pub containers: Vec<ContainerProgress>,
    /// Every container is Succeeded or Failed.
    pub done: bool,
}

pub type AgentFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, AgentFailure>> + Send + 'a>>;

/// Restarts through the agent of a node.
pub trait ContainerRestarts: Send + Sync + 'static {
    /// Starts the restart; returns the agent's operation ID.
    fn start<'a>(&'a self, node: &'a Node, request: &'a RestartRequest) -> AgentFuture<'a, String>;

    /// The current progress of operation `operation`.
    fn progress<'a>(
        &'a self,
        node: &'a Node,
        operation: &'a str,
    ) -> AgentFuture<'a, RestartSnapshot>;
}

/// What the plan sees of an agent's answer; `unreachable_since` is when the agent first
/// failed to answer in the current run of failures (kept by the caller).
pub fn view_of(
    answer: Result<RestartSnapshot, AgentFailure>,
    unreachable_since: Timestamp,
) -> AgentView {
    match answer {
        Ok(snapshot) => AgentView::Progress {
            containers: snapshot.containers,
            done: snapshot.done,
        },
        Err(AgentFailure::Unreachable(message)) => AgentView::Unreachable {
            since: unreachable_since,
            message,
        },
        Err(AgentFailure::UnknownOperation(message)) => AgentView::Lost(message),
        Err(AgentFailure::Busy(message)) => AgentView::Busy(message),
        Err(AgentFailure::Refused(message)) => AgentView::Refused(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_what_the_plan_reads() {
        let since: Timestamp = "2026-01-01T00:00:00Z".parse().expect("a timestamp");
        let snapshot = RestartSnapshot {
            containers: Vec::new(),
            done: true,
        };
        let cases = [
            (
                Ok(snapshot),
                AgentView::Progress {
                    containers: Vec::new(),
                    done: true,
                },
            ),
            (
                Err(AgentFailure::Unreachable("down".into())),
                AgentView::Unreachable {
                    since,
                    message: "down".into(),
                },
            ),
            (
                Err(AgentFailure::UnknownOperation("gone".into())),
                AgentView::Lost("gone".into()),
            ),
            (
                Err(AgentFailure::Busy("busy".into())),
                AgentView::Busy("busy".into()),
            ),
            (
                Err(AgentFailure::Refused("no".into())),
                AgentView::Refused("no".into()),
            ),
        ];
        for (answer, expected) in cases {
            assert_eq!(view_of(answer, since), expected);
        }
    }
}

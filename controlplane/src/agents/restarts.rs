//! The pool as the ContainerRecreateRequest controller's way to restart containers:
//! `RestartContainers` through the pool's call path, and `WatchRestart` read for one
//! snapshot (the controller polls; it holds no stream between reconciles).

use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use stevedore_proto::stevedore::agent::v1::{
    RestartContainersRequest, RestartState, WatchRestartRequest,
    container_service_client::ContainerServiceClient,
};
use tonic::Code;

use super::{AgentError, AgentPool, PodRef};
use crate::api::containerrecreaterequest::ContainerRecreateRequestPhase as Phase;
use crate::containerrecreate::agent::{
    AgentFailure, AgentFuture, ContainerRestarts, RestartSnapshot,
};
use crate::containerrecreate::plan::{ContainerProgress, RestartRequest};

/// How long reading one progress snapshot may take.
const PROGRESS_TIMEOUT: Duration = Duration::from_secs(10);

impl ContainerRestarts for AgentPool {
    fn start<'a>(&'a self, node: &'a Node, request: &'a RestartRequest) -> AgentFuture<'a, String> {
        let message = RestartContainersRequest {
            pod: Some(PodRef {
                namespace: request.namespace.clone(),
                name: request.pod_name.clone(),
                uid: request.pod_uid.clone(),
            }),
            container_names: request.containers.clone(),
            ordered_recreate: request.ordered,
            termination_grace_period_seconds: request.termination_grace_period_seconds,
            unready_grace_period_seconds: request.unready_grace_period_seconds,
            min_started_seconds: request.min_started_seconds,
        };
        Box::pin(async move {
            // A retry after a lost answer is refused as Busy while the first one runs.
            self.call(node, "RestartContainers", move |channel| {
                let message = message.clone();
                async move {
                    ContainerServiceClient::new(channel)
                        .restart_containers(message)
                        .await
                }
            })
            .await
            .map(|response| response.operation_id)
            .map_err(|err| failure(&err))
        })
    }

    fn progress<'a>(
        &'a self,
        node: &'a Node,
        operation: &'a str,
    ) -> AgentFuture<'a, RestartSnapshot> {
        Box::pin(async move {
            let read = async {
                let mut client = self.containers(node).await.map_err(|e| failure(&e))?;
                let request = WatchRestartRequest {
                    operation_id: operation.to_owned(),
                };
                let mut stream = client
                    .watch_restart(request)
                    .await
                    .map_err(|status| status_failure(&status))?
                    .into_inner();
                match stream.next().await {
                    Some(Ok(progress)) => Ok(snapshot(progress)),
                    Some(Err(status)) => Err(status_failure(&status)),
                    None => Err(AgentFailure::Unreachable(
                        "the agent closed the progress stream without a snapshot".to_owned(),
                    )),
                }
            };
            tokio::time::timeout(PROGRESS_TIMEOUT, read)
                .await
                .unwrap_or_else(|_| {
                    Err(AgentFailure::Unreachable(format!(
                        "no progress from the agent within {}s",
                        PROGRESS_TIMEOUT.as_secs()
                    )))
                })
        })
    }
}

fn snapshot(progress: stevedore_proto::stevedore::agent::v1::RestartProgress) -> RestartSnapshot {
    RestartSnapshot {
        containers: progress
            .containers
            .into_iter()
            .map(|c| ContainerProgress {
                phase: phase(c.state()),
                name: c.name,
                message: c.message,
            })
            .collect(),
        done: progress.done,
    }
}

fn phase(state: RestartState) -> Phase {
    match state {
        RestartState::Unspecified | RestartState::Pending => Phase::Pending,
        RestartState::Recreating => Phase::Recreating,
        RestartState::Succeeded => Phase::Succeeded,
        RestartState::Failed => Phase::Failed,
    }
}

/// A pool error as the controller sees it.
fn failure(err: &AgentError) -> AgentFailure {
    match err {
        AgentError::Rpc { status, .. } => classify(status.code(), err.to_string()),
        _ if err.is_unreachable() => AgentFailure::Unreachable(err.to_string()),
        _ => AgentFailure::Refused(err.to_string()),
    }
}

fn status_failure(status: &tonic::Status) -> AgentFailure {
    classify(status.code(), status.message().to_owned())
}

/// The gRPC codes of `ContainerService`, by what the controller does about them.
fn classify(code: Code, message: String) -> AgentFailure {
    match code {
        Code::NotFound => AgentFailure::UnknownOperation(message),
        Code::FailedPrecondition => AgentFailure::Busy(message),
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::ResourceExhausted
        | Code::Cancelled
        | Code::Unknown
        | Code::Aborted => AgentFailure::Unreachable(message),
        _ => AgentFailure::Refused(message),
    }
}

#[cfg(test)]
mod tests {
    use stevedore_proto::stevedore::agent::v1::{ContainerRestartStatus, RestartProgress};

    use super::*;

    #[test]
    fn codes_map_to_what_the_controller_does() {
        let cases = [
            (Code::NotFound, "UnknownOperation"),
            (Code::FailedPrecondition, "Busy"),
            (Code::Unavailable, "Unreachable"),
            (Code::DeadlineExceeded, "Unreachable"),
            (Code::InvalidArgument, "Refused"),
            (Code::PermissionDenied, "Refused"),
        ];
        for (code, expected) in cases {
            let got = classify(code, "m".into());
            assert!(
                format!("{got:?}").starts_with(expected),
                "{code:?}: {got:?}"
            );
        }
    }

    #[test]
    fn progress_states_become_container_phases() {
        let progress = RestartProgress {
            containers: vec![
                ContainerRestartStatus {
                    name: "a".into(),
                    state: RestartState::Succeeded.into(),
                    message: String::new(),
                },
                ContainerRestartStatus {
                    name: "b".into(),
                    state: RestartState::Failed.into(),
                    message: "gone".into(),
                },
            ],
            done: true,
        };
        let got = snapshot(progress);
        assert!(got.done);
        let phases: Vec<(&str, Phase, &str)> = (got.containers.iter())
            .map(|c| (c.name.as_str(), c.phase, c.message.as_str()))
            .collect();
        assert_eq!(
            phases,
            [("a", Phase::Succeeded, ""), ("b", Phase::Failed, "gone")]
        );
    }
}

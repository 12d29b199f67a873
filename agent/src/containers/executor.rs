//! Carries out one restart [`Operation`]: observes containerd (and the pod status for
//! ordered restarts), steps the state machine, performs its actions, publishes progress.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use stevedore_proto::stevedore::agent::v1::{RestartProgress, RestartState};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::operation::{Action, ContainerObservation, Observation, Operation};
use super::runtime::ContainerRuntime;
use crate::metrics::Metrics;
use crate::pods::{DesiredCondition, KRUISE_POD_READY, NodePods, PodApi, PodError, PodKey};

/// How often the executor looks at containerd while an operation runs.
const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// containerd's ID prefix in `containerStatuses[].containerID`.
const CONTAINERD_ID_PREFIX: &str = "containerd://";

/// Everything an executor touches.
pub struct Executor<R, P> {
    pub runtime: R,
    pub pods: NodePods<P>,
    pub metrics: Metrics,
    pub shutdown: CancellationToken,
}

impl<R: ContainerRuntime, P: PodApi> Executor<R, P> {
    /// Runs `operation` to the end, publishing every change on `progress`.
    #[tracing::instrument(skip_all, fields(node = %self.pods.node(), namespace = %key.namespace, pod = %key.name, operation = %id))]
    pub async fn run(
        self,
        id: String,
        key: PodKey,
        ordered: bool,
        mut operation: Operation,
        progress: watch::Sender<RestartProgress>,
    ) {
        tracing::info!("restart started");
        let names: Vec<String> = operation
            .progress()
            .containers
            .into_iter()
            .map(|c| c.name)
            .collect();
        while !operation.is_done() {
            match self.observe(&key, &names, ordered).await {
                Ok(observed) => {
                    let actions = operation.step(&observed, Instant::now().into_std());
                    self.perform(&key, &mut operation, actions).await;
                }
                Err(ObserveError::PodGone(err)) => {
                    operation.fail_unfinished(&format!("pod is gone: {err}"));
                }
                Err(ObserveError::Transient(message)) => {
                    tracing::warn!(error = %message, "cannot observe containers; retrying");
                }
            }
            progress.send_replace(operation.progress());
            if operation.is_done() {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep(POLL_INTERVAL) => {}
                () = self.shutdown.cancelled() => {
                    operation.fail_unfinished("agent shutting down");
                    let actions = operation.step(&Observation::new(), Instant::now().into_std());
                    self.perform(&key, &mut operation, actions).await;
                    progress.send_replace(operation.progress());
                }
            }
        }
        for container in operation.progress().containers {
            let result = match container.state() {
                RestartState::Succeeded => "succeeded",
                _ => "failed",
            };
            self.metrics.restart_finished(result);
            tracing::info!(container = %container.name, result, message = %container.message, "container restart finished");
        }
    }

    async fn observe(
        &self,
        key: &PodKey,
        names: &[String],
        ordered: bool,
    ) -> Result<Observation, ObserveError> {
        let ready = if ordered {
            match self.pods.get(key).await {
                Ok(pod) => ready_container_ids(&pod),
                Err(err @ (PodError::NotFound { .. } | PodError::UidMismatch { .. })) => {
                    return Err(ObserveError::PodGone(err.to_string()));
                }
                Err(err) => return Err(ObserveError::Transient(err.to_string())),
            }
        } else {
            Vec::new()
        };
        let mut observed = Observation::new();
        for name in names {
            let running = self
                .runtime
                .running_containers(&key.uid, name)
                .await
                .map_err(|err| ObserveError::Transient(err.to_string()))?;
            let ready = ready
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, id)| id.clone());
            observed.insert(name.clone(), ContainerObservation { running, ready });
        }
        Ok(observed)
    }

    async fn perform(&self, key: &PodKey, operation: &mut Operation, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::SetPodReady(ready) => {
                    let desired = DesiredCondition {
                        type_: KRUISE_POD_READY.to_owned(),
                        status: if ready { "True" } else { "False" }.to_owned(),
                        reason: if ready { "" } else { "RestartingContainers" }.to_owned(),
                        message: String::new(),
                    };
                    if let Err(err) = self.pods.set_condition(key, &desired).await {
                        tracing::warn!(error = %err, ready, "cannot set KruisePodReady");
                        if !ready {
                            operation.fail_unfinished(&format!(
                                "cannot set {KRUISE_POD_READY}=False: {err}"
                            ));
                        }
                    }
                }
                Action::Signal {
                    container,
                    ids,
                    signal,
                } => {
                    for id in ids {
                        tracing::info!(container = %container, id = %id, ?signal, "signalling container");
                        if let Err(err) = self.runtime.signal(&id, signal).await {
                            tracing::warn!(container = %container, id = %id, error = %err, "cannot signal container");
                        }
                    }
                }
            }
        }
    }
}

enum ObserveError {
    PodGone(String),
    Transient(String),
}

/// `(container name, containerd ID)` of every container the pod status reports ready.
pub fn ready_container_ids(pod: &Pod) -> Vec<(String, String)> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter(|cs| cs.ready)
        .filter_map(|cs| {
            let id = cs
                .container_id
                .as_deref()?
                .strip_prefix(CONTAINERD_ID_PREFIX)?;
            Some((cs.name.clone(), id.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ready_ids_come_from_ready_containerd_statuses_only() {
        let pod: Pod = serde_json::from_value(json!({
            "status": { "containerStatuses": [
                { "name": "a", "ready": true, "restartCount": 0, "image": "i", "imageID": "",
                  "containerID": "containerd://abc" },
                { "name": "b", "ready": false, "restartCount": 0, "image": "i", "imageID": "",
                  "containerID": "containerd://def" },
                { "name": "c", "ready": true, "restartCount": 0, "image": "i", "imageID": "" },
            ]}
        }))
        .expect("valid pod");
        assert_eq!(
            ready_container_ids(&pod),
            [("a".to_owned(), "abc".to_owned())]
        );
    }
}

//! The container runtime as the restart logic needs it — find a pod's running
//! containers by name, signal one — behind a trait, with containerd as the real thing.

use std::{future::Future, path::PathBuf};

use containerd_client::services::v1::{
    GetRequest, KillRequest, ListContainersRequest, containers_client::ContainersClient,
    tasks_client::TasksClient, version_client::VersionClient,
};
use containerd_client::types::v1::Status as TaskStatus;
use tonic::{Code, Request, metadata::MetadataValue, transport::Channel};

/// Labels CRI puts on every container it creates.
const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";

/// Signals the restart logic sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Kill,
}

impl Signal {
    fn number(self) -> u32 {
        match self {
            Self::Term => 15,
            Self::Kill => 9,
        }
    }
}

/// Why the runtime could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("containerd {operation}: {status}")]
    Call {
        operation: &'static str,
        #[source]
        status: tonic::Status,
    },
    #[error("invalid containerd namespace {0:?}")]
    Namespace(String),
    #[error("refusing to filter on {0:?}: not a Kubernetes name or UID")]
    UnsafeFilterValue(String),
}

/// What the restart logic needs from a container runtime.
pub trait ContainerRuntime: Clone + Send + Sync + 'static {
    /// IDs of the running containers named `container` of the pod with UID `pod_uid`.
    fn running_containers(
        &self,
        pod_uid: &str,
        container: &str,
    ) -> impl Future<Output = Result<Vec<String>, RuntimeError>> + Send;

    /// Sends `signal` to a container's init process; a container that is already
    /// gone is not an error.
    fn signal(
        &self,
        container_id: &str,
        signal: Signal,
    ) -> impl Future<Output = Result<(), RuntimeError>> + Send;
}

/// containerd over its Unix socket, connected lazily so the agent starts (and reports
/// not ready) while containerd is down.
#[derive(Clone)]
pub struct Containerd {
    channel: Channel,
    namespace: MetadataValue<tonic::metadata::Ascii>,
}

impl Containerd {
    pub fn connect_lazy(socket: PathBuf, namespace: &str) -> Result<Self, RuntimeError> {
        let namespace = namespace
            .parse()
            .map_err(|_| RuntimeError::Namespace(namespace.to_owned()))?;
        let channel = crate::containerd_channel::lazy_channel(socket);
        Ok(Self { channel, namespace })
    }

    /// A request carrying the node's containerd namespace.
    pub(crate) fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request
            .metadata_mut()
            .insert("containerd-namespace", self.namespace.clone());
        request
    }

    /// The channel to containerd, for the calls other modules make (probes' exec).
    pub(crate) fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// containerd's version, e.g. `1.6.20`.
    pub async fn version(&self) -> Result<String, RuntimeError> {
        let response = VersionClient::new(self.channel.clone())
            .version(())
            .await
            .map_err(|status| RuntimeError::Call {
                operation: "version",
                status,
            })?;
        Ok(response.into_inner().version)
    }
}

/// Kubernetes names and UIDs only ever hold these; anything else is refused rather
/// than escaped, so nothing from a request can change the filter's meaning.
fn safe_filter_value(value: &str) -> Result<&str, RuntimeError> {
    let ok = !value.is_empty()
        && value.len() <= 253
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    ok.then_some(value)
        .ok_or_else(|| RuntimeError::UnsafeFilterValue(value.to_owned()))
}

/// The containerd filter selecting one container of one pod.
pub fn container_filter(pod_uid: &str, container: &str) -> Result<String, RuntimeError> {
    Ok(format!(
        "labels.\"{POD_UID_LABEL}\"==\"{}\",labels.\"{CONTAINER_NAME_LABEL}\"==\"{}\"",
        safe_filter_value(pod_uid)?,
        safe_filter_value(container)?
    ))
}

impl ContainerRuntime for Containerd {
    async fn running_containers(
        &self,
        pod_uid: &str,
        container: &str,
    ) -> Result<Vec<String>, RuntimeError> {
        let filter = container_filter(pod_uid, container)?;
        let listed = ContainersClient::new(self.channel.clone())
            .list(self.request(ListContainersRequest {
                filters: vec![filter],
            }))
            .await
            .map_err(|status| RuntimeError::Call {
                operation: "list containers",
                status,
            })?
            .into_inner()
            .containers;
        let mut running = Vec::new();
        let mut tasks = TasksClient::new(self.channel.clone());
        for container in listed {
            let got = tasks
                .get(self.request(GetRequest {
                    container_id: container.id.clone(),
                    exec_id: String::new(),
                }))
                .await;
            match got {
                Ok(response) => {
                    let status = response.into_inner().process.map(|p| p.status());
                    if status == Some(TaskStatus::Running) {
                        running.push(container.id);
                    }
                }
                // A created container without a task yet, or one whose task is gone.
                Err(status) if status.code() == Code::NotFound => {}
                Err(status) => {
                    return Err(RuntimeError::Call {
                        operation: "get task",
                        status,
                    });
                }
            }
        }
        Ok(running)
    }

    async fn signal(&self, container_id: &str, signal: Signal) -> Result<(), RuntimeError> {
        let result = TasksClient::new(self.channel.clone())
            .kill(self.request(KillRequest {
                container_id: container_id.to_owned(),
                exec_id: String::new(),
                signal: signal.number(),
                all: false,
            }))
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(status) if status.code() == Code::NotFound => Ok(()),
            Err(status) => Err(RuntimeError::Call {
                operation: "kill task",
                status,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_selects_pod_and_container() {
        assert_eq!(
            container_filter("0b1c-2d", "web").ok().as_deref(),
            Some(
                "labels.\"io.kubernetes.pod.uid\"==\"0b1c-2d\",labels.\"io.kubernetes.container.name\"==\"web\""
            )
        );
    }

    #[test]
    fn filter_refuses_values_that_could_change_its_meaning() {
        for bad in ["", "a\"b", "a,b", "a==b", "x y", "a\\"] {
            assert!(container_filter("uid", bad).is_err(), "{bad:?}");
            assert!(container_filter(bad, "web").is_err(), "{bad:?}");
        }
    }
}

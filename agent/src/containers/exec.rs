//! A command run in a running container through containerd's task exec, as `crictl exec`
//! runs one: the container's own process spec (user, environment, working directory,
//! capabilities) with the command as its arguments, no terminal and no stdio, waited for
//! up to a timeout and killed after it. The exec process is always deleted afterwards,
//! so none is left in the shim.

use std::future::Future;
use std::time::Duration;

use containerd_client::services::v1::{
    DeleteProcessRequest, ExecProcessRequest, GetContainerRequest, KillRequest, StartRequest,
    WaitRequest, containers_client::ContainersClient, tasks_client::TasksClient,
};
use prost_types::Any;

use super::runtime::{ContainerRuntime, Containerd, RuntimeError};

/// The type of an OCI process spec in containerd's `Any`.
const PROCESS_SPEC_TYPE: &str = "types.containerd.io/opencontainers/runtime-spec/1/Process";

/// How an exec ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecExit {
    /// The command exited with this status.
    Status(u32),
    /// The command ran past the timeout and was killed.
    TimedOut,
}

/// Why a command could not be run.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("container {container:?} of pod {pod_uid} is not running")]
    NotRunning { pod_uid: String, container: String },
    #[error("container {0} has no readable process spec: {1}")]
    Spec(String, String),
}

/// Runs commands in a pod's containers.
pub trait ContainerExec: Clone + Send + Sync + 'static {
    fn exec(
        &self,
        pod_uid: &str,
        container: &str,
        command: &[String],
        timeout: Duration,
    ) -> impl Future<Output = Result<ExecExit, ExecError>> + Send;
}

fn call(operation: &'static str) -> impl FnOnce(tonic::Status) -> RuntimeError {
    move |status| RuntimeError::Call { operation, status }
}

/// The container's process spec with `command` as its arguments and no terminal.
pub fn exec_process_spec(container_spec: &[u8], command: &[String]) -> Result<Vec<u8>, String> {
    let spec: serde_json::Value =
        serde_json::from_slice(container_spec).map_err(|e| e.to_string())?;
    let mut process = spec
        .get("process")
        .cloned()
        .ok_or_else(|| "no process in the spec".to_owned())?;
    process["args"] = serde_json::json!(command);
    process["terminal"] = serde_json::json!(false);
    serde_json::to_vec(&process).map_err(|e| e.to_string())
}

impl Containerd {
    async fn process_spec(&self, container_id: &str, command: &[String]) -> Result<Any, ExecError> {
        let container = ContainersClient::new(self.channel())
            .get(self.request(GetContainerRequest {
                id: container_id.to_owned(),
            }))
            .await
            .map_err(call("get container"))?
            .into_inner()
            .container;
        let spec = container.and_then(|c| c.spec).unwrap_or_default();
        let value = exec_process_spec(&spec.value, command)
            .map_err(|why| ExecError::Spec(container_id.to_owned(), why))?;
        Ok(Any {
            type_url: PROCESS_SPEC_TYPE.to_owned(),
            value,
        })
    }

    async fn run_exec(
        &self,
        container_id: &str,
        exec_id: &str,
        spec: Any,
        timeout: Duration,
    ) -> Result<ExecExit, ExecError> {
        let mut tasks = TasksClient::new(self.channel());
        let (container_id, exec_id) = (container_id.to_owned(), exec_id.to_owned());
        tasks
            .exec(self.request(ExecProcessRequest {
                container_id: container_id.clone(),
                exec_id: exec_id.clone(),
                spec: Some(spec),
                ..ExecProcessRequest::default()
            }))
            .await
            .map_err(call("exec"))?;
        tasks
            .start(self.request(StartRequest {
                container_id: container_id.clone(),
                exec_id: exec_id.clone(),
            }))
            .await
            .map_err(call("start exec"))?;
        let wait = tasks.wait(self.request(WaitRequest {
            container_id: container_id.clone(),
            exec_id: exec_id.clone(),
        }));
        match tokio::time::timeout(timeout, wait).await {
            Ok(done) => Ok(ExecExit::Status(
                done.map_err(call("wait exec"))?.into_inner().exit_status,
            )),
            Err(_) => {
                let kill = KillRequest {
                    container_id,
                    exec_id,
                    signal: 9,
                    all: false,
                };
                let _ = TasksClient::new(self.channel())
                    .kill(self.request(kill))
                    .await;
                Ok(ExecExit::TimedOut)
            }
        }
    }
}

impl ContainerExec for Containerd {
    async fn exec(
        &self,
        pod_uid: &str,
        container: &str,
        command: &[String],
        timeout: Duration,
    ) -> Result<ExecExit, ExecError> {
        let running = self.running_containers(pod_uid, container).await?;
        let Some(container_id) = running.first() else {
            return Err(ExecError::NotRunning {
                pod_uid: pod_uid.to_owned(),
                container: container.to_owned(),
            });
        };
        let spec = self.process_spec(container_id, command).await?;
        let exec_id = format!("stevedore-probe-{}", next_exec_number());
        let exit = self.run_exec(container_id, &exec_id, spec, timeout).await;
        // Deleting waits for a killed process to be reaped; an exec never started is
        // NotFound, which is fine.
        let delete = DeleteProcessRequest {
            container_id: container_id.clone(),
            exec_id,
        };
        let _ = TasksClient::new(self.channel())
            .delete_process(self.request(delete))
            .await;
        exit
    }
}

/// A number unique in this agent process, for exec IDs.
fn next_exec_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exec_spec_is_the_container_s_process_with_the_command() {
        let spec = serde_json::json!({
            "ociVersion": "1.0.2",
            "process": { "args": ["/server"], "env": ["A=1"], "cwd": "/app", "terminal": true, "user": { "uid": 1000, "gid": 1000 } },
            "root": { "path": "rootfs" },
        });
        let bytes = serde_json::to_vec(&spec).expect("json");
        let command = vec!["cat".to_owned(), "/tmp/healthy".to_owned()];
        let process: serde_json::Value =
            serde_json::from_slice(&exec_process_spec(&bytes, &command).expect("spec"))
                .expect("json");
        assert_eq!(process["args"], serde_json::json!(["cat", "/tmp/healthy"]));
        assert_eq!(process["terminal"], false);
        assert_eq!(
            (process["cwd"].as_str(), process["user"]["uid"].as_u64()),
            (Some("/app"), Some(1000))
        );
        assert_eq!(process["env"], serde_json::json!(["A=1"]));
        assert!(exec_process_spec(b"{}", &command).is_err());
        assert!(exec_process_spec(b"not json", &command).is_err());
    }
}

//! In-place container restarts: stop a pod's running container (SIGTERM, grace,
//! SIGKILL) so kubelet recreates it, and track each restart as an operation.

mod exec;
mod executor;
mod operation;
mod plan;
mod runtime;
mod service;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stevedore_proto::stevedore::agent::v1::{RestartContainersRequest, RestartProgress};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tonic::Status;

pub use exec::{ContainerExec, ExecError, ExecExit};
pub use executor::ready_container_ids;
pub use operation::{Action, ContainerObservation, Observation, Operation, Plan};
pub use plan::{PlanError, plan_restart};
pub use runtime::{ContainerRuntime, Containerd, RuntimeError, Signal, container_filter};
pub use service::ContainerGrpc;

use crate::metrics::Metrics;
use crate::pods::{NodePods, PodApi, PodError, PodKey};
use executor::Executor;

/// How long a finished operation can still be watched.
const KEEP_FINISHED: Duration = Duration::from_secs(600);
/// Most operations remembered; finished ones are forgotten first.
const MAX_OPERATIONS: usize = 1024;

/// Why a restart could not be started or watched.
#[derive(Debug, thiserror::Error)]
pub enum RestartError {
    #[error(transparent)]
    Pod(#[from] PodError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("pod {pod} already has restart operation {operation} running")]
    Busy { pod: String, operation: String },
    #[error("too many restart operations; try again later")]
    TooMany,
    #[error("no restart operation {0:?}")]
    UnknownOperation(String),
    #[error("cannot generate an operation ID")]
    Random,
}

impl From<RestartError> for Status {
    fn from(err: RestartError) -> Self {
        match err {
            RestartError::Pod(err) => err.into(),
            RestartError::Plan(err) => Status::invalid_argument(err.to_string()),
            err @ RestartError::Busy { .. } => Status::failed_precondition(err.to_string()),
            err @ RestartError::TooMany => Status::resource_exhausted(err.to_string()),
            err @ RestartError::UnknownOperation(_) => Status::not_found(err.to_string()),
            err @ RestartError::Random => Status::internal(err.to_string()),
        }
    }
}

struct Entry {
    pod_uid: String,
    progress: watch::Receiver<RestartProgress>,
    started: Instant,
}

impl Entry {
    fn is_done(&self) -> bool {
        self.progress.borrow().done
    }
}

/// The restart operations of this agent.
#[derive(Clone)]
pub struct Restarts<R, P> {
    runtime: R,
    pods: NodePods<P>,
    metrics: Metrics,
    shutdown: CancellationToken,
    running: Arc<Semaphore>,
    operations: Arc<Mutex<HashMap<String, Entry>>>,
}

impl<R: ContainerRuntime, P: PodApi> Restarts<R, P> {
    pub fn new(
        runtime: R,
        pods: NodePods<P>,
        metrics: Metrics,
        max_concurrent: usize,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            runtime,
            pods,
            metrics,
            shutdown,
            running: Arc::new(Semaphore::new(max_concurrent.max(1))),
            operations: Arc::default(),
        }
    }

    /// Checks the request against the pod and starts the restart in the background.
    #[tracing::instrument(skip_all, fields(node = %self.pods.node(), namespace = %key.namespace, pod = %key.name))]
    pub async fn start(
        &self,
        key: PodKey,
        request: &RestartContainersRequest,
    ) -> Result<String, RestartError> {
        let pod = self.pods.get(&key).await?;
        let plan = plan_restart(request, &pod)?;
        let id = operation_id()?;
        let ordered = plan.ordered;
        let operation = Operation::new(plan, Instant::now().into_std());
        let (tx, rx) = watch::channel(operation.progress());
        {
            let mut operations = self.lock();
            forget_old(&mut operations, Instant::now());
            if let Some((other, _)) = operations
                .iter()
                .find(|(_, e)| e.pod_uid == key.uid && !e.is_done())
            {
                return Err(RestartError::Busy {
                    pod: format!("{}/{}", key.namespace, key.name),
                    operation: other.clone(),
                });
            }
            if operations.len() >= MAX_OPERATIONS {
                return Err(RestartError::TooMany);
            }
            operations.insert(
                id.clone(),
                Entry {
                    pod_uid: key.uid.clone(),
                    progress: rx,
                    started: Instant::now(),
                },
            );
        }
        let executor = Executor {
            runtime: self.runtime.clone(),
            pods: self.pods.clone(),
            metrics: self.metrics.clone(),
            shutdown: self.shutdown.clone(),
        };
        let running = Arc::clone(&self.running);
        let operation_id = id.clone();
        tokio::spawn(async move {
            // Queued operations stay Pending until a slot frees up.
            let Ok(_permit) = running.acquire_owned().await else {
                return;
            };
            executor
                .run(operation_id, key, ordered, operation, tx)
                .await;
        });
        Ok(id)
    }

    /// The progress of an operation, changing until it is done.
    pub fn watch(&self, id: &str) -> Result<watch::Receiver<RestartProgress>, RestartError> {
        self.lock()
            .get(id)
            .map(|e| e.progress.clone())
            .ok_or_else(|| RestartError::UnknownOperation(id.to_owned()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        // A panic while holding the lock cannot leave the map inconsistent.
        self.operations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn forget_old(operations: &mut HashMap<String, Entry>, now: Instant) {
    operations.retain(|_, e| !e.is_done() || now.duration_since(e.started) < KEEP_FINISHED);
    while operations.len() >= MAX_OPERATIONS {
        let oldest_done = operations
            .iter()
            .filter(|(_, e)| e.is_done())
            .min_by_key(|(_, e)| e.started)
            .map(|(id, _)| id.clone());
        match oldest_done {
            Some(id) => operations.remove(&id),
            None => break,
        };
    }
}

fn operation_id() -> Result<String, RestartError> {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| RestartError::Random)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

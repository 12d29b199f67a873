//! `stevedore.agent.v1.ProbeService` over the [`ProbeRunner`].

use std::pin::Pin;

use futures::Stream;
use stevedore_proto::stevedore::agent::v1::{
    self as api, ApplyPodProbesRequest, ApplyPodProbesResponse, PodProbeStateUpdate, PodRef,
    WatchPodProbesRequest, probe_service_server::ProbeService,
};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::runner::{ProbeRunner, Update};
use super::spec::desired_probes;
use super::state::ProbeState;
use crate::containers::ContainerExec;
use crate::images::service::image_list::Epoch;

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The gRPC face of the node's probes.
#[derive(Clone)]
pub struct ProbeGrpc<E> {
    node_name: String,
    runner: ProbeRunner<E>,
}

impl<E> ProbeGrpc<E> {
    pub fn new(node_name: String, runner: ProbeRunner<E>) -> Self {
        Self { node_name, runner }
    }

    fn check_node(&self, node_name: &str) -> Result<(), Status> {
        if node_name == self.node_name {
            return Ok(());
        }
        Err(Status::failed_precondition(format!(
            "this agent serves node {:?}, not {node_name:?}",
            self.node_name
        )))
    }
}

fn timestamp(at: Option<std::time::SystemTime>) -> Option<prost_types::Timestamp> {
    at.map(prost_types::Timestamp::from)
}

/// An update as the API sends it.
pub fn to_proto(update: Update) -> PodProbeStateUpdate {
    let Update { key, record, epoch } = update;
    let removed = record.is_none();
    let record = record.unwrap_or_default();
    let state = match record.state {
        ProbeState::Unknown => api::ProbeState::Unknown,
        ProbeState::Succeeded => api::ProbeState::Succeeded,
        ProbeState::Failed => api::ProbeState::Failed,
    };
    PodProbeStateUpdate {
        pod: Some(PodRef {
            namespace: key.namespace,
            name: key.pod,
            uid: key.uid,
        }),
        probe_name: key.probe,
        state: state.into(),
        last_probe_time: timestamp(record.last_probe),
        last_transition_time: timestamp(record.last_transition),
        message: record.message,
        generation: epoch.generation,
        list_uid: epoch.list_uid,
        removed,
    }
}

#[tonic::async_trait]
impl<E: ContainerExec> ProbeService for ProbeGrpc<E> {
    type WatchPodProbesStream = BoxStream<PodProbeStateUpdate>;

    async fn apply_pod_probes(
        &self,
        request: Request<ApplyPodProbesRequest>,
    ) -> Result<Response<ApplyPodProbesResponse>, Status> {
        let request = request.into_inner();
        self.check_node(&request.node_name)?;
        let desired =
            desired_probes(&request).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let epoch = Epoch::new(request.list_uid, request.generation);
        let generation = self.runner.apply(epoch, desired).map_err(|stale| {
            Status::failed_precondition(format!(
                "generation {} of probe list {:?} is older than the generation {} the agent holds",
                stale.offered, stale.list_uid, stale.held
            ))
        })?;
        Ok(Response::new(ApplyPodProbesResponse { generation }))
    }

    async fn watch_pod_probes(
        &self,
        request: Request<WatchPodProbesRequest>,
    ) -> Result<Response<Self::WatchPodProbesStream>, Status> {
        self.check_node(&request.into_inner().node_name)?;
        let (current, mut updates) = self.runner.watch();
        let runner = self.runner.clone();
        let (tx, out) = mpsc::channel(64);
        tokio::spawn(async move {
            let mut pending = current;
            loop {
                for update in pending.drain(..) {
                    if tx.send(Ok(to_proto(update))).await.is_err() {
                        return;
                    }
                }
                match updates.recv().await {
                    Ok(update) => pending.push(update),
                    // Too slow: start again from every probe's record.
                    Err(broadcast::error::RecvError::Lagged(_)) => pending = runner.watch().0,
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(out))))
    }
}

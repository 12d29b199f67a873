//! `stevedore.agent.v1.ContainerService` over [`Restarts`].

use std::pin::Pin;

use futures::Stream;
use stevedore_proto::stevedore::agent::v1::{
    RestartContainersRequest, RestartContainersResponse, RestartProgress, WatchRestartRequest,
    container_service_server::ContainerService,
};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use super::{ContainerRuntime, Restarts};
use crate::pods::{PodApi, PodKey};

/// The gRPC face of the restart operations.
#[derive(Clone)]
pub struct ContainerGrpc<R, P> {
    restarts: Restarts<R, P>,
}

impl<R, P> ContainerGrpc<R, P> {
    pub fn new(restarts: Restarts<R, P>) -> Self {
        Self { restarts }
    }
}

type ProgressStream = Pin<Box<dyn Stream<Item = Result<RestartProgress, Status>> + Send>>;

/// Every distinct snapshot from the current one on, ending after the one marked done.
fn progress_stream(receiver: watch::Receiver<RestartProgress>) -> ProgressStream {
    Box::pin(futures::stream::unfold(
        (receiver, false, true),
        |(mut receiver, finished, first)| async move {
            if finished {
                return None;
            }
            if !first && receiver.changed().await.is_err() {
                // The executor is gone without a final snapshot; send what there is.
                let last = receiver.borrow().clone();
                return Some((Ok(last), (receiver, true, false)));
            }
            let snapshot = receiver.borrow_and_update().clone();
            let done = snapshot.done;
            Some((Ok(snapshot), (receiver, done, false)))
        },
    ))
}

#[tonic::async_trait]
impl<R: ContainerRuntime, P: PodApi> ContainerService for ContainerGrpc<R, P> {
    async fn restart_containers(
        &self,
        request: Request<RestartContainersRequest>,
    ) -> Result<Response<RestartContainersResponse>, Status> {
        let request = request.into_inner();
        let key = PodKey::from_proto(request.pod.clone())?;
        let operation_id = self.restarts.start(key, &request).await?;
        Ok(Response::new(RestartContainersResponse { operation_id }))
    }

    type WatchRestartStream = ProgressStream;

    async fn watch_restart(
        &self,
        request: Request<WatchRestartRequest>,
    ) -> Result<Response<Self::WatchRestartStream>, Status> {
        let receiver = self.restarts.watch(&request.into_inner().operation_id)?;
        Ok(Response::new(progress_stream(receiver)))
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;

    use super::*;

    fn snapshot(done: bool, n: usize) -> RestartProgress {
        RestartProgress {
            containers: vec![Default::default(); n],
            done,
        }
    }

    #[tokio::test]
    async fn stream_follows_changes_and_ends_after_done() {
        let (tx, rx) = watch::channel(snapshot(false, 1));
        let mut stream = progress_stream(rx);
        let first = stream.next().await.and_then(Result::ok);
        assert_eq!(first, Some(snapshot(false, 1)));
        tx.send_replace(snapshot(false, 2));
        assert_eq!(
            stream.next().await.and_then(Result::ok),
            Some(snapshot(false, 2))
        );
        tx.send_replace(snapshot(true, 3));
        assert_eq!(
            stream.next().await.and_then(Result::ok),
            Some(snapshot(true, 3))
        );
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn an_already_done_operation_yields_one_snapshot() {
        let (_tx, rx) = watch::channel(snapshot(true, 1));
        let items: Vec<_> = progress_stream(rx).collect().await;
        assert_eq!(items.len(), 1);
    }
}

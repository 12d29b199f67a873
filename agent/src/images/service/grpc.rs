//! The `stevedore.agent.v1.ImageService` gRPC API over the pull manager, the image
//! inventory and the image list.

use std::{collections::BTreeMap, pin::Pin, time::Duration};

use futures::Stream;
use stevedore_proto::stevedore::agent::v1::{
    self as api, credentials::Kind, image_service_server::ImageService,
};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};
use tracing::Instrument as _;

use super::{
    image_list::{DesiredSpec, Epoch, ImageStatus, ListPhase},
    list_runner::{ImageListController, PRESENCE_EVERY},
    manager::{Policy, PullManager, PullRequest, PullState, RetryPolicy},
};
use crate::images::{
    progress::Phase,
    registry::{Auth, HttpRegistry, Registry},
    store::{
        CRI_PINNED_LABEL, ContainerdStore, ImageStore, StoreError,
        inventory::{self, ImageInfo, InventoryError},
    },
};
use crate::{config::Args, reference::Reference};

/// Least time between two progress messages of one `PullImage` stream.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Why the image service could not start.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Containerd(#[from] StoreError),
    #[error("building the registry client")]
    Registry(#[from] reqwest::Error),
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The image service; generic over its side effects for tests.
pub struct ImageServiceImpl<R, S> {
    node_name: String,
    manager: PullManager<R, S>,
    list: ImageListController,
}

/// The agent's image service, over containerd and real registries.
pub type AgentImageService = ImageServiceImpl<HttpRegistry, ContainerdStore>;

impl AgentImageService {
    /// Connects to containerd and starts the pull manager and the image list, all
    /// stopping with `shutdown`.
    pub async fn connect(args: &Args, shutdown: CancellationToken) -> Result<Self, ConnectError> {
        let store = ContainerdStore::connect(&args.containerd_socket, &args.containerd_namespace)?;
        tokio::spawn(release_orphaned_leases(store.clone(), shutdown.clone()));
        let registry = HttpRegistry::new(&args.insecure_registries)?
            .with_hosts_dir(args.registry_config_dir.clone());
        let manager = PullManager::new(
            registry,
            store,
            args.max_concurrent_pulls.get(),
            args.pull_timeout,
            RetryPolicy::default(),
            shutdown.clone(),
        );
        Ok(Self::with_presence_interval(
            args.node_name.clone(),
            manager,
            args.image_presence_interval,
            shutdown,
        ))
    }
}

impl<R: Registry, S: ImageStore> ImageServiceImpl<R, S> {
    pub fn new(node_name: String, manager: PullManager<R, S>, shutdown: CancellationToken) -> Self {
        Self::with_presence_interval(node_name, manager, PRESENCE_EVERY, shutdown)
    }

    /// [`Self::new`], checking every `presence_every` that the ImageList's pulled images
    /// are still on the node.
    pub fn with_presence_interval(
        node_name: String,
        manager: PullManager<R, S>,
        presence_every: Duration,
        shutdown: CancellationToken,
    ) -> Self {
        let list = ImageListController::spawn_with(manager.clone(), presence_every, shutdown);
        Self {
            node_name,
            manager,
            list,
        }
    }

    /// Counts finished pulls in the agent's metrics.
    pub fn report_to(&self, metrics: crate::metrics::Metrics) {
        self.manager.report_to(metrics);
    }

    fn check_node(&self, node_name: &str) -> Result<(), Status> {
        if node_name == self.node_name {
            Ok(())
        } else {
            Err(Status::failed_precondition(format!(
                "this agent serves node {:?}, not {node_name:?}",
                self.node_name
            )))
        }
    }
}

/// Releases the leases of agent processes that died mid-pull, retrying until containerd
/// answers (the agent may start before it).
async fn release_orphaned_leases(store: ContainerdStore, shutdown: CancellationToken) {
    let mut wait = Duration::from_secs(1);
    loop {
        match store.release_orphaned_leases().await {
            Ok(released) if released.is_empty() => return,
            Ok(released) => {
                tracing::info!(
                    ?released,
                    "released leases of agent processes that died mid-pull"
                );
                return;
            }
            Err(error) => tracing::warn!(%error, "cannot check for orphaned pull leases yet"),
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shutdown.cancelled() => return,
        }
        wait = (wait * 2).min(Duration::from_secs(60));
    }
}

fn parse(image: &str) -> Result<Reference, Status> {
    Reference::parse_normalized(image)
        .map_err(|err| Status::invalid_argument(format!("image {image:?}: {err}")))
}

fn auth_of(credentials: Option<api::Credentials>) -> Auth {
    match credentials.and_then(|c| c.kind) {
        None => Auth::Anonymous,
        Some(Kind::Basic(basic)) => Auth::Basic {
            username: basic.username,
            password: basic.password,
        },
        Some(Kind::Token(token)) => Auth::Token(token),
    }
}

fn seconds(value: u32) -> Option<Duration> {
    (value > 0).then(|| Duration::from_secs(u64::from(value)))
}

fn inventory_status(err: InventoryError) -> Status {
    match err {
        InventoryError::Reference(err) => Status::invalid_argument(err.to_string()),
        InventoryError::Store(err) => Status::new(err.code, err.to_string()),
        InventoryError::Unreadable { .. } => Status::internal(err.to_string()),
    }
}

fn to_image(info: ImageInfo) -> api::Image {
    api::Image {
        id: info.id,
        repo_tags: info.repo_tags,
        repo_digests: info.repo_digests,
        size_bytes: info.size,
    }
}

fn to_update(status: ImageStatus) -> api::ImageListStatusUpdate {
    let phase = match status.phase {
        ListPhase::Waiting => api::ImageListPhase::Waiting,
        ListPhase::Pulling => api::ImageListPhase::Pulling,
        ListPhase::Succeeded => api::ImageListPhase::Succeeded,
        ListPhase::Failed => api::ImageListPhase::Failed,
    };
    api::ImageListStatusUpdate {
        image: status.image,
        phase: phase.into(),
        bytes_done: status.bytes_done,
        bytes_total: status.bytes_total,
        image_id: status.image_id,
        last_pull_time: status.last_pull.map(prost_types::Timestamp::from),
        attempts: status.attempts,
        message: status.message,
        generation: status.generation,
        list_uid: status.list_uid,
    }
}

/// Forwards a pull's state to a `PullImage` stream until the pull ends or the caller
/// goes away (the pull itself goes on).
async fn stream_pull(
    mut rx: tokio::sync::watch::Receiver<PullState>,
    tx: mpsc::Sender<Result<api::PullProgress, Status>>,
) {
    let mut last_sent: Option<api::PullProgress> = None;
    loop {
        let state = rx.borrow_and_update().clone();
        let message = match state.outcome {
            Some(Ok(pulled)) => {
                let mut done = state.progress.to_proto();
                done.phase = api::PullPhase::Done.into();
                done.image_id = pulled.image_id;
                done.repo_digest = pulled.repo_digest;
                let _ = tx.send(Ok(done)).await;
                return;
            }
            Some(Err(failure)) => {
                let _ = tx.send(Err(failure.to_status())).await;
                return;
            }
            // DONE is sent only with the result, so it carries the image ID.
            None if state.progress.phase == Phase::Done => None,
            None => Some(state.progress.to_proto()),
        };
        if let Some(message) = message
            && last_sent.as_ref() != Some(&message)
        {
            if tx.send(Ok(message.clone())).await.is_err() {
                return;
            }
            last_sent = Some(message);
            // Progress waits out the interval; the result does not. A plain sleep here held
            // every pull's last message for up to 100 ms (50 ms on average, on the clock of
            // whoever times the pull, as tests/bench/agent.sh does).
            let ended = rx.wait_for(|state| state.outcome.is_some());
            let dropped = matches!(
                tokio::time::timeout(PROGRESS_EVERY, ended).await,
                Ok(Err(_))
            );
            if dropped {
                return send_no_result(&tx).await;
            }
            continue;
        }
        if rx.changed().await.is_err() {
            return send_no_result(&tx).await;
        }
    }
}

async fn send_no_result(tx: &mpsc::Sender<Result<api::PullProgress, Status>>) {
    let _ = tx
        .send(Err(Status::internal("the pull ended without a result")))
        .await;
}

#[tonic::async_trait]
impl<R: Registry, S: ImageStore> ImageService for ImageServiceImpl<R, S> {
    type PullImageStream = BoxStream<api::PullProgress>;
    type WatchImageListStream = BoxStream<api::ImageListStatusUpdate>;

    async fn pull_image(
        &self,
        request: Request<api::PullImageRequest>,
    ) -> Result<Response<Self::PullImageStream>, Status> {
        let request = request.into_inner();
        let image = parse(&request.image)?;
        let span = tracing::info_span!("PullImage", image = %image);
        let policy = match api::PullPolicy::try_from(request.pull_policy) {
            Ok(api::PullPolicy::Always) => Policy::Always,
            Ok(api::PullPolicy::IfNotPresent | api::PullPolicy::Unspecified) => {
                Policy::IfNotPresent
            }
            Err(_) => return Err(Status::invalid_argument("unknown pull policy")),
        };
        let rx = self
            .manager
            .pull(PullRequest {
                image,
                policy,
                auth: auth_of(request.credentials),
                timeout: seconds(request.timeout_seconds),
            })
            .instrument(span.clone())
            .await;
        let (tx, out) = mpsc::channel(16);
        tokio::spawn(stream_pull(rx, tx).instrument(span));
        Ok(Response::new(Box::pin(ReceiverStream::new(out))))
    }

    async fn list_images(
        &self,
        _request: Request<api::ListImagesRequest>,
    ) -> Result<Response<api::ListImagesResponse>, Status> {
        let images = inventory::list(self.manager.store())
            .await
            .map_err(inventory_status)?;
        Ok(Response::new(api::ListImagesResponse {
            images: images.into_iter().map(to_image).collect(),
        }))
    }

    async fn image_status(
        &self,
        request: Request<api::ImageStatusRequest>,
    ) -> Result<Response<api::ImageStatusResponse>, Status> {
        let image = request.into_inner().image;
        let found = inventory::find(self.manager.store(), &image)
            .instrument(tracing::info_span!("ImageStatus", %image))
            .await
            .map_err(inventory_status)?;
        Ok(Response::new(api::ImageStatusResponse {
            image: found.map(to_image),
        }))
    }

    async fn remove_image(
        &self,
        request: Request<api::RemoveImageRequest>,
    ) -> Result<Response<api::RemoveImageResponse>, Status> {
        let image = request.into_inner().image;
        let span = tracing::info_span!("RemoveImage", %image);
        let store = self.manager.store();
        let Some(found) = inventory::find(store, &image)
            .instrument(span.clone())
            .await
            .map_err(inventory_status)?
        else {
            return Ok(Response::new(api::RemoveImageResponse {}));
        };
        if found.pinned {
            // As kubelet: the sandbox image goes, and every new pod's sandbox waits on a pull.
            return Err(Status::failed_precondition(format!(
                "image {image} is pinned by containerd's CRI (a record of it is labelled {}={}, \
                 as the sandbox image is): kubelet never removes it, and neither does the agent",
                CRI_PINNED_LABEL.0, CRI_PINNED_LABEL.1
            )));
        }
        let last = found.names.len().saturating_sub(1);
        for (i, name) in found.names.iter().enumerate() {
            // Garbage collection runs once, with the last record.
            store
                .delete_image(name, i == last)
                .await
                .map_err(|err| Status::new(err.code, err.to_string()))?;
        }
        span.in_scope(|| tracing::info!(image_id = %found.id, "removed"));
        Ok(Response::new(api::RemoveImageResponse {}))
    }

    async fn apply_image_list(
        &self,
        request: Request<api::ApplyImageListRequest>,
    ) -> Result<Response<api::ApplyImageListResponse>, Status> {
        let request = request.into_inner();
        self.check_node(&request.node_name)?;
        let mut desired = BTreeMap::new();
        for (image, spec) in request.images {
            parse(&image)?;
            desired.insert(
                image,
                DesiredSpec {
                    always_pull: spec.always_pull,
                    pull_interval: seconds(spec.pull_interval_seconds),
                    timeout: seconds(spec.timeout_seconds),
                    backoff_limit: spec.backoff_limit,
                    auth: auth_of(spec.credentials),
                },
            );
        }
        let epoch = Epoch::new(request.list_uid.clone(), request.generation);
        self.list
            .apply(epoch, desired)
            .map_err(|err| Status::failed_precondition(err.to_string()))?;
        tracing::info!(list_uid = %request.list_uid, generation = request.generation, "image list applied");
        Ok(Response::new(api::ApplyImageListResponse {
            generation: request.generation,
        }))
    }

    async fn watch_image_list(
        &self,
        request: Request<api::WatchImageListRequest>,
    ) -> Result<Response<Self::WatchImageListStream>, Status> {
        self.check_node(&request.into_inner().node_name)?;
        let (current, mut updates) = self.list.watch();
        let list = self.list.clone();
        let (tx, out) = mpsc::channel(64);
        tokio::spawn(async move {
            let mut pending: Vec<ImageStatus> = current;
            loop {
                for status in pending.drain(..) {
                    if tx.send(Ok(to_update(status))).await.is_err() {
                        return;
                    }
                }
                match updates.recv().await {
                    Ok(status) => pending.push(status),
                    // Too slow: start again from the full current status.
                    Err(broadcast::error::RecvError::Lagged(_)) => pending = list.statuses(),
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(out))))
    }
}

#[cfg(test)]
#[path = "grpc_tests.rs"]
mod tests;

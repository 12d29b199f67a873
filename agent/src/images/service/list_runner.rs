//! Drives the pure [`ImageList`]: starts the pulls it says are due through the pull
//! manager, feeds their progress and results back, sleeps until the next due time, and
//! broadcasts every status change to `WatchImageList` streams; checks now and then that
//! Succeeded images are still on the node, and pulls the ones deleted out of band.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, SystemTime},
};

use tokio::{
    sync::{Notify, broadcast},
    time::Instant,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::{
    image_list::{
        Applied, DesiredSpec, Epoch, ImageList, ImageStatus, PullResult, StaleGeneration,
    },
    manager::{Policy, PullManager, PullRequest},
};
use crate::images::{registry::Registry, store::ImageStore};
use crate::reference::Reference;

/// Status updates kept for slow watchers before they must re-read everything.
const UPDATE_BUFFER: usize = 1024;
/// Least time between two progress updates of one image.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// How often Succeeded images are checked for being still on the node, by default.
pub const PRESENCE_EVERY: Duration = Duration::from_secs(30);

/// The node's image list, running; cheap to clone.
#[derive(Clone)]
pub struct ImageListController {
    shared: Arc<Shared>,
}

struct Shared {
    list: Mutex<ImageList>,
    updates: broadcast::Sender<ImageStatus>,
    wake: Notify,
}

impl ImageListController {
    /// Starts the driver task, which runs until `shutdown`.
    pub fn spawn<R: Registry, S: ImageStore>(
        manager: PullManager<R, S>,
        shutdown: CancellationToken,
    ) -> Self {
        Self::spawn_with(manager, PRESENCE_EVERY, shutdown)
    }

    /// [`Self::spawn`], checking presence every `presence_every`.
    pub fn spawn_with<R: Registry, S: ImageStore>(
        manager: PullManager<R, S>,
        presence_every: Duration,
        shutdown: CancellationToken,
    ) -> Self {
        let shared = Arc::new(Shared {
            list: Mutex::new(ImageList::default()),
            updates: broadcast::channel(UPDATE_BUFFER).0,
            wake: Notify::new(),
        });
        tokio::spawn(check_presence(
            Arc::clone(&shared),
            manager.clone(),
            presence_every,
            shutdown.clone(),
        ));
        tokio::spawn(drive(Arc::clone(&shared), manager, shutdown));
        Self { shared }
    }

    /// Applies a desired list (see [`ImageList::apply`]).
    pub fn apply(
        &self,
        epoch: Epoch,
        desired: BTreeMap<String, DesiredSpec>,
    ) -> Result<Applied, StaleGeneration> {
        let mut list = lock(&self.shared);
        let applied = list.apply(epoch, desired, Instant::now())?;
        if applied == Applied::Replaced {
            for status in list.statuses() {
                let _ = self.shared.updates.send(status);
            }
            self.shared.wake.notify_one();
        }
        Ok(applied)
    }

    /// The current status of every image and the stream of changes after it.
    pub fn watch(&self) -> (Vec<ImageStatus>, broadcast::Receiver<ImageStatus>) {
        let list = lock(&self.shared);
        (list.statuses(), self.shared.updates.subscribe())
    }

    /// The current status of every image.
    pub fn statuses(&self) -> Vec<ImageStatus> {
        lock(&self.shared).statuses()
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, ImageList> {
    // The list holds no invariant a panicking holder could break half-way.
    shared
        .list
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn publish(shared: &Shared, status: Option<ImageStatus>) {
    if let Some(status) = status {
        let _ = shared.updates.send(status);
    }
}

async fn drive<R: Registry, S: ImageStore>(
    shared: Arc<Shared>,
    manager: PullManager<R, S>,
    shutdown: CancellationToken,
) {
    loop {
        let (due, next) = {
            let mut list = lock(&shared);
            let due = list.due(Instant::now());
            for (image, _) in &due {
                let started = list.start(image);
                publish(&shared, started);
            }
            (due, list.next_due())
        };
        for (image, spec) in due {
            let span = tracing::info_span!("image_list_pull", %image);
            tokio::spawn(
                pull_one(Arc::clone(&shared), manager.clone(), image, spec).instrument(span),
            );
        }
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = shared.wake.notified() => {}
            () = sleep => {}
            () = shutdown.cancelled() => return,
        }
    }
}

/// Every `every` ([`PRESENCE_EVERY`] by default), asks containerd whether each Succeeded image is still
/// there, and has the ones deleted out of band pulled again. Writes nothing while all
/// are present; a containerd that cannot answer is asked again next time.
async fn check_presence<R: Registry, S: ImageStore>(
    shared: Arc<Shared>,
    manager: PullManager<R, S>,
    every: Duration,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = shutdown.cancelled() => return,
        }
        let succeeded = lock(&shared).succeeded();
        let mut revived = false;
        for image in succeeded {
            let Ok(reference) = Reference::parse_normalized(&image) else {
                continue;
            };
            match manager.is_present(&reference).await {
                Ok(true) => {}
                Ok(false) => {
                    if lock(&shared).gone(&image, Instant::now()) {
                        tracing::info!(%image, "image deleted from the node; pulling it again");
                        revived = true;
                    }
                }
                Err(error) => tracing::debug!(%image, %error, "cannot check the image's presence"),
            }
        }
        if revived {
            shared.wake.notify_one();
        }
    }
}

async fn pull_one<R: Registry, S: ImageStore>(
    shared: Arc<Shared>,
    manager: PullManager<R, S>,
    image: String,
    spec: DesiredSpec,
) {
    let result = match Reference::parse_normalized(&image) {
        Err(err) => PullResult::Failed {
            message: format!("invalid image reference: {err}"),
        },
        Ok(reference) => {
            let request = PullRequest {
                image: reference,
                policy: if spec.always_pull {
                    Policy::Always
                } else {
                    Policy::IfNotPresent
                },
                auth: spec.auth,
                timeout: spec.timeout,
            };
            let mut rx = manager.pull(request).await;
            let mut last_report = Instant::now() - PROGRESS_EVERY;
            loop {
                let state = rx.borrow_and_update().clone();
                if let Some(outcome) = state.outcome {
                    let (done, total) = (state.progress.bytes_done(), state.progress.bytes_total());
                    publish(&shared, lock(&shared).progress(&image, done, total));
                    break match outcome {
                        Ok(pulled) => PullResult::Succeeded {
                            image_id: pulled.image_id,
                        },
                        Err(failure) => PullResult::Failed {
                            message: failure.message,
                        },
                    };
                }
                if last_report.elapsed() >= PROGRESS_EVERY {
                    last_report = Instant::now();
                    let (done, total) = (state.progress.bytes_done(), state.progress.bytes_total());
                    publish(&shared, lock(&shared).progress(&image, done, total));
                }
                if rx.changed().await.is_err() {
                    break PullResult::Failed {
                        message: "pull ended without a result".to_owned(),
                    };
                }
            }
        }
    };
    let finished = lock(&shared).finish(&image, result, Instant::now(), SystemTime::now());
    publish(&shared, finished);
    shared.wake.notify_one();
}

#[cfg(test)]
#[path = "list_runner_tests.rs"]
mod tests;

//! The pull manager: at most `--max-concurrent-pulls` pulls at once, never two of the
//! same image (callers of an image already being pulled share that pull and its
//! progress) with the same credential, a stall timeout per pull, and retries with exponential
//! backoff for failures
//! worth retrying. Each pull runs as a task of its own, so a caller going away does not
//! cancel it; shutting down does.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::failure::PullFailure;
use crate::images::{
    pipeline::{PulledImage, pull},
    progress::{Phase, Progress, Report},
    registry::{Auth, Registry},
    store::{
        ImageStore, StoreError,
        inventory::{self, record_name},
    },
};
use crate::reference::Reference;

/// When to pull an image that may be present.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Policy {
    /// Pull only if absent: no registry traffic for a present image.
    #[default]
    IfNotPresent,
    /// Resolve again, and fetch what changed.
    Always,
}

/// One pull as asked for.
#[derive(Debug, Clone)]
pub struct PullRequest {
    pub image: Reference,
    pub policy: Policy,
    pub auth: Auth,
    /// How long the pull may go without progress (no byte written, no step begun) once
    /// it has a slot; `None` for the manager's default. A large image keeps pulling as
    /// long as bytes flow (kruise #1406); the overall limit is the job's deadline.
    pub timeout: Option<Duration>,
}

/// Retries of one pull.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// Wait before attempt `attempt + 1` (attempts count from 1).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// What watchers of a pull see.
#[derive(Debug, Clone, Default)]
pub struct PullState {
    pub progress: Progress,
    /// Attempts started so far.
    pub attempts: u32,
    /// Set once, when the pull has ended.
    pub outcome: Option<Result<PulledImage, PullFailure>>,
}

impl Report for watch::Sender<PullState> {
    fn report(&self, update: &mut dyn FnMut(&mut Progress)) {
        self.send_modify(|state| update(&mut state.progress));
    }
}

/// Runs pulls; cheap to clone.
pub struct PullManager<R, S> {
    inner: Arc<Inner<R, S>>,
}

impl<R, S> Clone for PullManager<R, S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<R, S> {
    registry: R,
    store: S,
    slots: Semaphore,
    in_flight: Mutex<HashMap<String, watch::Receiver<PullState>>>,
    default_timeout: Duration,
    retry: RetryPolicy,
    shutdown: CancellationToken,
    /// Where finished pulls are counted; set once by the server wiring.
    metrics: std::sync::OnceLock<crate::metrics::Metrics>,
}

impl<R: Registry, S: ImageStore> PullManager<R, S> {
    pub fn new(
        registry: R,
        store: S,
        max_concurrent: usize,
        default_timeout: Duration,
        retry: RetryPolicy,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                registry,
                store,
                slots: Semaphore::new(max_concurrent.max(1)),
                in_flight: Mutex::new(HashMap::new()),
                default_timeout,
                retry,
                shutdown,
                metrics: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Counts every finished pull (by result) and its bytes in `metrics`.
    pub fn report_to(&self, metrics: crate::metrics::Metrics) {
        let _ = self.inner.metrics.set(metrics);
    }

    /// The containerd store pulls write into.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// Pulls present right now (for tests and metrics).
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Starts (or joins) the pull of `request.image`; the receiver ends with
    /// `outcome` set.
    pub async fn pull(&self, request: PullRequest) -> watch::Receiver<PullState> {
        if request.policy == Policy::IfNotPresent
            && let Some(pulled) = self.present(&request.image).await
        {
            tracing::debug!(image = %request.image, "present; not pulling");
            let state = PullState {
                progress: Progress {
                    phase: Phase::Done,
                    blobs: Vec::new(),
                },
                attempts: 0,
                outcome: Some(Ok(pulled)),
            };
            return watch::channel(state).1;
        }
        // One pull per image and credential: a caller joins only a pull made with its own
        // credential, so it never gets an image through another caller's access.
        let key = format!("{} {}", request.image, request.auth.fingerprint());
        let Ok(mut in_flight) = self.inner.in_flight.lock() else {
            let failure = PullFailure::internal("pull table poisoned");
            return watch::channel(PullState {
                outcome: Some(Err(failure)),
                ..PullState::default()
            })
            .1;
        };
        if let Some(existing) = in_flight.get(&key)
            && existing.borrow().outcome.is_none()
        {
            tracing::debug!(image = %request.image, "joining the pull in flight");
            return existing.clone();
        }
        let (tx, rx) = watch::channel(PullState::default());
        in_flight.insert(key.clone(), rx.clone());
        drop(in_flight);
        let manager = self.clone();
        let span = tracing::info_span!("pull", image = %request.image);
        tokio::spawn(
            async move {
                let outcome = manager.run(&request, &tx).await;
                if let Err(failure) = &outcome {
                    tracing::warn!(code = ?failure.kind, error = %failure.message, "pull failed");
                }
                if let Some(metrics) = manager.inner.metrics.get() {
                    let result = match &outcome {
                        Ok(_) => "succeeded".to_owned(),
                        Err(failure) => format!("{:?}", failure.kind).to_lowercase(),
                    };
                    metrics.pull_finished(&result, tx.borrow().progress.bytes_done());
                }
                tx.send_modify(|state| state.outcome = Some(outcome));
                if let Ok(mut in_flight) = manager.inner.in_flight.lock()
                    && in_flight
                        .get(&key)
                        .is_some_and(|r| r.same_channel(&rx_of(&tx)))
                {
                    in_flight.remove(&key);
                }
            }
            .instrument(span),
        );
        rx
    }

    /// Whether the image is on the node (its record exists and its content is
    /// readable); an error when containerd cannot say.
    pub async fn is_present(&self, image: &Reference) -> Result<bool, StoreError> {
        let store = &self.inner.store;
        let Some(record) = store.get_image(&record_name(image)).await? else {
            return Ok(false);
        };
        Ok(inventory::describe_record(store, &record).await.is_ok())
    }

    /// The image, if a record for the reference exists and its content is readable.
    async fn present(&self, image: &Reference) -> Option<PulledImage> {
        pull::cached(&self.inner.store, image).await
    }

    async fn run(
        &self,
        request: &PullRequest,
        state: &watch::Sender<PullState>,
    ) -> Result<PulledImage, PullFailure> {
        let inner = &self.inner;
        let _slot = tokio::select! {
            slot = inner.slots.acquire() => slot.map_err(|_| PullFailure::cancelled())?,
            () = inner.shutdown.cancelled() => return Err(PullFailure::cancelled()),
        };
        let timeout = request.timeout.unwrap_or(inner.default_timeout);
        let attempts = async {
            let mut attempt = 0;
            loop {
                attempt += 1;
                state.send_modify(|s| {
                    s.attempts = attempt;
                    s.progress = Progress::default();
                });
                let result = pull::pull(
                    &inner.registry,
                    &inner.store,
                    &request.image,
                    &request.auth,
                    state,
                )
                .await;
                match result {
                    Ok(pulled) => return Ok(pulled),
                    Err(error) if error.is_retryable() && attempt < inner.retry.attempts => {
                        let wait = inner.retry.backoff(attempt);
                        tracing::info!(attempt, %error, wait_ms = wait.as_millis(), "retrying pull");
                        tokio::time::sleep(wait).await;
                    }
                    Err(error) => return Err(PullFailure::from_error(&error, attempt)),
                }
            }
        };
        tokio::select! {
            result = attempts => result,
            () = stalled(state.subscribe(), timeout) => {
                Err(PullFailure::stalled(timeout, state.borrow().attempts))
            }
            () = inner.shutdown.cancelled() => Err(PullFailure::cancelled()),
        }
    }
}

/// What counts as progress: a new attempt, a new step, or more bytes written.
fn progress_mark(state: &PullState) -> (u32, Phase, u64) {
    (
        state.attempts,
        state.progress.phase,
        state.progress.bytes_done(),
    )
}

/// Ends once the pull watched by `watcher` made no progress for `limit`.
async fn stalled(mut watcher: watch::Receiver<PullState>, limit: Duration) {
    let mut last = progress_mark(&watcher.borrow_and_update());
    let mut deadline = tokio::time::Instant::now() + limit;
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => return,
            changed = watcher.changed() => {
                if changed.is_err() {
                    // The pull ended and dropped its sender: nothing to watch.
                    return std::future::pending().await;
                }
                let mark = progress_mark(&watcher.borrow_and_update());
                if mark != last {
                    last = mark;
                    deadline = tokio::time::Instant::now() + limit;
                }
            }
        }
    }
}

fn rx_of(tx: &watch::Sender<PullState>) -> watch::Receiver<PullState> {
    tx.subscribe()
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;

//! Runs one reconciler over its work queue: a bounded number of workers, per-key backoff on
//! failure, a tracing span and metrics per reconcile, and leadership as a hard gate — a
//! replica that is not leading hands out no work, and one that loses the Lease cancels the
//! reconciles in flight at their next await point instead of finishing them.

use std::fmt::Display;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::queue::WorkQueue;
use crate::runtime::metrics::Metrics;

/// What a successful reconcile asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing until the next event.
    Done,
    /// Look again after this long even without an event (a grace period, minReadySeconds,
    /// a deadline).
    RequeueAfter(Duration),
}

impl Outcome {
    /// The earlier of two requeues.
    pub fn min(self, other: Self) -> Self {
        match (self, other) {
            (Self::Done, o) | (o, Self::Done) => o,
            (Self::RequeueAfter(a), Self::RequeueAfter(b)) => Self::RequeueAfter(a.min(b)),
        }
    }
}

/// One workload kind's reconcile function.
pub trait Reconciler: Send + Sync + 'static {
    type Key: Clone + Eq + Hash + Display + Send + Sync + 'static;
    type Error: std::error::Error + Send + Sync + 'static;

    /// The kind, for metrics, spans and logs.
    const KIND: &'static str;

    /// The kinds of the shared caches the reconcile reads (what `caches_synced` asks
    /// about); the wiring refuses to start a reconciler that names a kind no store caches.
    const READS: &'static [&'static str] = &[];

    /// Makes the object named by `key` right, once.
    fn reconcile(
        &self,
        key: &Self::Key,
    ) -> impl Future<Output = Result<Outcome, Self::Error>> + Send;

    /// Every key that exists now; queued when leadership is gained and on each resync.
    fn all_keys(&self) -> Vec<Self::Key>;

    /// Whether the caches the reconcile reads have finished their first list. Until they
    /// have, keys wait: planning from a half-listed cache would create pods that exist,
    /// or complete a job because no node is known yet.
    fn caches_synced(&self) -> bool {
        true
    }
}

/// How soon a key is looked at again while the caches are still listing.
const UNSYNCED_RETRY: Duration = Duration::from_secs(1);

/// How a controller runs.
#[derive(Clone, Copy, Debug)]
pub struct RunnerConfig {
    pub workers: usize,
    /// Every key is queued again this often, a safety net for a missed event.
    pub resync: Duration,
}

/// Runs `reconciler` until `shutdown`.
pub async fn run<R: Reconciler>(
    reconciler: Arc<R>,
    queue: WorkQueue<R::Key>,
    config: RunnerConfig,
    leadership: watch::Receiver<bool>,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    queue.show_depth_in(metrics.workqueue_depth(R::KIND));
    let mut workers = JoinSet::new();
    for _ in 0..config.workers.max(1) {
        workers.spawn(worker(
            reconciler.clone(),
            queue.clone(),
            leadership.clone(),
            metrics.clone(),
            shutdown.clone(),
        ));
    }
    workers.spawn(resync(
        reconciler,
        queue.clone(),
        config.resync,
        leadership,
        shutdown.clone(),
    ));
    shutdown.cancelled().await;
    queue.shut_down();
    while workers.join_next().await.is_some() {}
}

/// Queues every key whenever this replica becomes leader, and every `period` while it is.
async fn resync<R: Reconciler>(
    reconciler: Arc<R>,
    queue: WorkQueue<R::Key>,
    period: Duration,
    mut leadership: watch::Receiver<bool>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            leading = leadership.wait_for(|leading| *leading) => if leading.is_err() { return },
        }
        for key in reconciler.all_keys() {
            queue.add(key);
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(period) => {}
            lost = leadership.wait_for(|leading| !*leading) => if lost.is_err() { return },
        }
    }
}

async fn worker<R: Reconciler>(
    reconciler: Arc<R>,
    queue: WorkQueue<R::Key>,
    mut leadership: watch::Receiver<bool>,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            leading = leadership.wait_for(|leading| *leading) => if leading.is_err() { return },
        }
        let Some((key, waited)) = queue.next_waited().await else {
            return;
        };
        metrics.observe_queue_wait(R::KIND, waited);
        if !*leadership.borrow() {
            // Lost the Lease while waiting: a new leader will resync this key.
            queue.done(&key);
            continue;
        }
        if !reconciler.caches_synced() {
            queue.add_after(key.clone(), UNSYNCED_RETRY);
            queue.done(&key);
            continue;
        }
        let span = tracing::info_span!("reconcile", kind = R::KIND, key = %key);
        let timer = metrics.reconcile(R::KIND);
        let result = tokio::select! {
            result = reconciler.reconcile(&key).instrument(span.clone()) => Some(result),
            _ = leadership.wait_for(|leading| !*leading) => None,
            () = shutdown.cancelled() => None,
        };
        match result {
            None => {
                span.in_scope(|| {
                    tracing::warn!("reconcile abandoned: leadership lost or shutting down");
                });
                timer.finish(false);
            }
            Some(Ok(outcome)) => {
                timer.finish(true);
                queue.forget(&key);
                if let Outcome::RequeueAfter(delay) = outcome {
                    queue.add_after(key.clone(), delay);
                }
            }
            Some(Err(err)) => {
                timer.finish(false);
                let delay = queue.retry_with_backoff(&key);
                span.in_scope(|| {
                    tracing::warn!(error = %err, retry_in = ?delay, "reconcile failed");
                });
            }
        }
        queue.done(&key);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::controller::queue::Backoff;

    /// Counts reconciles per key and fails the first `fail_first` of each.
    struct Counting {
        keys: Vec<&'static str>,
        calls: Mutex<Vec<&'static str>>,
        in_flight: AtomicUsize,
        max_in_flight: AtomicUsize,
        fail_first: usize,
        hang: bool,
        synced: std::sync::atomic::AtomicBool,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("boom")]
    struct Boom;

    impl Reconciler for Counting {
        type Key = &'static str;
        type Error = Boom;
        const KIND: &'static str = "Test";

        async fn reconcile(&self, key: &&'static str) -> Result<Outcome, Boom> {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_in_flight.fetch_max(now, Ordering::SeqCst);
            let n = {
                let mut calls = self.calls.lock().expect("lock");
                calls.push(*key);
                calls.iter().filter(|k| *k == key).count()
            };
            tokio::time::sleep(Duration::from_millis(10)).await;
            if self.hang {
                std::future::pending::<()>().await;
            }
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            if n <= self.fail_first {
                Err(Boom)
            } else {
                Ok(Outcome::Done)
            }
        }

        fn all_keys(&self) -> Vec<&'static str> {
            self.keys.clone()
        }

        fn caches_synced(&self) -> bool {
            self.synced.load(Ordering::SeqCst)
        }
    }

    fn counting(keys: Vec<&'static str>, fail_first: usize, hang: bool) -> Arc<Counting> {
        Arc::new(Counting {
            keys,
            calls: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            fail_first,
            hang,
            synced: std::sync::atomic::AtomicBool::new(true),
        })
    }

    fn start(
        r: Arc<Counting>,
        workers: usize,
        leading: bool,
    ) -> (
        watch::Sender<bool>,
        CancellationToken,
        tokio::task::JoinHandle<()>,
    ) {
        let (tx, rx) = watch::channel(leading);
        let stop = CancellationToken::new();
        let task = tokio::spawn(run(
            r,
            WorkQueue::new(Backoff::default()),
            RunnerConfig {
                workers,
                resync: Duration::from_secs(3600),
            },
            rx,
            Metrics::new(),
            stop.clone(),
        ));
        (tx, stop, task)
    }

    #[tokio::test(start_paused = true)]
    async fn reconciles_every_key_with_bounded_workers_and_retries_failures() {
        let r = counting(vec!["a", "b", "c", "d", "e"], 2, false);
        let (_tx, stop, task) = start(r.clone(), 2, true);
        tokio::time::sleep(Duration::from_secs(10)).await;
        let calls = r.calls.lock().expect("lock").clone();
        for key in ["a", "b", "c", "d", "e"] {
            assert_eq!(
                calls.iter().filter(|k| **k == key).count(),
                3,
                "two failures then a success for {key}: {calls:?}"
            );
        }
        assert_eq!(r.max_in_flight.load(Ordering::SeqCst), 2);
        stop.cancel();
        task.await.expect("joins");
    }

    #[tokio::test(start_paused = true)]
    async fn keys_wait_until_the_caches_have_synced() {
        let r = counting(vec!["a"], 0, false);
        r.synced.store(false, Ordering::SeqCst);
        let (_tx, stop, task) = start(r.clone(), 1, true);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(
            r.calls.lock().expect("lock").is_empty(),
            "reconciled before sync"
        );
        r.synced.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(*r.calls.lock().expect("lock"), vec!["a"]);
        stop.cancel();
        task.await.expect("joins");
    }

    #[tokio::test(start_paused = true)]
    async fn a_standby_does_nothing_and_a_lost_lease_cancels_work() {
        let r = counting(vec!["a"], 0, true);
        let (tx, stop, task) = start(r.clone(), 1, false);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(r.calls.lock().expect("lock").is_empty(), "standby acted");
        tx.send(true).expect("send");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(r.in_flight.load(Ordering::SeqCst), 1, "reconcile hangs");
        tx.send(false).expect("send");
        stop.cancel();
        // The hung reconcile was dropped: the runner ends.
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("runner ends although the reconcile never returns")
            .expect("joins");
    }
}

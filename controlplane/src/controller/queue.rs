//! A work queue of object keys with client-go's guarantees, so a reconciler can be written
//! as "make this one object right" and never worry about ordering:
//!
//! * a key is queued at most once, however many events name it;
//! * a key is never handed to two workers at once — an event for a key being reconciled
//!   marks it dirty, and it is queued again when that reconcile finishes;
//! * delayed adds keep the earliest deadline;
//! * failures back off per key, exponentially, and a success forgets the failures.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Per-key exponential backoff: `base · 2^failures`, capped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(200),
            max: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The delay before the retry that follows `failures` consecutive failures (1 = first).
    pub fn delay(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(30);
        self.base
            .checked_mul(1u32 << exponent)
            .map_or(self.max, |d| d.min(self.max))
    }
}

struct State<K> {
    /// Keys to hand out, each with when it became ready (for the wait metric).
    ready: VecDeque<(K, Instant)>,
    queued: HashSet<K>,
    processing: HashSet<K>,
    dirty: HashSet<K>,
    /// Earliest pending deadline per key; a timer task fires each.
    scheduled: HashMap<K, Instant>,
    failures: HashMap<K, u32>,
    closed: bool,
    /// Set to the number of ready keys on every change, when someone watches it.
    depth: Option<Gauge>,
}

impl<K> State<K> {
    fn show_depth(&self) {
        if let Some(gauge) = &self.depth {
            gauge.set(i64::try_from(self.ready.len()).unwrap_or(i64::MAX));
        }
    }
}

/// A cheap-to-clone handle to one queue.
pub struct WorkQueue<K> {
    state: Arc<Mutex<State<K>>>,
    notify: Arc<Notify>,
    backoff: Backoff,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            notify: self.notify.clone(),
            backoff: self.backoff,
        }
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    pub fn new(backoff: Backoff) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                ready: VecDeque::new(),
                queued: HashSet::new(),
                processing: HashSet::new(),
                dirty: HashSet::new(),
                scheduled: HashMap::new(),
                failures: HashMap::new(),
                closed: false,
                depth: None,
            })),
            notify: Arc::new(Notify::new()),
            backoff,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // A panic while holding the lock leaves plain collections behind; keep going.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `key` now.
    pub fn add(&self, key: K) {
        let mut state = self.lock();
        if state.closed {
            return;
        }
        if state.processing.contains(&key) {
            state.dirty.insert(key);
            return;
        }
        if state.queued.insert(key.clone()) {
            state.ready.push_back((key, Instant::now()));
            state.show_depth();
            drop(state);
            self.notify.notify_one();
        }
    }

    /// Queues `key` after `delay`, unless it is already due earlier.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let deadline = Instant::now() + delay;
        {
            let mut state = self.lock();
            if state.closed {
                return;
            }
            match state.scheduled.get(&key) {
                Some(existing) if *existing <= deadline => return,
                _ => {
                    state.scheduled.insert(key.clone(), deadline);
                }
            }
        }
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(deadline).await;
            let due = {
                let mut state = queue.lock();
                if state.scheduled.get(&key) == Some(&deadline) {
                    state.scheduled.remove(&key);
                    true
                } else {
                    false
                }
            };
            if due {
                queue.add(key);
            }
        });
    }

    /// Keeps `gauge` at the number of keys waiting (client-go's `workqueue_depth`).
    pub fn show_depth_in(&self, gauge: Gauge) {
        let mut state = self.lock();
        state.depth = Some(gauge);
        state.show_depth();
    }

    /// Takes the next key to reconcile; `None` once the queue is shut down.
    pub async fn next(&self) -> Option<K> {
        self.next_waited().await.map(|(key, _)| key)
    }

    /// The next key and how long it waited since it became ready (client-go's
    /// `workqueue_queue_duration_seconds`); `None` once the queue is shut down.
    pub async fn next_waited(&self) -> Option<(K, Duration)> {
        loop {
            let notified = self.notify.notified();
            {
                let mut state = self.lock();
                if state.closed {
                    return None;
                }
                if let Some((key, ready_at)) = state.ready.pop_front() {
                    state.show_depth();
                    state.queued.remove(&key);
                    state.processing.insert(key.clone());
                    // Other keys may be ready for other workers.
                    if !state.ready.is_empty() {
                        self.notify.notify_one();
                    }
                    return Some((key, ready_at.elapsed()));
                }
            }
            notified.await;
        }
    }

    /// Ends the processing of `key`; re-queues it if an event arrived meanwhile.
    pub fn done(&self, key: &K) {
        let requeue = {
            let mut state = self.lock();
            state.processing.remove(key);
            state.dirty.remove(key)
        };
        if requeue {
            self.add(key.clone());
        }
    }

    /// Records a failure of `key` and retries it after its backoff; returns the delay.
    pub fn retry_with_backoff(&self, key: &K) -> Duration {
        let failures = {
            let mut state = self.lock();
            let failures = state.failures.entry(key.clone()).or_insert(0);
            *failures = failures.saturating_add(1);
            *failures
        };
        let delay = self.backoff.delay(failures);
        self.add_after(key.clone(), delay);
        delay
    }

    /// Forgets the failures of `key` after a success.
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// Keys waiting right now (not counting delayed ones); for metrics and tests.
    pub fn len(&self) -> usize {
        self.lock().ready.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops handing out keys; workers waiting in `next` get `None`.
    pub fn shut_down(&self) {
        self.lock().closed = true;
        self.notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> WorkQueue<&'static str> {
        WorkQueue::new(Backoff::default())
    }

    #[tokio::test]
    async fn a_key_is_queued_once() {
        let q = queue();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        assert_eq!(q.next().await, Some("a"));
        assert_eq!(q.next().await, Some("b"));
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_depth_gauge_follows_the_ready_keys_and_a_key_says_how_long_it_waited() {
        let q = queue();
        q.add("a");
        let depth = Gauge::default();
        q.show_depth_in(depth.clone());
        assert_eq!(depth.get(), 1, "a key queued before the gauge was given");
        q.add("b");
        q.add("b");
        assert_eq!(depth.get(), 2);
        tokio::time::advance(Duration::from_millis(250)).await;
        let (key, waited) = q.next_waited().await.expect("key");
        assert_eq!((key, waited), ("a", Duration::from_millis(250)));
        assert_eq!(depth.get(), 1);
        q.add("a"); // being processed: marked dirty, not ready
        assert_eq!(depth.get(), 1);
        q.next().await.expect("b");
        assert_eq!(depth.get(), 0);
        q.done(&"a");
        assert_eq!(depth.get(), 1, "the dirty key is ready again");
    }

    #[tokio::test]
    async fn an_event_during_processing_requeues_after_done() {
        let q = queue();
        q.add("a");
        let key = q.next().await.expect("key");
        q.add("a");
        assert!(q.is_empty(), "never handed out twice at once");
        q.done(&key);
        assert_eq!(q.len(), 1);
        assert_eq!(q.next().await, Some("a"));
        q.done(&"a");
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_adds_keep_the_earliest_deadline() {
        let q = queue();
        q.add_after("a", Duration::from_secs(10));
        q.add_after("a", Duration::from_secs(2));
        q.add_after("a", Duration::from_secs(30));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(q.is_empty());
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(q.len(), 1);
        assert_eq!(q.next().await, Some("a"));
        q.done(&"a");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(q.is_empty(), "later deadlines were dropped");
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let b = Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        let table = [
            (1, 100),
            (2, 200),
            (3, 400),
            (4, 800),
            (5, 1000),
            (64, 1000),
        ];
        for (failures, millis) in table {
            assert_eq!(
                b.delay(failures),
                Duration::from_millis(millis),
                "{failures}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_and_success_forgets() {
        let q = queue();
        assert_eq!(q.retry_with_backoff(&"a"), Duration::from_millis(200));
        assert_eq!(q.retry_with_backoff(&"a"), Duration::from_millis(400));
        q.forget(&"a");
        assert_eq!(q.retry_with_backoff(&"a"), Duration::from_millis(200));
    }

    #[tokio::test]
    async fn shut_down_releases_waiting_workers() {
        let q = queue();
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.next().await }
        });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiter.await.expect("joins"), None);
    }
}

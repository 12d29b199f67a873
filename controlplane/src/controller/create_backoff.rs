//! Backoff for failing pod creation, per workload. The work queue's own backoff is not
//! enough: every status write, pod event or resync queues the workload again at once, and
//! each sync would try the create again (a CloneSet whose template the apiserver refuses
//! posted `FailedCreate` 6 times in 8 s). While a workload waits here its sync skips the
//! creates, keeps the last failure's message in its condition, and comes back when the
//! wait is over. A success, or a new generation of the workload (the user changed
//! something, perhaps the fix), starts over without waiting.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::queue::Backoff;

/// The first wait after a failed create; doubled per failure up to [`CREATE_BACKOFF_MAX`].
pub const CREATE_BACKOFF_BASE: Duration = Duration::from_secs(1);
/// The longest wait between create attempts.
pub const CREATE_BACKOFF_MAX: Duration = Duration::from_secs(300);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Failing {
    failures: u32,
    retry_at: Instant,
    generation: i64,
    message: String,
}

/// The wait a workload is in: how long is left, and the failure that caused it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    pub remaining: Duration,
    pub message: String,
}

/// Create backoff state of every workload of one kind.
pub struct CreateBackoff<K> {
    policy: Backoff,
    failing: Mutex<HashMap<K, Failing>>,
}

impl<K: Clone + Eq + Hash> Default for CreateBackoff<K> {
    fn default() -> Self {
        Self::new(Backoff {
            base: CREATE_BACKOFF_BASE,
            max: CREATE_BACKOFF_MAX,
        })
    }
}

impl<K: Clone + Eq + Hash> CreateBackoff<K> {
    pub fn new(policy: Backoff) -> Self {
        Self {
            policy,
            failing: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, Failing>> {
        self.failing.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether creates of `key` at `generation` must wait at `now`.
    pub fn waiting(&self, key: &K, generation: i64, now: Instant) -> Option<Waiting> {
        let failing = self.lock();
        let entry = failing.get(key)?;
        (entry.generation == generation && entry.retry_at > now).then(|| Waiting {
            remaining: entry.retry_at - now,
            message: entry.message.clone(),
        })
    }

    /// Records a failed create at `now`; returns how long to wait before the next one.
    pub fn failed(&self, key: &K, generation: i64, message: String, now: Instant) -> Duration {
        let mut failing = self.lock();
        let failures = match failing.get(key) {
            Some(entry) if entry.generation == generation => entry.failures.saturating_add(1),
            _ => 1,
        };
        let delay = self.policy.delay(failures);
        failing.insert(
            key.clone(),
            Failing {
                failures,
                retry_at: now + delay,
                generation,
                message,
            },
        );
        delay
    }

    /// Creates of `key` succeeded: the next failure waits the base delay again.
    pub fn succeeded(&self, key: &K) {
        self.lock().remove(key);
    }

    /// `key` is gone.
    pub fn forget(&self, key: &K) {
        self.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn doubles_from_one_second_to_five_minutes() {
        let backoff = CreateBackoff::<&str>::default();
        let t0 = Instant::now();
        let delays: Vec<Duration> = (0..12)
            .map(|i| backoff.failed(&"web", 1, format!("failure {i}"), t0))
            .collect();
        let want: Vec<Duration> = [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
            .into_iter()
            .map(secs)
            .collect();
        assert_eq!(delays, want);
    }

    #[test]
    fn creates_wait_with_the_last_message_until_the_delay_is_over() {
        let backoff = CreateBackoff::<&str>::default();
        let t0 = Instant::now();
        assert_eq!(backoff.waiting(&"web", 1, t0), None, "nothing failed yet");
        backoff.failed(&"web", 1, "first".into(), t0);
        let delay = backoff.failed(&"web", 1, "quota exceeded".into(), t0);
        assert_eq!(delay, secs(2));
        assert_eq!(
            backoff.waiting(&"web", 1, t0 + secs(1)),
            Some(Waiting {
                remaining: secs(1),
                message: "quota exceeded".into()
            }),
            "an event during the wait does not retry the create"
        );
        assert_eq!(backoff.waiting(&"web", 1, t0 + secs(2)), None, "due");
        assert_eq!(backoff.waiting(&"db", 1, t0), None, "per workload");
    }

    #[test]
    fn success_and_a_new_generation_start_over() {
        let backoff = CreateBackoff::<&str>::default();
        let t0 = Instant::now();
        for _ in 0..5 {
            backoff.failed(&"web", 1, "refused".into(), t0);
        }
        assert!(backoff.waiting(&"web", 2, t0).is_none(), "the spec changed");
        assert_eq!(
            backoff.failed(&"web", 2, "refused".into(), t0),
            secs(1),
            "a new generation counts from the first failure"
        );
        backoff.succeeded(&"web");
        assert!(backoff.waiting(&"web", 2, t0).is_none());
        assert_eq!(backoff.failed(&"web", 2, "refused".into(), t0), secs(1));
    }
}

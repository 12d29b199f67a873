//! `/readyz` with its checks cached for a few seconds: a probe (or anyone who can reach
//! the health port) asking often costs containerd and the apiserver one call per TTL,
//! not one per request. Concurrent requests wait for the one check in flight.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::containers::Containerd;

/// How long a readiness result is reused.
pub const READINESS_TTL: Duration = Duration::from_secs(3);

/// How long one readiness check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// The result of one round of checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    /// One line per check; only whether it passed (details go to the log, since the
    /// health port is reachable from the network).
    pub report: String,
}

/// The checks behind `/readyz`, behind a trait so the cache can be tested with a double.
pub trait ReadinessChecks: Send + Sync + 'static {
    fn run(&self) -> impl Future<Output = Readiness> + Send;
}

/// Runs the checks at most once per `ttl`.
pub struct CachedReadiness<C> {
    checks: C,
    ttl: Duration,
    last: Mutex<Option<(Instant, Arc<Readiness>)>>,
}

impl<C: ReadinessChecks> CachedReadiness<C> {
    pub fn new(checks: C, ttl: Duration) -> Self {
        Self {
            checks,
            ttl,
            last: Mutex::new(None),
        }
    }

    /// The last result if it is younger than the TTL, else a fresh one.
    pub async fn get(&self) -> Arc<Readiness> {
        // Held across the check: requests that arrive meanwhile get its result.
        let mut last = self.last.lock().await;
        if let Some((at, result)) = last.as_ref()
            && at.elapsed() < self.ttl
        {
            return Arc::clone(result);
        }
        let result = Arc::new(self.checks.run().await);
        *last = Some((Instant::now(), Arc::clone(&result)));
        result
    }
}

/// containerd answers and the Kubernetes API answers.
#[derive(Clone)]
pub struct LiveChecks {
    pub containerd: Containerd,
    pub kube: kube::Client,
}

async fn timed<T, E: std::fmt::Display>(
    call: impl Future<Output = Result<T, E>>,
) -> Result<(), String> {
    match tokio::time::timeout(CHECK_TIMEOUT, call).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err("timed out".to_owned()),
    }
}

impl ReadinessChecks for LiveChecks {
    async fn run(&self) -> Readiness {
        let (containerd, kube) = tokio::join!(
            timed(self.containerd.version()),
            timed(self.kube.apiserver_version())
        );
        let mut report = String::new();
        for (name, result) in [("containerd", &containerd), ("kubernetes-api", &kube)] {
            match result {
                Ok(()) => report.push_str(&format!("[+] {name} ok\n")),
                Err(err) => {
                    tracing::warn!(check = name, error = %err, "not ready");
                    report.push_str(&format!("[-] {name} failed\n"));
                }
            }
        }
        Readiness {
            ready: containerd.is_ok() && kube.is_ok(),
            report,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts its runs; ready on odd ones.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl ReadinessChecks for Arc<Counting> {
        async fn run(&self) -> Readiness {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            // A check that takes a while, so concurrent requests overlap it.
            tokio::time::sleep(Duration::from_millis(100)).await;
            Readiness {
                ready: n % 2 == 1,
                report: format!("run {n}\n"),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn requests_within_the_ttl_share_one_check() {
        let counter = Arc::new(Counting::default());
        let cache = Arc::new(CachedReadiness::new(Arc::clone(&counter), READINESS_TTL));

        // 20 requests at once and 20 more spread over the TTL: one check.
        let burst: Vec<_> = (0..20)
            .map(|_| {
                let cache = Arc::clone(&cache);
                tokio::spawn(async move { cache.get().await })
            })
            .collect();
        for request in burst {
            assert_eq!(request.await.expect("joined").report, "run 1\n");
        }
        for _ in 0..20 {
            tokio::time::advance(Duration::from_millis(100)).await;
            assert!(cache.get().await.ready);
        }
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);

        // Past the TTL the next request checks again, and sees the new answer.
        tokio::time::advance(READINESS_TTL).await;
        let fresh = cache.get().await;
        assert_eq!(counter.0.load(Ordering::SeqCst), 2);
        assert!(!fresh.ready);
        assert_eq!(fresh.report, "run 2\n");
    }
}

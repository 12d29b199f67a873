//! The control plane's Prometheus metrics: reconciles per workload kind and whether this
//! replica leads. Reconcilers (still to come) record through `ReconcileTimer`.

use std::sync::Arc;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `kind` label, e.g. `CloneSet`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

type HistogramFamily = Family<KindLabel, Histogram, fn() -> Histogram>;

fn reconcile_histogram() -> Histogram {
    // 1 ms to ~16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// Handles to every metric; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconciles_total: Family<KindLabel, Counter>,
    reconcile_errors_total: Family<KindLabel, Counter>,
    reconcile_duration_seconds: HistogramFamily,
    leader: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("stevedore_controlplane");
        let reconciles_total = Family::<KindLabel, Counter>::default();
        registry.register(
            "reconciles",
            "Reconciles run, by workload kind",
            reconciles_total.clone(),
        );
        let reconcile_errors_total = Family::<KindLabel, Counter>::default();
        registry.register(
            "reconcile_errors",
            "Reconciles that ended in an error, by workload kind",
            reconcile_errors_total.clone(),
        );
        let reconcile_duration_seconds = HistogramFamily::new_with_constructor(reconcile_histogram);
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconcile, by workload kind",
            reconcile_duration_seconds.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease, else 0",
            leader.clone(),
        );
        Self {
            registry: Arc::new(registry),
            reconciles_total,
            reconcile_errors_total,
            reconcile_duration_seconds,
            leader,
        }
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Starts timing one reconcile of `kind`; call `finish` with its outcome.
    pub fn reconcile(&self, kind: &str) -> ReconcileTimer {
        ReconcileTimer {
            metrics: self.clone(),
            label: KindLabel {
                kind: kind.to_owned(),
            },
            started: Instant::now(),
        }
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// One reconcile being timed.
pub struct ReconcileTimer {
    metrics: Metrics,
    label: KindLabel,
    started: Instant,
}

impl ReconcileTimer {
    /// Counts the reconcile, its error if it failed, and its duration.
    pub fn finish(self, succeeded: bool) {
        let m = &self.metrics;
        m.reconciles_total.get_or_create(&self.label).inc();
        if !succeeded {
            m.reconcile_errors_total.get_or_create(&self.label).inc();
        }
        m.reconcile_duration_seconds
            .get_or_create(&self.label)
            .observe(self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_reconciles_errors_duration_and_leader() {
        let metrics = Metrics::new();
        metrics.reconcile("CloneSet").finish(true);
        metrics.reconcile("CloneSet").finish(false);
        metrics.set_leader(true);
        let text = metrics.encode().expect("encodes");
        for line in [
            "stevedore_controlplane_reconciles_total{kind=\"CloneSet\"} 2",
            "stevedore_controlplane_reconcile_errors_total{kind=\"CloneSet\"} 1",
            "stevedore_controlplane_reconcile_duration_seconds_count{kind=\"CloneSet\"} 2",
            "stevedore_controlplane_leader 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in:\n{text}"
            );
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn leader_gauge_drops_to_zero() {
        let metrics = Metrics::new();
        metrics.set_leader(true);
        metrics.set_leader(false);
        let text = metrics.encode().expect("encodes");
        assert!(
            text.lines().any(|l| l == "stevedore_controlplane_leader 0"),
            "{text}"
        );
    }
}

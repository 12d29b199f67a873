//! The control plane's Prometheus metrics: reconciles per workload kind, whether this
//! replica leads, the calls it makes to node agents, and the objects its caches cannot
//! decode. Reconcilers (still to come)
//! record through `ReconcileTimer`; the agent pool through `observe_agent_rpc`.

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

/// Labels of one agent RPC attempt: the gRPC method (e.g. `SetPodCondition`) and the
/// status code name as tonic spells it (`Ok`, `Unavailable`), as the agent's own
/// metrics do.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AgentRpcLabels {
    pub method: String,
    pub code: String,
}

/// The `method` label of an agent RPC.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabel {
    pub method: String,
}

type MethodHistogramFamily = Family<MethodLabel, Histogram, fn() -> Histogram>;

fn reconcile_histogram() -> Histogram {
    // 1 ms to ~16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

fn queue_wait_histogram() -> Histogram {
    // 1 ms to ~33 s: a key waiting longer than that is a controller falling behind.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

fn agent_rpc_histogram() -> Histogram {
    // 1 ms to ~16 s: past the longest per-call deadline worth configuring.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// Handles to every metric; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconciles_total: Family<KindLabel, Counter>,
    reconcile_errors_total: Family<KindLabel, Counter>,
    reconcile_duration_seconds: HistogramFamily,
    workqueue_depth: Family<KindLabel, Gauge>,
    workqueue_wait_seconds: HistogramFamily,
    leader: Gauge,
    agent_rpcs_total: Family<AgentRpcLabels, Counter>,
    agent_rpc_duration_seconds: MethodHistogramFamily,
    cache_undecodable_reports_total: Family<KindLabel, Counter>,
    cache_undecodable_objects: Family<KindLabel, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let unregistered = Self {
            registry: Arc::default(),
            reconciles_total: Family::default(),
            reconcile_errors_total: Family::default(),
            reconcile_duration_seconds: HistogramFamily::new_with_constructor(reconcile_histogram),
            workqueue_depth: Family::default(),
            workqueue_wait_seconds: HistogramFamily::new_with_constructor(queue_wait_histogram),
            leader: Gauge::default(),
            agent_rpcs_total: Family::default(),
            agent_rpc_duration_seconds: MethodHistogramFamily::new_with_constructor(
                agent_rpc_histogram,
            ),
            cache_undecodable_reports_total: Family::default(),
            cache_undecodable_objects: Family::default(),
        };
        let mut registry = Registry::with_prefix("stevedore_controlplane");
        unregistered.register_in(&mut registry);
        Self {
            registry: Arc::new(registry),
            ..unregistered
        }
    }

    /// Registers each metric under its name and help; the registry keeps a clone, which
    /// shares the values with the field.
    fn register_in(&self, registry: &mut Registry) {
        registry.register(
            "reconciles",
            "Reconciles run, by workload kind",
            self.reconciles_total.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that ended in an error, by workload kind",
            self.reconcile_errors_total.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconcile, by workload kind",
            self.reconcile_duration_seconds.clone(),
        );
        // The two work-queue figures kube-controller-manager's controllers export
        // (`workqueue_depth`, `workqueue_queue_duration_seconds`): how far behind a kind is.
        registry.register(
            "workqueue_depth",
            "Objects waiting for a worker, by workload kind",
            self.workqueue_depth.clone(),
        );
        registry.register(
            "workqueue_wait_seconds",
            "Time an object waited in the work queue before a worker took it, by workload kind",
            self.workqueue_wait_seconds.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease, else 0",
            self.leader.clone(),
        );
        // Under the control plane's prefix, not `stevedore_agent_`: the agent already
        // exports `stevedore_agent_rpc_duration_seconds` for the server side of the same
        // calls, and the two must stay apart in queries.
        registry.register(
            "agent_rpcs",
            "Calls to node agents (each retry counted), by method and gRPC status code",
            self.agent_rpcs_total.clone(),
        );
        registry.register(
            "agent_rpc_duration_seconds",
            "Time from sending a call to a node agent until its answer or deadline, by method",
            self.agent_rpc_duration_seconds.clone(),
        );
        // Per kind, apart from the reconciles: an object the cache skips never reaches a
        // reconcile to fail in.
        registry.register(
            "cache_undecodable_reports",
            "Objects the cache skipped because they do not decode, counted once per object \
             and resourceVersion, by kind",
            self.cache_undecodable_reports_total.clone(),
        );
        registry.register(
            "cache_undecodable_objects",
            "Objects whose latest version the cache could not decode, by kind",
            self.cache_undecodable_objects.clone(),
        );
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

    /// The gauge a work queue of `kind` keeps at its depth.
    pub fn workqueue_depth(&self, kind: &str) -> Gauge {
        self.workqueue_depth
            .get_or_create(&KindLabel {
                kind: kind.to_owned(),
            })
            .clone()
    }

    /// Records how long a key of `kind` waited for a worker.
    pub fn observe_queue_wait(&self, kind: &str, waited: std::time::Duration) {
        self.workqueue_wait_seconds
            .get_or_create(&KindLabel {
                kind: kind.to_owned(),
            })
            .observe(waited.as_secs_f64());
    }

    /// Records one attempt of an agent call: its outcome and how long it took.
    pub fn observe_agent_rpc(&self, method: &str, code: tonic::Code, seconds: f64) {
        self.agent_rpcs_total
            .get_or_create(&AgentRpcLabels {
                method: method.to_owned(),
                code: format!("{code:?}"),
            })
            .inc();
        self.agent_rpc_duration_seconds
            .get_or_create(&MethodLabel {
                method: method.to_owned(),
            })
            .observe(seconds);
    }

    /// Counts one object of `kind` the cache skipped at a version not counted before, and
    /// sets how many of the kind do not decode now.
    pub fn observe_undecodable(&self, kind: &str, reported: bool, undecodable: usize) {
        let label = KindLabel {
            kind: kind.to_owned(),
        };
        if reported {
            self.cache_undecodable_reports_total
                .get_or_create(&label)
                .inc();
        }
        self.cache_undecodable_objects
            .get_or_create(&label)
            .set(i64::try_from(undecodable).unwrap_or(i64::MAX));
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
        metrics.workqueue_depth("CloneSet").set(3);
        metrics.observe_queue_wait("CloneSet", std::time::Duration::from_millis(5));
        let text = metrics.encode().expect("encodes");
        for line in [
            "stevedore_controlplane_workqueue_depth{kind=\"CloneSet\"} 3",
            "stevedore_controlplane_workqueue_wait_seconds_count{kind=\"CloneSet\"} 1",
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
    fn encodes_agent_rpcs_by_method_and_code() {
        let metrics = Metrics::new();
        metrics.observe_agent_rpc("SetPodCondition", tonic::Code::Unavailable, 0.002);
        metrics.observe_agent_rpc("SetPodCondition", tonic::Code::Ok, 0.004);
        metrics.observe_agent_rpc("SetPodCondition", tonic::Code::Ok, 0.003);
        let text = metrics.encode().expect("encodes");
        for line in [
            "stevedore_controlplane_agent_rpcs_total{method=\"SetPodCondition\",code=\"Ok\"} 2",
            "stevedore_controlplane_agent_rpcs_total{method=\"SetPodCondition\",code=\"Unavailable\"} 1",
            "stevedore_controlplane_agent_rpc_duration_seconds_count{method=\"SetPodCondition\"} 3",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in:\n{text}"
            );
        }
    }

    #[test]
    fn encodes_undecodable_objects_by_kind() {
        let metrics = Metrics::new();
        metrics.observe_undecodable("CloneSet", true, 1);
        metrics.observe_undecodable("CloneSet", true, 2);
        metrics.observe_undecodable("CloneSet", false, 1);
        let text = metrics.encode().expect("encodes");
        for line in [
            "stevedore_controlplane_cache_undecodable_reports_total{kind=\"CloneSet\"} 2",
            "stevedore_controlplane_cache_undecodable_objects{kind=\"CloneSet\"} 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in:\n{text}"
            );
        }
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

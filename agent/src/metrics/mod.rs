//! The agent's Prometheus metrics, shared by every module that counts something. A module
//! of its own, below everything that counts (images, containers, the RPC layer) and the
//! admin endpoint that serves them, so none of those depends on another for its counters.

mod rpc_layer;

pub use rpc_layer::RpcMetricsLayer;

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of the RPC latency histogram.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    /// Full gRPC method, e.g. `/stevedore.agent.v1.PodService/SetPodCondition`.
    pub method: String,
    /// gRPC status code name, e.g. `OK`, `PermissionDenied`.
    pub code: String,
}

/// The `result` label of outcome counters.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

type HistogramFamily = Family<RpcLabels, Histogram, fn() -> Histogram>;

fn rpc_histogram() -> Histogram {
    // 1 ms to ~16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// Handles to every metric; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    rpc_duration_seconds: HistogramFamily,
    restarts_total: Family<ResultLabel, Counter>,
    /// Image pulls by result (`succeeded`, `failed`, ...); counted by the image module.
    pub images_pulled_total: Family<ResultLabel, Counter>,
    /// Bytes of image blobs written to the content store.
    pub image_bytes_pulled_total: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("stevedore_agent");
        let rpc_duration_seconds = HistogramFamily::new_with_constructor(rpc_histogram);
        registry.register(
            "rpc_duration_seconds",
            "Latency of gRPC calls until response headers, by method and status code",
            rpc_duration_seconds.clone(),
        );
        let restarts_total = Family::<ResultLabel, Counter>::default();
        registry.register(
            "container_restarts",
            "In-place container restarts finished, by result",
            restarts_total.clone(),
        );
        let images_pulled_total = Family::<ResultLabel, Counter>::default();
        registry.register(
            "images_pulled",
            "Image pulls finished, by result",
            images_pulled_total.clone(),
        );
        let image_bytes_pulled_total = Counter::default();
        registry.register(
            "image_bytes_pulled",
            "Bytes of image content downloaded",
            image_bytes_pulled_total.clone(),
        );
        Self {
            registry: Arc::new(registry),
            rpc_duration_seconds,
            restarts_total,
            images_pulled_total,
            image_bytes_pulled_total,
        }
    }

    pub fn observe_rpc(&self, method: &str, code: tonic::Code, seconds: f64) {
        self.rpc_duration_seconds
            .get_or_create(&RpcLabels {
                method: method.to_owned(),
                code: format!("{code:?}"),
            })
            .observe(seconds);
    }

    /// A pull ended with `result` after `bytes` of its blobs were in the content store.
    pub fn pull_finished(&self, result: &str, bytes: u64) {
        self.images_pulled_total
            .get_or_create(&ResultLabel {
                result: result.to_owned(),
            })
            .inc();
        self.image_bytes_pulled_total.inc_by(bytes);
    }

    pub fn restart_finished(&self, result: &str) {
        self.restarts_total
            .get_or_create(&ResultLabel {
                result: result.to_owned(),
            })
            .inc();
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_has_every_family() {
        let metrics = Metrics::new();
        metrics.observe_rpc("/p.S/M", tonic::Code::PermissionDenied, 0.01);
        metrics.restart_finished("succeeded");
        metrics
            .images_pulled_total
            .get_or_create(&ResultLabel {
                result: "failed".into(),
            })
            .inc();
        metrics.image_bytes_pulled_total.inc_by(42);
        let text = metrics.encode().expect("encodes");
        for expected in [
            "stevedore_agent_rpc_duration_seconds_count{method=\"/p.S/M\",code=\"PermissionDenied\"} 1",
            "stevedore_agent_container_restarts_total{result=\"succeeded\"} 1",
            "stevedore_agent_images_pulled_total{result=\"failed\"} 1",
            "stevedore_agent_image_bytes_pulled_total 42",
        ] {
            assert!(text.contains(expected), "{expected} missing from\n{text}");
        }
    }
}

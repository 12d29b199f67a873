//! Operations endpoints, on two listeners: the health listener (`/healthz`: the process
//! serves; `/readyz`: containerd and the Kubernetes API answer, cached briefly) which the
//! kubelet's probes reach, so it listens on every address and says only whether things
//! work; and the metrics listener (`/metrics`, Prometheus text), on localhost by default
//! since the metrics describe the node's workloads (images, pods, callers). Given one
//! address for both, one listener serves all three.

mod readiness;

use std::sync::Arc;

use axum::{
    Router, extract::State, http::StatusCode, http::header, response::IntoResponse, routing::get,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use readiness::{CachedReadiness, LiveChecks, READINESS_TTL, Readiness, ReadinessChecks};

use crate::metrics::Metrics;

/// `/healthz` and `/readyz`.
pub fn health_router<C: ReadinessChecks>(readiness: Arc<CachedReadiness<C>>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz::<C>))
        .with_state(readiness)
}

/// `/metrics`.
pub fn metrics_router(metrics: Metrics) -> Router {
    Router::new()
        .route("/metrics", get(self::metrics))
        .with_state(metrics)
}

/// Where the admin routes listen: two listeners, or one serving both.
pub enum AdminListeners {
    Split {
        health: TcpListener,
        metrics: TcpListener,
    },
    Shared(TcpListener),
}

/// Serves the admin routes until `shutdown` is cancelled.
pub async fn serve<C: ReadinessChecks>(
    listeners: AdminListeners,
    readiness: Arc<CachedReadiness<C>>,
    metrics: Metrics,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let health = health_router(readiness);
    let metrics = metrics_router(metrics);
    let serve = |listener: TcpListener, router: Router| {
        axum::serve(listener, router).with_graceful_shutdown(shutdown.clone().cancelled_owned())
    };
    match listeners {
        AdminListeners::Shared(listener) => serve(listener, health.merge(metrics)).await,
        AdminListeners::Split {
            health: health_listener,
            metrics: metrics_listener,
        } => {
            let (a, b) = tokio::join!(
                serve(health_listener, health),
                serve(metrics_listener, metrics)
            );
            a.and(b)
        }
    }
}

async fn readyz<C: ReadinessChecks>(
    State(readiness): State<Arc<CachedReadiness<C>>>,
) -> impl IntoResponse {
    let result = readiness.get().await;
    let code = if result.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, result.report.clone())
}

async fn metrics(State(metrics): State<Metrics>) -> impl IntoResponse {
    match metrics.encode() {
        Ok(text) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    use super::*;

    struct AlwaysReady;

    impl ReadinessChecks for AlwaysReady {
        async fn run(&self) -> Readiness {
            Readiness {
                ready: true,
                report: "[+] ok\n".into(),
            }
        }
    }

    async fn status(router: Router, path: &str) -> StatusCode {
        let request = Request::get(path).body(Body::empty()).expect("request");
        router.oneshot(request).await.expect("served").status()
    }

    /// The health listener, which the network reaches, serves no metrics; the metrics
    /// listener serves nothing else.
    #[tokio::test]
    async fn the_health_listener_serves_no_metrics() {
        let readiness = Arc::new(CachedReadiness::new(AlwaysReady, READINESS_TTL));
        let health = health_router(readiness);
        assert_eq!(status(health.clone(), "/healthz").await, StatusCode::OK);
        assert_eq!(status(health.clone(), "/readyz").await, StatusCode::OK);
        assert_eq!(status(health, "/metrics").await, StatusCode::NOT_FOUND);

        let metrics = metrics_router(Metrics::new());
        assert_eq!(status(metrics.clone(), "/metrics").await, StatusCode::OK);
        assert_eq!(status(metrics, "/readyz").await, StatusCode::NOT_FOUND);
    }
}

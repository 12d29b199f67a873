//! Operations endpoints, on two listeners. The health listener serves `/healthz` (the
//! process serves) and `/readyz` (every shared cache has synced — a replica that cannot
//! see the cluster must not be sent traffic or counted as ready during a rollout); kubelet
//! probes reach it, so it listens on the pod's address and says only whether things work.
//! The metrics listener serves `/metrics` (OpenMetrics text), on localhost by default:
//! the metrics name namespaces, workloads and nodes (`kubectl port-forward` reaches it).
//! `/readyz` reads in-memory sync flags, so it needs no cache.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;
use super::stores::SyncState;

/// `/healthz` and `/readyz`.
pub fn health_router(sync: SyncState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(sync)
}

/// `/metrics`.
pub fn metrics_router(metrics: Metrics) -> Router {
    Router::new()
        .route("/metrics", get(self::metrics))
        .with_state(metrics)
}

/// Serves `router` on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

async fn readyz(State(sync): State<SyncState>) -> impl IntoResponse {
    let report = sync.report();
    let body: String = report
        .iter()
        .map(|(kind, synced)| {
            if *synced {
                format!("[+] {kind} cache synced\n")
            } else {
                format!("[-] {kind} cache not synced\n")
            }
        })
        .collect();
    let code = if report.iter().all(|(_, synced)| *synced) {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, body)
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

    async fn status(router: Router, path: &str) -> StatusCode {
        let request = Request::get(path).body(Body::empty()).expect("request");
        router.oneshot(request).await.expect("served").status()
    }

    /// The health listener, which the network reaches, serves no metrics; the metrics
    /// listener serves nothing else.
    #[tokio::test]
    async fn the_health_listener_serves_no_metrics() {
        let health = health_router(SyncState::default());
        assert_eq!(status(health.clone(), "/healthz").await, StatusCode::OK);
        assert_eq!(status(health, "/metrics").await, StatusCode::NOT_FOUND);
        let metrics = metrics_router(Metrics::new());
        assert_eq!(status(metrics.clone(), "/metrics").await, StatusCode::OK);
        assert_eq!(status(metrics, "/healthz").await, StatusCode::NOT_FOUND);
    }
}

//! Operations endpoint on its own HTTP port: `/healthz` (the process serves), `/readyz`
//! (every shared cache has synced — a replica that cannot see the cluster must not be
//! sent traffic or counted as ready during a rollout), `/metrics` (OpenMetrics text).

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::metrics::Metrics;
use super::stores::SyncState;

/// What the admin endpoint looks at.
#[derive(Clone)]
pub struct AdminState {
    pub metrics: Metrics,
    pub sync: SyncState,
}

/// The admin routes.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// Serves the admin routes until `shutdown` is cancelled.
pub async fn serve(
    listener: TcpListener,
    state: AdminState,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

async fn readyz(State(state): State<AdminState>) -> impl IntoResponse {
    let report = state.sync.report();
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

async fn metrics(State(state): State<AdminState>) -> impl IntoResponse {
    match state.metrics.encode() {
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

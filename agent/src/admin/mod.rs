//! Operations endpoint on its own HTTP port: `/healthz` (the process serves),
//! `/readyz` (containerd and the Kubernetes API answer), `/metrics` (Prometheus text).

mod metrics;
mod rpc_metrics;

use std::time::Duration;

use axum::{
    Router, extract::State, http::StatusCode, http::header, response::IntoResponse, routing::get,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use metrics::{Metrics, ResultLabel, RpcLabels};
pub use rpc_metrics::RpcMetricsLayer;

use crate::containers::Containerd;

/// How long one readiness check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// What the admin endpoint looks at.
#[derive(Clone)]
pub struct AdminState {
    pub metrics: Metrics,
    pub containerd: Containerd,
    pub kube: kube::Client,
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
    let containerd = match tokio::time::timeout(CHECK_TIMEOUT, state.containerd.version()).await {
        Ok(Ok(version)) => Ok(version),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err("timed out".to_owned()),
    };
    let kube = match tokio::time::timeout(CHECK_TIMEOUT, state.kube.apiserver_version()).await {
        Ok(Ok(info)) => Ok(info.git_version),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err("timed out".to_owned()),
    };
    let line = |name: &str, result: &Result<String, String>| match result {
        Ok(version) => format!("[+] {name} ok ({version})\n"),
        Err(err) => format!("[-] {name} failed: {err}\n"),
    };
    let body = line("containerd", &containerd) + &line("kubernetes-api", &kube);
    let code = if containerd.is_ok() && kube.is_ok() {
        StatusCode::OK
    } else {
        tracing::warn!(report = %body, "not ready");
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

//! A tower layer timing every gRPC call into [`Metrics`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use tower::{Layer, Service};
use tracing::Instrument as _;

use super::Metrics;
use crate::auth::known_method;

/// Records `rpc_duration_seconds` for every call of the wrapped server.
#[derive(Clone)]
pub struct RpcMetricsLayer {
    metrics: Metrics,
}

impl RpcMetricsLayer {
    pub fn new(metrics: Metrics) -> Self {
        Self { metrics }
    }
}

impl<S> Layer<S> for RpcMetricsLayer {
    type Service = RpcMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RpcMetrics {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Clone)]
pub struct RpcMetrics<S> {
    inner: S,
    metrics: Metrics,
}

/// The status code of a response whose headers are in: errors are sent
/// "trailers-only", with `grpc-status` in the headers; a response without it has
/// started to stream and is counted as OK.
fn code_of<B>(response: &http::Response<B>) -> tonic::Code {
    response
        .headers()
        .get("grpc-status")
        .map(|v| tonic::Code::from_bytes(v.as_bytes()))
        .unwrap_or(tonic::Code::Ok)
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for RpcMetrics<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>> + Send,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        // Unknown paths share one label so a caller cannot grow the label set.
        let method = known_method(request.uri().path())
            .unwrap_or("other")
            .to_owned();
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let span = tracing::info_span!("rpc", method = %method);
        let future = self.inner.call(request);
        Box::pin(
            async move {
                let result = future.await;
                if let Ok(response) = &result {
                    metrics.observe_rpc(
                        &method,
                        code_of(response),
                        started.elapsed().as_secs_f64(),
                    );
                }
                result
            }
            .instrument(span),
        )
    }
}

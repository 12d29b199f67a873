//! The [`Gate`] as a tower layer around one gRPC service.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::server::NamedService;
use tower::{Layer, Service};

use super::{Gate, Reviewer};

/// Wraps services so every call passes the gate first.
pub struct AuthLayer<R> {
    gate: Arc<Gate<R>>,
}

impl<R> Clone for AuthLayer<R> {
    fn clone(&self) -> Self {
        Self {
            gate: Arc::clone(&self.gate),
        }
    }
}

impl<R> AuthLayer<R> {
    pub fn new(gate: Gate<R>) -> Self {
        Self {
            gate: Arc::new(gate),
        }
    }
}

impl<S, R> Layer<S> for AuthLayer<R> {
    type Service = Authenticated<S, R>;

    fn layer(&self, inner: S) -> Self::Service {
        Authenticated {
            inner,
            gate: Arc::clone(&self.gate),
        }
    }
}

/// A service whose calls are authenticated and authorized.
pub struct Authenticated<S, R> {
    inner: S,
    gate: Arc<Gate<R>>,
}

impl<S: Clone, R> Clone for Authenticated<S, R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            gate: Arc::clone(&self.gate),
        }
    }
}

impl<S: NamedService, R> NamedService for Authenticated<S, R> {
    const NAME: &'static str = S::NAME;
}

impl<S, R, ReqBody, ResBody> Service<http::Request<ReqBody>> for Authenticated<S, R>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    R: Reviewer,
    ReqBody: Send + 'static,
    ResBody: Default,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        // The clone is not ready; the service polled ready is the one that is used.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let gate = Arc::clone(&self.gate);
        Box::pin(async move {
            let authorization = request
                .headers()
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            match gate
                .check(request.uri().path(), authorization.as_deref())
                .await
            {
                Ok(()) => inner.call(request).await,
                Err(status) => Ok(status.into_http()),
            }
        })
    }
}

//! A scripted apiserver for the unit tests of the steps that write (claim, history, the
//! kube `PodWrites`): it answers each request with the next scripted response and
//! records what was sent, so a test checks verbs, paths and bodies (controller-rs's
//! mock API server).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::client::Body;
use serde_json::{Value, json};

/// One request as the apiserver saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    pub method: String,
    /// Path and query.
    pub uri: String,
    pub content_type: String,
    pub body: Value,
}

#[derive(Default)]
struct Script {
    responses: VecDeque<(u16, Value)>,
    sent: Vec<Sent>,
}

/// The script and the record; `client()` talks to it.
#[derive(Clone, Default)]
pub struct ScriptedApi {
    inner: Arc<Mutex<Script>>,
}

impl ScriptedApi {
    /// Answers the requests in order with `responses` (status code, body).
    pub fn new(responses: Vec<(u16, Value)>) -> Self {
        let api = Self::default();
        api.inner.lock().expect("lock").responses = responses.into();
        api
    }

    pub fn client(&self) -> kube::Client {
        let api = self.clone();
        let service = tower::service_fn(move |request| {
            let api = api.clone();
            async move { Ok::<_, std::convert::Infallible>(api.answer(request).await) }
        });
        kube::Client::new(service, "default")
    }

    pub fn sent(&self) -> Vec<Sent> {
        self.inner.lock().expect("lock").sent.clone()
    }

    async fn answer(&self, request: Request<Body>) -> Response<Body> {
        let method = request.method().to_string();
        let uri = request.uri().to_string();
        let content_type = (request.headers().get(http::header::CONTENT_TYPE))
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let bytes = http_body_util::BodyExt::collect(request.into_body())
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let mut script = self.inner.lock().expect("lock");
        script.sent.push(Sent {
            method,
            uri,
            content_type,
            body,
        });
        let (code, body) = script
            .responses
            .pop_front()
            .unwrap_or_else(|| (500, failure(500, "the script has no more answers")));
        let mut response = Response::new(Body::from(body.to_string().into_bytes()));
        *response.status_mut() = http::StatusCode::from_u16(code).expect("a status code");
        response
    }
}

/// A `Status` failure body, as the apiserver sends it.
pub fn failure(code: u16, message: &str) -> Value {
    json!({ "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "Scripted", "message": message, "code": code })
}

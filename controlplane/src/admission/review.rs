//! `admission.k8s.io/v1` `AdmissionReview`, read and answered: only the fields the
//! control plane's webhooks read, and the three answers they give (allow, refuse with a
//! status, allow with a JSON patch). Every webhook route decodes its body with
//! [`read_request`] and writes its answer with [`answer`], so a malformed review is
//! refused the same way on every path.

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use serde_json::{Value, json};

/// The review as the apiserver sends it.
#[derive(Clone, Debug, Deserialize)]
pub struct AdmissionReview {
    pub request: Option<AdmissionRequest>,
}

/// The request inside a review.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    pub uid: String,
    #[serde(default)]
    pub resource: Resource,
    #[serde(default)]
    pub sub_resource: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub user_info: UserInfo,
    /// The object as it is to be written (CREATE, UPDATE; the Eviction of an eviction).
    #[serde(default)]
    pub object: Option<Value>,
    /// The object as stored before (UPDATE, DELETE).
    #[serde(default)]
    pub old_object: Option<Value>,
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// The group, version and resource the request is about.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Resource {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub resource: String,
}

/// Who asked.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
}

/// A refusal as the apiserver reports it to the writer: the HTTP code and reason of the
/// `Status` it returns, and the sentence it quotes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    /// 400: the object is wrong as written.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            code: 400,
            reason: "BadRequest",
            message: message.into(),
        }
    }

    /// 403: the change is not allowed (an immutable field).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self {
            code: 403,
            reason: "Forbidden",
            message: message.into(),
        }
    }

    /// 429: not now; the writer tries again (a held disruption).
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self {
            code: 429,
            reason: "TooManyRequests",
            message: message.into(),
        }
    }

    /// 500: the webhook could not decide (the apiserver could not be read).
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            code: 500,
            reason: "InternalError",
            message: message.into(),
        }
    }
}

/// What a webhook answers one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    Allow,
    Refuse(Refusal),
    /// Allowed once these JSON patch (RFC 6902) operations are applied.
    Patch(Vec<Value>),
}

/// The `AdmissionReview` response to request `uid`.
pub fn respond(uid: &str, decision: &Decision) -> Value {
    let response = match decision {
        Decision::Allow => json!({ "uid": uid, "allowed": true }),
        Decision::Refuse(refusal) => json!({
            "uid": uid,
            "allowed": false,
            "status": {
                "status": "Failure",
                "code": refusal.code,
                "reason": refusal.reason,
                "message": refusal.message,
            },
        }),
        Decision::Patch(operations) if operations.is_empty() => {
            json!({ "uid": uid, "allowed": true })
        }
        Decision::Patch(operations) => {
            let patch = Value::Array(operations.clone()).to_string();
            json!({
                "uid": uid,
                "allowed": true,
                "patchType": "JSONPatch",
                "patch": base64::engine::general_purpose::STANDARD.encode(patch),
            })
        }
    };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    })
}

/// The request of a review body, or the 400 a body that is none gets.
#[allow(clippy::result_large_err)] // the error is the finished HTTP answer
pub fn read_request(body: &Bytes) -> Result<AdmissionRequest, Response> {
    let review: AdmissionReview = serde_json::from_slice(body).map_err(|err| {
        let message = format!("The request is not an AdmissionReview: {err}.");
        (StatusCode::BAD_REQUEST, message).into_response()
    })?;
    review.request.ok_or_else(|| {
        let message = "The AdmissionReview has no request.";
        (StatusCode::BAD_REQUEST, message).into_response()
    })
}

/// The HTTP answer carrying `decision` for `request`.
pub fn answer(request: &AdmissionRequest, decision: &Decision) -> Response {
    let body = respond(&request.uid, decision).to_string();
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The pod a CREATE of a pod (not a subresource) carries, typed and as sent; `None` for
/// any other request, or a pod that does not decode (the apiserver refuses it anyway).
pub fn created_pod(request: &AdmissionRequest) -> Option<(Pod, &Value)> {
    let is_pod = request.resource.group.is_empty() && request.resource.resource == "pods";
    let sub = request.sub_resource.as_deref().unwrap_or_default();
    if !is_pod || !sub.is_empty() || request.operation != "CREATE" {
        return None;
    }
    let raw = request.object.as_ref()?;
    let pod = serde_json::from_value(raw.clone()).ok()?;
    Some((pod, raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_request(operation: &str, resource: &str, sub: Option<&str>) -> AdmissionRequest {
        serde_json::from_value(json!({
            "uid": "u", "namespace": "shop", "operation": operation,
            "resource": { "group": "", "resource": resource },
            "subResource": sub,
            "object": { "metadata": { "name": "web-1" }, "spec": { "containers": [] } },
        }))
        .expect("a request")
    }

    #[test]
    fn only_pod_creates_carry_a_created_pod() {
        let cases = [
            (pod_request("CREATE", "pods", None), true),
            (pod_request("UPDATE", "pods", None), false),
            (pod_request("CREATE", "pods", Some("binding")), false),
            (pod_request("CREATE", "configmaps", None), false),
        ];
        for (request, created) in cases {
            assert_eq!(created_pod(&request).is_some(), created, "{request:?}");
        }
    }

    #[test]
    fn each_decision_is_answered_as_the_apiserver_reads_it() {
        let patch = vec![json!({ "op": "add", "path": "/metadata/labels", "value": {} })];
        let encoded = base64::engine::general_purpose::STANDARD
            .encode(Value::Array(patch.clone()).to_string());
        let cases = [
            (Decision::Allow, json!({ "uid": "u", "allowed": true })),
            (
                Decision::Refuse(Refusal::forbidden("spec.podName is immutable.")),
                json!({ "uid": "u", "allowed": false, "status": {
                    "status": "Failure", "code": 403, "reason": "Forbidden",
                    "message": "spec.podName is immutable.",
                } }),
            ),
            (
                Decision::Patch(vec![]),
                json!({ "uid": "u", "allowed": true }),
            ),
            (
                Decision::Patch(patch),
                json!({ "uid": "u", "allowed": true, "patchType": "JSONPatch", "patch": encoded }),
            ),
        ];
        for (decision, response) in cases {
            let review = respond("u", &decision);
            assert_eq!(review["kind"], "AdmissionReview", "{decision:?}");
            assert_eq!(review["response"], response, "{decision:?}");
        }
    }

    #[test]
    fn a_body_that_is_no_review_is_a_bad_request() {
        let cases = ["{", r#"{"apiVersion":"admission.k8s.io/v1"}"#];
        for body in cases {
            let refused = read_request(&Bytes::from(body)).expect_err(body);
            assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "{body}");
        }
        let request = read_request(&Bytes::from(r#"{"request":{"uid":"u"}}"#)).expect("a request");
        assert_eq!(request.uid, "u");
    }
}

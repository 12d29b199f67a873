//! The answer every pod-create webhook shares (SidecarSet injection, launch priority):
//! the `AdmissionReview` read, every request but the CREATE of a pod allowed before its
//! webhook decides anything, a refusal logged, the decision answered. A webhook brings
//! only its decision about the created pod.

use axum::body::Bytes;
use axum::response::Response;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::review::{AdmissionRequest, Decision, answer, created_pod, read_request};

/// The answer to one review sent to a pod-create webhook: `decide` reads the request, the
/// pod typed and the pod as sent; a refusal is logged with `refused_because` (why this
/// webhook refuses pods). A body that is no review gets a 400; any other request than a
/// pod CREATE (or a pod that does not decode, which the apiserver refuses anyway) is
/// allowed as it is.
pub async fn answer_pod_create(
    body: &Bytes,
    refused_because: &str,
    decide: impl AsyncFnOnce(&AdmissionRequest, Pod, &Value) -> Decision,
) -> Response {
    let request = match read_request(body) {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    let decision = match created_pod(&request) {
        Some((pod, raw)) => decide(&request, pod, raw).await,
        None => Decision::Allow,
    };
    if let Decision::Refuse(refusal) = &decision {
        tracing::info!(
            namespace = request.namespace.as_deref().unwrap_or(""),
            pod = %request.name,
            message = %refusal.message,
            "refused a pod: {refused_because}"
        );
    }
    answer(&request, &decision)
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::json;

    use super::*;
    use crate::admission::review::Refusal;

    fn review(operation: &str, resource: &str) -> Bytes {
        let body = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "name": "web", "namespace": "shop", "operation": operation,
                "resource": { "group": "", "resource": resource },
                "object": { "metadata": { "name": "web" }, "spec": { "containers": [] } },
            },
        });
        Bytes::from(body.to_string())
    }

    /// The status and, for a review answered, its `response`.
    async fn answered(body: &Bytes, decision: Decision) -> (StatusCode, Value) {
        let response = answer_pod_create(body, "a test refuses it", async |_, pod, raw| {
            assert_eq!(pod.metadata.name.as_deref(), Some("web"));
            assert_eq!(raw["metadata"]["name"], "web");
            decision
        })
        .await;
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("a body");
        let review: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        (status, review["response"].clone())
    }

    #[tokio::test]
    async fn only_a_pod_create_is_decided_by_its_webhook() {
        let refuse = || Decision::Refuse(Refusal::bad_request("No."));
        let allowed = json!({ "uid": "u", "allowed": true });
        let cases = [
            (
                "not a review",
                Bytes::from("{"),
                StatusCode::BAD_REQUEST,
                Value::Null,
            ),
            (
                "a pod update",
                review("UPDATE", "pods"),
                StatusCode::OK,
                allowed.clone(),
            ),
            (
                "a ConfigMap create",
                review("CREATE", "configmaps"),
                StatusCode::OK,
                allowed,
            ),
        ];
        for (case, body, status, response) in cases {
            assert_eq!(
                answered(&body, refuse()).await,
                (status, response),
                "{case}"
            );
        }
        let (status, response) = answered(&review("CREATE", "pods"), refuse()).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(response["allowed"], false, "{response}");
        assert_eq!(response["status"]["message"], "No.", "{response}");
    }
}

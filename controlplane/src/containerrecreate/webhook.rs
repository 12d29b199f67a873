//! The ContainerRecreateRequest mutating webhook's route, on the shared webhook server
//! (`crate::admission`): a create is filled from the pod it names (`admission::default_crr`),
//! an update checked for immutable fields (`admission::validate_crr_update`).
//!
//! The pod is read from the apiserver, not the caches: a request is often created right
//! after its writer saw the pod start, when a cache may not have the container's ID yet;
//! requests are rare, so one read each costs little.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::Value;

use super::admission::{default_crr, schema_refuses, validate_crr_update};
use crate::admission::review::{AdmissionRequest, Decision, Refusal, answer, read_request};
use crate::api::ContainerRecreateRequest;
use crate::controller::api_error::api_error;

/// The path the MutatingWebhookConfiguration sends ContainerRecreateRequest reviews to.
pub const MUTATE_PATH: &str = "/mutate-containerrecreaterequest";

/// The route answering ContainerRecreateRequest creates and updates.
pub fn routes(client: kube::Client) -> Router {
    Router::new().route(MUTATE_PATH, post(review).with_state(client))
}

async fn review(State(client): State<kube::Client>, body: Bytes) -> Response {
    let request = match read_request(&body) {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    let decision = match decide(&client, &request).await {
        Ok(patch) => Decision::Patch(patch),
        Err(refusal) => {
            tracing::info!(
                namespace = request.namespace.as_deref().unwrap_or(""),
                name = %request.name,
                operation = %request.operation,
                message = %refusal.message,
                "refused a ContainerRecreateRequest"
            );
            Decision::Refuse(refusal)
        }
    };
    answer(&request, &decision)
}

/// The patch for `request` (empty for an update, which is only checked), or its refusal.
async fn decide(client: &kube::Client, request: &AdmissionRequest) -> Result<Vec<Value>, Refusal> {
    let Some(new) = decoded(request.object.as_ref()) else {
        // What does not decode the CRD's schema refuses, naming the field.
        return Ok(Vec::new());
    };
    match request.operation.as_str() {
        // A pod name that is no DNS subdomain (`../other/web-0`) must not reach a
        // request path: the schema refuses it after this webhook, naming the field.
        "CREATE" if schema_refuses(&new) => Ok(Vec::new()),
        "CREATE" => {
            let namespace = request.namespace.as_deref().unwrap_or_default();
            let pod = read_pod(client, namespace, &new.spec.pod_name).await?;
            default_crr(&new, pod.as_ref())
        }
        "UPDATE" => match decoded(request.old_object.as_ref()) {
            Some(old) => validate_crr_update(&old, &new).map(|()| Vec::new()),
            None => Ok(Vec::new()),
        },
        _ => Ok(Vec::new()),
    }
}

fn decoded(object: Option<&Value>) -> Option<ContainerRecreateRequest> {
    serde_json::from_value(object?.clone()).ok()
}

/// The pod `name` as the apiserver has it; a failed read refuses the request (500), so
/// its writer tries again.
async fn read_pod(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Pod>, Refusal> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    (api.get_opt(name).await)
        .map_err(api_error(format!("reading pod {name}")))
        .map_err(|err| Refusal::internal(format!("The pod could not be read: {err}.")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::workload::scripted_api::ScriptedApi;

    fn review(operation: &str, object: Value, old: Option<Value>) -> AdmissionRequest {
        serde_json::from_value(json!({
            "uid": "u-1",
            "namespace": "shop",
            "operation": operation,
            "object": object,
            "oldObject": old,
        }))
        .expect("request")
    }

    fn crr(pod: &str) -> Value {
        json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ContainerRecreateRequest",
            "metadata": { "name": "r", "namespace": "shop" },
            "spec": { "podName": pod, "containers": [{ "name": "web" }] },
        })
    }

    #[tokio::test]
    async fn a_create_reads_the_pod_it_names_and_an_update_reads_nothing() {
        let not_found = json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "pods \"absent\" not found", "reason": "NotFound", "code": 404,
        });
        let api = ScriptedApi::new(vec![(404, not_found)]);
        let refused = decide(&api.client(), &review("CREATE", crr("absent"), None))
            .await
            .expect_err("refused");
        assert_eq!(refused.code, 400);
        assert!(
            refused
                .message
                .starts_with("spec.podName: there is no pod absent"),
            "{refused:?}"
        );
        let sent = api.sent();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!(sent[0].uri, "/api/v1/namespaces/shop/pods/absent");

        let api = ScriptedApi::new(vec![]);
        let mut changed = crr("other");
        changed["metadata"]["labels"] = json!({});
        let refused = decide(
            &api.client(),
            &review("UPDATE", changed, Some(crr("absent"))),
        )
        .await
        .expect_err("refused");
        assert_eq!(
            refused.message,
            "spec.podName is immutable: create a new ContainerRecreateRequest instead."
        );
        assert!(api.sent().is_empty());
    }

    #[tokio::test]
    async fn a_pod_name_that_is_no_dns_name_is_left_to_the_schema_unread() {
        for name in ["../other/web-0", "web/0", "Web-0", ""] {
            let api = ScriptedApi::new(vec![]);
            let patch = decide(&api.client(), &review("CREATE", crr(name), None)).await;
            assert_eq!(patch.ok(), Some(Vec::new()), "{name}");
            assert!(api.sent().is_empty(), "{name}: {:?}", api.sent());
        }
    }
}

//! The SidecarSet pod webhook's route, on the shared webhook server (`crate::admission`):
//! a pod create is matched against the cached SidecarSets (`matching`) and answered with
//! the injection patch (`inject`), or refused when two SidecarSets would inject the same
//! container name.
//!
//! Pod creates are the busiest admission path in a cluster, so the common answers cost no
//! call: with no SidecarSet cached (or none matching) the pod is allowed as it is; the
//! namespace is read from the apiserver only when a SidecarSet that otherwise matches
//! chooses namespaces by label.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::Api;
use serde_json::Value;

use super::inject::injection_patch;
use super::matching::{PodScope, matches, needs_namespace_labels};
use super::revisions::{of_set, version_to_inject};
use crate::admission::pod_create::answer_pod_create;
use crate::admission::review::{AdmissionRequest, Decision, Refusal};
use crate::api::SidecarSet;
use crate::caches::Stores;

/// The path the MutatingWebhookConfiguration sends pod creates to.
pub const MUTATE_PATH: &str = "/mutate-pod-sidecarset";

/// The route injecting SidecarSets into pod creates; their revisions are in `namespace`
/// (the control plane's).
pub fn routes(client: kube::Client, stores: Stores, namespace: String) -> Router {
    let handler = Arc::new(Handler {
        client,
        stores,
        namespace,
    });
    Router::new().route(MUTATE_PATH, post(review).with_state(handler))
}

struct Handler {
    client: kube::Client,
    stores: Stores,
    /// Where the SidecarSets' ControllerRevisions are.
    namespace: String,
}

async fn review(State(handler): State<Arc<Handler>>, body: Bytes) -> Response {
    answer_pod_create(
        &body,
        "its SidecarSets conflict",
        async |request, pod, raw| handler.decide(request, &pod, raw).await,
    )
    .await
}

impl Handler {
    async fn decide(&self, request: &AdmissionRequest, pod: &Pod, raw: &Value) -> Decision {
        let cached = self.stores.sidecarsets.state();
        if cached.is_empty() {
            return Decision::Allow;
        }
        let empty = BTreeMap::new();
        let fallback = request.namespace.as_deref().unwrap_or_default();
        let scope = PodScope::of(pod, fallback, &empty);
        if scope.is_exempt() {
            return Decision::Allow;
        }
        let candidates: Vec<&SidecarSet> = (cached.iter())
            .map(Arc::as_ref)
            .filter(|set| !set.spec.injection_strategy.paused)
            .collect();
        let namespace_labels = if candidates.iter().any(|set| needs_namespace_labels(set)) {
            self.namespace_labels(scope.namespace).await
        } else {
            None
        };
        let matched: Vec<&SidecarSet> = (candidates.into_iter())
            .filter(|set| matches(set, &scope, namespace_labels.as_ref()))
            .collect();
        let versions = self.versions_to_inject(&matched, scope.labels);
        let matched: Vec<&SidecarSet> = versions.iter().collect();
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        match injection_patch(raw, &matched, &now) {
            Ok(patch) => Decision::Patch(patch),
            Err(err) => Decision::Refuse(Refusal::bad_request(format!("{err}."))),
        }
    }

    /// Each matched SidecarSet as it is injected: the revision its injectionStrategy names,
    /// or its current spec (`revisions::version_to_inject`).
    fn versions_to_inject(
        &self,
        matched: &[&SidecarSet],
        labels: &BTreeMap<String, String>,
    ) -> Vec<SidecarSet> {
        let named = matched
            .iter()
            .any(|s| s.spec.injection_strategy.revision.is_some());
        let cached = if named {
            self.stores.revisions.state()
        } else {
            Vec::new()
        };
        (matched.iter())
            .map(|set| {
                let name = set.metadata.name.as_deref().unwrap_or_default();
                let revisions = of_set(&cached, &self.namespace, name);
                version_to_inject(set, &revisions, labels, fastrand::f64())
            })
            .collect()
    }

    /// The labels of the pod's namespace; a failed read matches no SidecarSet that selects
    /// namespaces by label (OpenKruise's choice), logged, rather than refusing the pod.
    async fn namespace_labels(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        match api.get_opt(name).await {
            Ok(namespace) => namespace.map(|n| n.metadata.labels.unwrap_or_default()),
            Err(err) => {
                let message = crate::runtime::api_message::api_message(&err);
                tracing::warn!(namespace = name, %message, "could not read a pod's namespace for its SidecarSets' namespaceSelector");
                None
            }
        }
    }
}

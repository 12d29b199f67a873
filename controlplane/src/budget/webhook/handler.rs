//! The PodUnavailableBudget admission route: a pod delete or eviction screened
//! (`review::screen`), the pod read from the apiserver and confirmed (`review::confirm`),
//! then the budgets' check-and-decrement (`admission::KubeBudgets`).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::review::{Disruption, Exempt, Screen, Unconfirmed, Verdict, confirm, refusal};
use crate::admission::review::{Decision, answer, read_request};
use crate::budget::admission::{KubeBudgets, Recording};
use crate::caches::Stores;
use crate::controller::api_error::{ApiError, api_error};
use crate::workload::budget::{Admission, DisruptionKind};

/// The path the ValidatingWebhookConfiguration sends reviews to.
pub const REVIEW_PATH: &str = "/validate-pod-disruption";

/// The route answering pod deletes and evictions from the shared caches and budgets.
pub fn routes(client: kube::Client, stores: Stores, exempt: Exempt) -> Router {
    let handler = Arc::new(Handler {
        client,
        stores,
        exempt,
    });
    Router::new().route(REVIEW_PATH, post(review).with_state(handler))
}

/// What a review is answered from.
struct Handler {
    client: kube::Client,
    stores: Stores,
    exempt: Exempt,
}

async fn review(State(handler): State<Arc<Handler>>, body: Bytes) -> Response {
    let request = match read_request(&body) {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    let verdict = match super::review::screen(&request, &handler.exempt) {
        Screen::Pass(_) => Verdict::Allow,
        Screen::Check(disruption) => handler.decide(&disruption).await,
    };
    if let Verdict::Deny(message) = &verdict {
        tracing::info!(
            namespace = request.namespace.as_deref().unwrap_or(""),
            pod = %request.name,
            user = %request.user_info.username,
            %message,
            "refused a disruption"
        );
    }
    let decision = Decision::from(verdict);
    answer(&request, &decision)
}

impl Handler {
    async fn decide(&self, disruption: &Disruption) -> Verdict {
        // The pod as the apiserver has it now (a quorum read), never the review's copy: a
        // review naming a pod that does not exist with that UID records nothing.
        let pod = match pod_to_decide(&self.client, disruption).await {
            Ok(Ok(pod)) => pod,
            // Refused rather than let through unchecked: the caller tries again.
            Err(err) => {
                return Verdict::Deny(refusal(
                    disruption,
                    &format!("its PodUnavailableBudgets could not be checked: {err}"),
                ));
            }
            Ok(Err(why)) => {
                tracing::info!(
                    namespace = %disruption.namespace,
                    pod = %disruption.pod,
                    reason = %why,
                    "answered a review without asking any budget"
                );
                return Verdict::Allow;
            }
        };
        let budgets = KubeBudgets {
            client: &self.client,
            stores: &self.stores,
            namespace: &disruption.namespace,
        };
        let recording = if disruption.dry_run {
            Recording::DryRun
        } else {
            Recording::Record
        };
        match budgets
            .admit_pod(&pod, DisruptionKind::Delete, recording)
            .await
        {
            Ok(Admission::Allowed { .. }) => Verdict::Allow,
            Ok(Admission::Held(message)) => Verdict::Deny(refusal(disruption, &message)),
            // Refused rather than let through unchecked: the caller tries again.
            Err(err) => Verdict::Deny(refusal(
                disruption,
                &format!("its PodUnavailableBudgets could not be checked: {err}"),
            )),
        }
    }
}

/// The pod `disruption` is decided for, read from the apiserver (a quorum read, newer
/// than the review) and confirmed against the review (`review::confirm`).
async fn pod_to_decide(
    client: &kube::Client,
    disruption: &Disruption,
) -> Result<Result<Pod, Unconfirmed>, ApiError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &disruption.namespace);
    let found = api
        .get_opt(&disruption.pod)
        .await
        .map_err(api_error(format!("reading pod {}", disruption.pod)))?;
    Ok(confirm(disruption, found))
}

#[cfg(test)]
#[path = "handler_tests.rs"]
mod tests;

//! The recreate's budget step: the question it asks, and the PodUnavailableBudget
//! check-and-decrement behind it against a scripted apiserver (an admitted recreate is
//! recorded in `unavailablePods`; an exhausted budget writes nothing and keeps the request
//! Pending with a message naming the budget).

use kube::api::Api;
use serde_json::{Value, json};

use super::*;
use crate::api::PodUnavailableBudget;
use crate::api::containerrecreaterequest::ContainerRecreateRequestPhase as Phase;
use crate::budget::admission::{Recording, take};
use crate::budget::arithmetic::BudgetPod;
use crate::workload::budget::ScriptedBudgets;
use crate::workload::scripted_api::ScriptedApi;

/// The one PodUnavailableBudget `web` protecting every ready pod, decided by the real
/// check-and-decrement (`take`) against the scripted apiserver.
struct OneBudget {
    api: Api<PodUnavailableBudget>,
}

impl DisruptionBudgets for OneBudget {
    async fn admit(&self, pod: &str, kind: DisruptionKind) -> Result<Admission, ApiError> {
        let pod = BudgetPod {
            name: pod.to_owned(),
            ready: true,
            terminating: false,
            in_place_ready_since: None,
            ready_since: None,
            no_protect: false,
        };
        Ok(
            match take(&self.api, "web", &pod, kind, Recording::Record).await? {
                None => Admission::Allowed { evict: false },
                Some(message) => Admission::Held(message),
            },
        )
    }
}

fn budget(allowed: i32) -> Value {
    json!({
        "apiVersion": "policy.kruise.io/v1alpha1",
        "kind": "PodUnavailableBudget",
        "metadata": { "name": "web", "namespace": "ns", "generation": 1, "resourceVersion": "7" },
        "spec": { "maxUnavailable": 1, "selector": { "matchLabels": { "app": "web" } } },
        "status": {
            "observedGeneration": 1, "unavailableAllowed": allowed,
            "currentAvailable": 3, "desiredAvailable": 3 - allowed, "totalReplicas": 3
        }
    })
}

fn pending() -> ContainerRecreateRequestStatus {
    ContainerRecreateRequestStatus {
        phase: Phase::Pending,
        ..ContainerRecreateRequestStatus::default()
    }
}

#[tokio::test]
async fn a_recreate_is_asked_as_an_in_place_disruption_of_its_pod() {
    let budgets = ScriptedBudgets::default();
    let held = admit(&budgets, "web-0", &pending())
        .await
        .expect("no error");
    assert_eq!(held, None);
    assert_eq!(
        budgets.asked(),
        vec![("web-0".to_owned(), DisruptionKind::InPlaceUpdate)]
    );
}

#[tokio::test]
async fn an_admitted_recreate_is_recorded_in_the_budgets_unavailable_pods() {
    let api = ScriptedApi::new(vec![(200, budget(1)), (200, budget(0))]);
    let budgets = OneBudget {
        api: Api::namespaced(api.client(), "ns"),
    };
    let held = admit(&budgets, "web-0", &pending())
        .await
        .expect("no error");
    assert_eq!(held, None);
    let sent = api.sent();
    assert_eq!(sent.len(), 2, "read, then the conditional write");
    assert_eq!(sent[1].method, "PUT");
    assert_eq!(sent[1].body["metadata"]["resourceVersion"], "7");
    assert_eq!(sent[1].body["status"]["unavailableAllowed"], 0);
    assert!(sent[1].body["status"]["unavailablePods"]["web-0"].is_string());
}

#[tokio::test]
async fn an_exhausted_budget_keeps_the_request_pending_naming_it() {
    let api = ScriptedApi::new(vec![(200, budget(0))]);
    let budgets = OneBudget {
        api: Api::namespaced(api.client(), "ns"),
    };
    let held = admit(&budgets, "web-0", &pending())
        .await
        .expect("no error")
        .expect("held");
    assert_eq!(api.sent().len(), 1, "refused without a write");
    assert_eq!(held.status.phase, Phase::Pending);
    assert!(
        held.status.message.contains("PodUnavailableBudget web"),
        "{}",
        held.status.message
    );
    assert_eq!(held.requeue_after, Some(plan::RETRY_BUDGET_AFTER));
}

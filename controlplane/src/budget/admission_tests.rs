//! The check-and-decrement against a scripted apiserver: the conditional write, the
//! re-read and second decision after a conflict, and a refusal that writes nothing.

use serde_json::{Value, json};

use super::*;
use crate::workload::scripted_api::{ScriptedApi, failure};

fn budget(resource_version: &str, allowed: i32, disrupted: &[&str]) -> Value {
    let entries: serde_json::Map<String, Value> = disrupted
        .iter()
        .map(|p| ((*p).to_owned(), json!("2026-01-01T00:00:00Z")))
        .collect();
    json!({
        "apiVersion": "policy.kruise.io/v1alpha1",
        "kind": "PodUnavailableBudget",
        "metadata": { "name": "web", "namespace": "ns", "generation": 1, "resourceVersion": resource_version },
        "spec": { "maxUnavailable": 1, "selector": { "matchLabels": { "app": "web" } } },
        "status": {
            "observedGeneration": 1, "unavailableAllowed": allowed,
            "currentAvailable": 3, "desiredAvailable": 3 - allowed, "totalReplicas": 3,
            "disruptedPods": entries
        }
    })
}

fn pod(name: &str) -> BudgetPod {
    BudgetPod {
        name: name.into(),
        ready: true,
        terminating: false,
        in_place_ready_since: None,
        ready_since: None,
        no_protect: false,
    }
}

#[tokio::test]
async fn a_conflict_reads_again_and_decides_on_the_newer_budget() {
    // p1 wants the one disruption; another actor takes it between our read and write.
    let api = ScriptedApi::new(vec![
        (200, budget("10", 1, &[])),
        (409, failure(409, "the object has been modified")),
        (200, budget("11", 0, &["p0"])),
    ]);
    let budgets: Api<PodUnavailableBudget> = Api::namespaced(api.client(), "ns");
    let refused = take(
        &budgets,
        "web",
        &pod("p1"),
        DisruptionKind::Delete,
        Recording::Record,
    )
    .await
    .expect("no error");
    let message = refused.expect("refused after the re-read");
    assert!(message.contains("PodUnavailableBudget web"), "{message}");
    let sent = api.sent();
    assert_eq!(sent.len(), 3, "read, write, read again; no second write");
    assert_eq!(sent[1].method, "PUT");
    assert!(sent[1].uri.starts_with(
        "/apis/policy.kruise.io/v1alpha1/namespaces/ns/podunavailablebudgets/web/status"
    ));
    assert_eq!(sent[1].body["metadata"]["resourceVersion"], "10");
    assert_eq!(sent[1].body["status"]["unavailableAllowed"], 0);
    assert!(sent[1].body["status"]["disruptedPods"]["p1"].is_string());
}

#[tokio::test]
async fn an_admitted_in_place_update_is_recorded_in_unavailable_pods() {
    let api = ScriptedApi::new(vec![
        (200, budget("10", 1, &[])),
        (200, budget("12", 0, &[])),
    ]);
    let budgets: Api<PodUnavailableBudget> = Api::namespaced(api.client(), "ns");
    let admitted = take(
        &budgets,
        "web",
        &pod("p1"),
        DisruptionKind::InPlaceUpdate,
        Recording::Record,
    )
    .await
    .expect("no error");
    assert_eq!(admitted, None);
    let sent = api.sent();
    assert!(sent[1].body["status"]["unavailablePods"]["p1"].is_string());
    assert_eq!(sent[1].body["status"]["disruptedPods"], Value::Null);
}

#[tokio::test]
async fn a_pod_recorded_already_is_admitted_without_a_write() {
    let api = ScriptedApi::new(vec![(200, budget("10", 0, &["p1"]))]);
    let budgets: Api<PodUnavailableBudget> = Api::namespaced(api.client(), "ns");
    let admitted = take(
        &budgets,
        "web",
        &pod("p1"),
        DisruptionKind::Delete,
        Recording::Record,
    )
    .await
    .expect("no error");
    assert_eq!(admitted, None);
    assert_eq!(api.sent().len(), 1);
}

#[tokio::test]
async fn a_dry_run_is_decided_but_not_written() {
    let api = ScriptedApi::new(vec![
        (200, budget("10", 1, &[])),
        (200, budget("10", 0, &[])),
    ]);
    let budgets: Api<PodUnavailableBudget> = Api::namespaced(api.client(), "ns");
    let admitted = take(
        &budgets,
        "web",
        &pod("p1"),
        DisruptionKind::Delete,
        Recording::DryRun,
    )
    .await
    .expect("no error");
    assert_eq!(admitted, None, "room for one: admitted");
    assert_eq!(api.sent().len(), 1, "read only, nothing recorded");
    let refused = take(
        &budgets,
        "web",
        &pod("p1"),
        DisruptionKind::Delete,
        Recording::DryRun,
    )
    .await
    .expect("no error");
    assert!(refused.is_some(), "no room: refused in a dry run too");
}

//! The CRD carries OpenKruise's names, default, columns and the checks its webhook makes
//! without reading other objects.

use kube::CustomResourceExt as _;
use serde_json::{Value, json};

use super::*;

fn version_schema() -> Value {
    let crd = ContainerRecreateRequest::crd();
    let schema = crd.spec.versions[0].schema.clone().expect("a schema");
    serde_json::to_value(schema.open_api_v3_schema).expect("schema as JSON")
}

fn spec_schema() -> Value {
    version_schema()["properties"]["spec"].clone()
}

#[test]
fn failure_policy_defaults_to_fail() {
    let spec = spec_schema();
    assert_eq!(spec["properties"]["strategy"]["default"], json!({}));
    let strategy = &spec["properties"]["strategy"]["properties"];
    assert_eq!(strategy["failurePolicy"]["default"], json!("Fail"));
    assert_eq!(strategy["failurePolicy"]["enum"], json!(["Fail", "Ignore"]));
    assert_eq!(
        ContainerRecreateRequestStrategy::default().policy(),
        FailurePolicy::Fail
    );
}

#[test]
fn containers_are_required_named_and_unique() {
    let spec = spec_schema();
    let required = spec["required"].to_string();
    assert!(required.contains("podName"), "{required}");
    assert!(required.contains("containers"), "{required}");
    let containers = &spec["properties"]["containers"];
    assert_eq!(containers["minItems"], json!(1));
    assert_eq!(containers["maxItems"], json!(MAX_CONTAINERS));
    let rules = containers["x-kubernetes-validations"].to_string();
    assert!(rules.contains("only once"), "{rules}");
    assert_eq!(
        containers["items"]["properties"]["name"]["minLength"],
        json!(1)
    );
}

#[test]
fn seconds_are_never_negative() {
    let spec = spec_schema();
    let properties = &spec["properties"];
    let strategy = &properties["strategy"]["properties"];
    for field in [
        &properties["activeDeadlineSeconds"],
        &properties["ttlSecondsAfterFinished"],
        &strategy["terminationGracePeriodSeconds"],
        &strategy["unreadyGracePeriodSeconds"],
        &strategy["minStartedSeconds"],
    ] {
        assert_eq!(field["minimum"], json!(0.0), "{field}");
    }
}

#[test]
fn spec_is_immutable() {
    let rules = spec_schema()["x-kubernetes-validations"].to_string();
    assert!(rules.contains("self == oldSelf"), "{rules}");
}

#[test]
fn crd_has_short_name_status_and_openkruise_columns() {
    let crd = ContainerRecreateRequest::crd();
    assert_eq!(crd.spec.names.short_names, Some(vec!["crr".to_owned()]));
    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(
        version
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some()
    );
    let columns: Vec<(&str, &str)> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        [
            ("PHASE", ".status.phase"),
            ("POD", ".spec.podName"),
            (
                "NODE",
                ".metadata.labels.crr\\.apps\\.kruise\\.io/node-name"
            ),
            ("AGE", ".metadata.creationTimestamp"),
        ]
    );
}

#[test]
fn phases_are_spelled_as_openkruise_spells_them() {
    use ContainerRecreateRequestPhase::*;
    let phases = [Pending, Recreating, Succeeded, Failed, Completed]
        .map(|p| serde_json::to_value(p).expect("a phase"));
    assert_eq!(
        phases,
        [
            json!("Pending"),
            json!("Recreating"),
            json!("Succeeded"),
            json!("Failed"),
            json!("Completed")
        ]
    );
}

#[test]
fn an_openkruise_request_round_trips() {
    let raw = json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ContainerRecreateRequest",
        "metadata": { "name": "crr-1", "namespace": "default" },
        "spec": {
            "podName": "pod-1",
            "containers": [{ "name": "app" }, { "name": "sidecar" }],
            "strategy": {
                "failurePolicy": "Ignore",
                "orderedRecreate": true,
                "terminationGracePeriodSeconds": 30,
                "unreadyGracePeriodSeconds": 3,
                "minStartedSeconds": 10
            },
            "activeDeadlineSeconds": 300,
            "ttlSecondsAfterFinished": 1800
        },
        "status": {
            "phase": "Completed",
            "completionTime": "2026-01-01T00:00:00Z",
            "containerRecreateStates": [
                { "name": "app", "phase": "Succeeded" },
                { "name": "sidecar", "phase": "Failed", "message": "no running container" }
            ]
        }
    });
    let typed: ContainerRecreateRequest =
        serde_json::from_value(raw.clone()).expect("deserializes");
    assert_eq!(typed.spec.strategy.policy(), FailurePolicy::Ignore);
    assert_eq!(serde_json::to_value(&typed).expect("serializes"), raw);
}

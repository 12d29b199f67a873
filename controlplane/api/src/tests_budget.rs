//! PodUnavailableBudget: OpenKruise's example deserializes and round-trips, and the CRD
//! has OpenKruise's short name and columns and the admission rules, each naming its field.

use kube::CustomResourceExt as _;
use serde_json::Value;

use super::podunavailablebudget::PodUnavailableBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

const OPENKRUISE_PUB: &str =
    include_str!("../../../tests/fixtures/openkruise/podunavailablebudget.yaml");

#[test]
fn openkruise_example_round_trips() {
    let raw: Value = serde_saphyr::from_str(OPENKRUISE_PUB).expect("YAML");
    let budget: PodUnavailableBudget = serde_saphyr::from_str(OPENKRUISE_PUB).expect("reads");
    assert_eq!(serde_json::to_value(&budget).expect("writes"), raw);
    let target = budget.spec.target_ref.as_ref().expect("targetRef");
    assert_eq!(
        (target.kind.as_str(), target.name.as_str()),
        ("CloneSet", "web-server")
    );
    assert_eq!(
        budget.spec.max_unavailable,
        Some(IntOrString::String("50%".into()))
    );
    assert_eq!(budget.spec.selector, None);
}

fn spec_schema() -> Value {
    let crd = PodUnavailableBudget::crd();
    let schema = crd.spec.versions[0].schema.as_ref().expect("a schema");
    let schema = serde_json::to_value(&schema.open_api_v3_schema).expect("serializes");
    schema["properties"]["spec"].clone()
}

fn rule_messages(schema: &Value) -> Vec<&str> {
    schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["message"].as_str())
        .collect()
}

#[test]
fn admission_rules_name_their_field() {
    let spec = spec_schema();
    let messages = rule_messages(&spec);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("spec.selector and spec.targetRef"))
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("spec.maxUnavailable and spec.minAvailable"))
    );
    let props = &spec["properties"];
    assert!(rule_messages(&props["maxUnavailable"])[0].contains("spec.maxUnavailable"));
    assert!(rule_messages(&props["minAvailable"])[0].contains("spec.minAvailable"));
    assert!(rule_messages(&props["targetRef"])[0].contains("spec.targetRef.kind"));
    assert_eq!(props["selector"]["x-kubernetes-map-type"], "atomic");
}

#[test]
fn crd_has_openkruise_names_and_columns() {
    let crd = PodUnavailableBudget::crd();
    assert_eq!(crd.spec.group, "policy.kruise.io");
    assert_eq!(crd.spec.names.short_names, Some(vec!["pub".to_owned()]));
    assert_eq!(crd.spec.names.plural, "podunavailablebudgets");
    let version = &crd.spec.versions[0];
    assert_eq!((version.name.as_str(), version.storage), ("v1alpha1", true));
    let subresources = version.subresources.as_ref().expect("subresources");
    assert!(subresources.status.is_some());
    let columns: Vec<(&str, &str)> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        [
            ("ALLOWED", ".status.unavailableAllowed"),
            ("AVAILABLE", ".status.currentAvailable"),
            ("DESIRED", ".status.desiredAvailable"),
            ("TOTAL", ".status.totalReplicas"),
            ("AGE", ".metadata.creationTimestamp"),
        ]
    );
}

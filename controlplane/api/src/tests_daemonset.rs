//! Advanced DaemonSet manifests — the Kubernetes documentation's native fluentd DaemonSet
//! with only its apiVersion changed, and OpenKruise's documented sample — deserialize into
//! the type, keep their fields through a round trip, and the defaults, rules and CRD are
//! OpenKruise's.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResourceExt as _;
use serde_json::Value;

use super::daemonset::{
    DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategyType, RollingUpdateDaemonSet,
    RollingUpdateType,
};

const FLUENTD: &str = include_str!("../../../tests/fixtures/kubernetes/fluentd-daemonset.yaml");
const SAMPLE: &str = include_str!("../../../tests/fixtures/openkruise/advanced-daemonset.yaml");

fn parse(yaml: &str) -> DaemonSet {
    match serde_saphyr::from_str(yaml) {
        Ok(ds) => ds,
        Err(e) => panic!("manifest does not deserialize: {e}"),
    }
}

#[test]
fn manifests_round_trip_without_losing_fields() {
    for (name, yaml) in [("fluentd", FLUENTD), ("sample", SAMPLE)] {
        let raw: Value = serde_saphyr::from_str(yaml).expect("manifest is YAML");
        let typed = serde_json::to_value(parse(yaml)).expect("serializes");
        assert_eq!(typed, raw, "{name}: a field was lost or renamed");
    }
}

#[test]
fn the_native_manifest_reads_as_the_native_one() {
    let fluentd = parse(FLUENTD);
    assert_eq!(
        fluentd.spec.update_type(),
        DaemonSetUpdateStrategyType::RollingUpdate
    );
    let rolling = fluentd.spec.rolling_update();
    assert_eq!(rolling.update_type(), RollingUpdateType::Standard);
    assert_eq!(rolling.max_unavailable_or_default(), IntOrString::Int(1));
    assert_eq!(rolling.effective_max_surge(), IntOrString::Int(0));
    assert_eq!(
        fluentd.spec.burst_replicas_or_default(),
        IntOrString::Int(250)
    );
}

#[test]
fn openkruise_fields() {
    let sample = parse(SAMPLE);
    let rolling = sample.spec.rolling_update();
    assert_eq!(rolling.update_type(), RollingUpdateType::InPlaceIfPossible);
    assert_eq!(rolling.partition_or_default(), 2);
    assert!(rolling.is_paused());
    assert!(rolling.selector.is_some());
    assert_eq!(
        sample.spec.burst_replicas_or_default(),
        IntOrString::String("10%".to_owned())
    );
    assert_eq!(sample.spec.history_limit(), 5);
    assert!(sample.spec.lifecycle.and_then(|l| l.pre_delete).is_some());
}

#[test]
fn defaults_are_openkruise_defaults() {
    let spec = DaemonSetSpec::default();
    assert_eq!(spec.history_limit(), 10);
    assert_eq!(
        spec.update_type(),
        DaemonSetUpdateStrategyType::RollingUpdate
    );
    let rolling = spec.rolling_update();
    assert_eq!(rolling.update_type(), RollingUpdateType::Standard);
    assert_eq!(rolling.partition_or_default(), 0);
    assert!(!rolling.is_paused());
    assert_eq!(rolling.max_unavailable_or_default(), IntOrString::Int(1));
    assert_eq!(rolling.effective_max_surge(), IntOrString::Int(0));
}

#[test]
fn surging_surges_by_one_unless_told_more() {
    let surging = |surge: Option<IntOrString>| RollingUpdateDaemonSet {
        rolling_update_type: Some(RollingUpdateType::Surging),
        max_surge: surge,
        ..RollingUpdateDaemonSet::default()
    };
    assert_eq!(surging(None).effective_max_surge(), IntOrString::Int(1));
    assert_eq!(
        surging(Some(IntOrString::String("0%".into()))).effective_max_surge(),
        IntOrString::Int(1)
    );
    assert_eq!(
        surging(Some(IntOrString::Int(3))).effective_max_surge(),
        IntOrString::Int(3)
    );
}

fn spec_schema() -> Value {
    let crd = DaemonSet::crd();
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .expect("a storage version");
    let schema = version.schema.as_ref().expect("a schema");
    let schema = serde_json::to_value(schema).expect("serializes");
    schema["openAPIV3Schema"]["properties"]["spec"].clone()
}

#[test]
fn schema_defaults_are_openkruise_defaults() {
    let spec = spec_schema();
    let props = &spec["properties"];
    assert_eq!(props["revisionHistoryLimit"]["default"], 10);
    assert_eq!(props["burstReplicas"]["default"], 250);
    assert_eq!(
        props["updateStrategy"]["default"],
        serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {}})
    );
    // `{type: RollingUpdate}` alone gets its rollingUpdate defaults too (OpenKruise fills it).
    assert_eq!(
        props["updateStrategy"]["properties"]["rollingUpdate"]["default"],
        serde_json::json!({})
    );
    let rolling = &props["updateStrategy"]["properties"]["rollingUpdate"]["properties"];
    assert_eq!(rolling["rollingUpdateType"]["default"], "Standard");
    assert_eq!(rolling["partition"]["default"], 0);
    assert_eq!(rolling["maxUnavailable"]["default"], 1);
    assert_eq!(rolling["maxSurge"]["default"], 0);
    assert_eq!(rolling["paused"]["default"], false);
    // The template gets the pod defaults every workload gets.
    let template_spec = &props["template"]["properties"]["spec"]["properties"];
    assert_eq!(template_spec["restartPolicy"]["default"], "Always");
}

/// The messages of the CEL rules at `schema`.
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
    assert!(messages.iter().any(|m| m.contains("spec.selector")));
    let props = &spec["properties"];
    assert!(rule_messages(&props["burstReplicas"])[0].contains("spec.burstReplicas"));
    let strategy = &props["updateStrategy"];
    assert!(rule_messages(strategy)[0].contains("spec.updateStrategy.rollingUpdate"));
    let rolling = &strategy["properties"]["rollingUpdate"];
    let messages = rule_messages(rolling);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("maxSurge and maxUnavailable"))
    );
    assert!(messages.iter().any(|m| m.contains("InPlaceIfPossible")));
    for field in ["maxUnavailable", "maxSurge"] {
        let found = rule_messages(&rolling["properties"][field]);
        assert!(found[0].contains(field), "{field}: {found:?}");
    }
    let types = &rolling["properties"]["rollingUpdateType"]["enum"];
    assert_eq!(
        types,
        &serde_json::json!(["Standard", "Surging", "InPlaceIfPossible"])
    );
}

#[test]
fn crd_has_status_short_name_and_columns() {
    let crd = DaemonSet::crd();
    assert_eq!(
        crd.spec.names.short_names,
        Some(vec!["daemon".to_owned(), "ads".to_owned()])
    );
    let version = &crd.spec.versions[0];
    assert_eq!((version.name.as_str(), version.storage), ("v1alpha1", true));
    let subresources = version.subresources.as_ref().expect("subresources");
    assert!(subresources.status.is_some());
    let columns: Vec<&str> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        columns,
        [
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES"
        ]
    );
}

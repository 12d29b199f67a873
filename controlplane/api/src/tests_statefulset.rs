//! Advanced StatefulSet manifests — the Kubernetes documentation's native `web` with only
//! its apiVersion changed, and seed 002's — deserialize into the type, keep their fields
//! through a round trip, and the defaults and the CRD are OpenKruise's.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResourceExt as _;
use serde_json::Value;

use super::common::PodUpdatePolicy;
use super::statefulset::{
    PodManagementPolicy, PvcRetentionPolicyType, StatefulSet, StatefulSetSpec,
    StatefulSetUpdateStrategyType,
};

const WEB: &str = include_str!("../../../tests/fixtures/kubernetes/web-statefulset.yaml");
const INPLACE: &str = include_str!("../../../tests/fixtures/seed-002/statefulset-inplace.yaml");
const ORDINALS: &str = include_str!("../../../tests/fixtures/seed-002/statefulset-ordinals.yaml");

fn parse(yaml: &str) -> StatefulSet {
    match serde_saphyr::from_str(yaml) {
        Ok(sts) => sts,
        Err(e) => panic!("manifest does not deserialize: {e}"),
    }
}

#[test]
fn manifests_round_trip_without_losing_fields() {
    for (name, yaml) in [("web", WEB), ("inplace", INPLACE), ("ordinals", ORDINALS)] {
        let raw: Value = serde_saphyr::from_str(yaml).expect("manifest is YAML");
        let mut typed = serde_json::to_value(parse(yaml)).expect("serializes");
        // k8s-openapi always writes a PVC's apiVersion and kind; the apiserver keeps them.
        let vcts = typed.pointer_mut("/spec/volumeClaimTemplates");
        for vct in vcts
            .and_then(|v| v.as_array_mut())
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_object_mut())
        {
            vct.remove("apiVersion");
            vct.remove("kind");
        }
        assert_eq!(typed, raw, "{name}: a field was lost or renamed");
    }
}

#[test]
fn the_native_web_statefulset_reads_as_the_native_one() {
    let web = parse(WEB);
    assert_eq!(web.spec.service_name.as_deref(), Some("nginx"));
    assert_eq!(web.spec.desired_replicas(), 3);
    assert_eq!(web.spec.effective_min_ready_seconds(), 10);
    assert_eq!(web.spec.volume_claim_templates.len(), 1);
    assert_eq!(
        web.spec.management_policy(),
        PodManagementPolicy::OrderedReady
    );
    assert_eq!(
        web.spec.update_type(),
        StatefulSetUpdateStrategyType::RollingUpdate
    );
    assert_eq!(
        web.spec.rolling_update().policy(),
        PodUpdatePolicy::ReCreate
    );
}

#[test]
fn seed_fields() {
    let inplace = parse(INPLACE);
    assert_eq!(
        inplace.spec.management_policy(),
        PodManagementPolicy::Parallel
    );
    let rolling = inplace.spec.rolling_update();
    assert_eq!(rolling.policy(), PodUpdatePolicy::InPlaceIfPossible);
    assert_eq!(rolling.max_unavailable_or_default(), IntOrString::Int(2));
    assert_eq!(
        inplace.spec.retention(),
        (
            PvcRetentionPolicyType::Delete,
            PvcRetentionPolicyType::Delete
        )
    );

    let ordinals = parse(ORDINALS);
    assert_eq!(ordinals.spec.start_ordinal(), 3);
    assert_eq!(
        ordinals.spec.reserve_ordinals,
        [IntOrString::Int(1), IntOrString::String("5-6".into())]
    );
    let rolling = ordinals.spec.rolling_update();
    assert!(rolling.paused);
    assert_eq!(rolling.partition_or_default(), 2);
    assert_eq!(ordinals.spec.effective_min_ready_seconds(), 30);
    let weights = rolling
        .unordered_update
        .and_then(|u| u.priority_strategy)
        .map(|p| p.weight_priority.len());
    assert_eq!(weights, Some(1));
}

#[test]
fn defaults_are_openkruise_defaults() {
    let spec = StatefulSetSpec::default();
    assert_eq!(spec.desired_replicas(), 1);
    assert_eq!(spec.history_limit(), 10);
    assert_eq!(spec.start_ordinal(), 0);
    assert_eq!(spec.management_policy(), PodManagementPolicy::OrderedReady);
    assert_eq!(
        spec.update_type(),
        StatefulSetUpdateStrategyType::RollingUpdate
    );
    assert_eq!(
        spec.retention(),
        (
            PvcRetentionPolicyType::Retain,
            PvcRetentionPolicyType::Retain
        )
    );
    let rolling = spec.rolling_update();
    assert_eq!(rolling.policy(), PodUpdatePolicy::ReCreate);
    assert_eq!(rolling.partition_or_default(), 0);
    assert_eq!(rolling.max_unavailable_or_default(), IntOrString::Int(1));
}

fn spec_schema() -> Value {
    let crd = StatefulSet::crd();
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
    assert_eq!(props["replicas"]["default"], 1);
    assert_eq!(props["revisionHistoryLimit"]["default"], 10);
    assert_eq!(props["podManagementPolicy"]["default"], "OrderedReady");
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
    assert_eq!(rolling["partition"]["default"], 0);
    assert_eq!(rolling["maxUnavailable"]["default"], 1);
    assert_eq!(rolling["podUpdatePolicy"]["default"], "ReCreate");
    assert_eq!(rolling["minReadySeconds"]["maximum"], 300.0);
    assert_eq!(
        props["persistentVolumeClaimRetentionPolicy"]["default"],
        serde_json::json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
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
    for field in [
        "spec.selector",
        "spec.updateStrategy.rollingUpdate.unorderedUpdate",
        "spec.scaleStrategy.maxUnavailable",
        "spec.volumeClaimTemplates",
    ] {
        assert!(
            messages.iter().any(|m| m.contains(field)),
            "no rule names {field}: {messages:?}"
        );
    }
    let props = &spec["properties"];
    assert!(rule_messages(&props["reserveOrdinals"]["items"])[0].contains("spec.reserveOrdinals"));
    assert!(
        rule_messages(&props["updateStrategy"])[0].contains("spec.updateStrategy.rollingUpdate")
    );
    let max_unavailable =
        &props["updateStrategy"]["properties"]["rollingUpdate"]["properties"]["maxUnavailable"];
    assert_eq!(rule_messages(max_unavailable).len(), 2);
}

#[test]
fn crd_has_subresources_short_name_and_columns() {
    let crd = StatefulSet::crd();
    assert_eq!(crd.spec.names.short_names, Some(vec!["asts".to_owned()]));
    let version = &crd.spec.versions[0];
    assert_eq!((version.name.as_str(), version.storage), ("v1beta1", true));
    let subresources = version.subresources.as_ref().expect("subresources");
    assert!(subresources.status.is_some());
    let scale = subresources.scale.as_ref().expect("scale subresource");
    assert_eq!(
        scale.label_selector_path.as_deref(),
        Some(".status.labelSelector")
    );
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
            "UPDATED",
            "READY",
            "AGE",
            "CONTAINERS",
            "IMAGES"
        ]
    );
}

/// Properties without a description under `schema`, as paths (`kubectl explain` shows
/// nothing for them).
fn undescribed(schema: &Value, path: &str, found: &mut Vec<String>) {
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, property) in properties.into_iter().flatten() {
        let child = format!("{path}.{name}");
        let described = property
            .get("description")
            .and_then(Value::as_str)
            .is_some_and(|d| !d.trim().is_empty());
        let root_meta =
            path.is_empty() && ["apiVersion", "kind", "metadata"].contains(&name.as_str());
        if !described && !root_meta {
            found.push(child.clone());
        }
        undescribed(property, &child, found);
    }
    if let Some(items) = schema.get("items") {
        undescribed(items, &format!("{path}[*]"), found);
    }
}

#[test]
fn every_field_is_described() {
    let crd = StatefulSet::crd();
    let schema = crd.spec.versions[0].schema.as_ref().expect("a schema");
    let schema = serde_json::to_value(&schema.open_api_v3_schema).expect("serializes");
    let mut missing = Vec::new();
    undescribed(&schema, "", &mut missing);
    assert!(missing.is_empty(), "no description for {missing:?}");
}

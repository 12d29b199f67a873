//! The seed 002 CloneSets deserialize into the types, keep their fields through a
//! round trip, and the defaults are OpenKruise's.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResourceExt as _;

use super::cloneset::{CloneSet, CloneSetSpec, CloneSetUpdateStrategy};
use super::common::PodUpdatePolicy;

const SEEDS: [(&str, &str); 3] = [
    (
        "sample-data",
        include_str!("../../../tests/fixtures/seed-002/sample-data.yaml"),
    ),
    (
        "sample-data-inplace",
        include_str!("../../../tests/fixtures/seed-002/sample-data-inplace.yaml"),
    ),
    (
        "sample-strategies",
        include_str!("../../../tests/fixtures/seed-002/sample-strategies.yaml"),
    ),
];

fn parse(yaml: &str) -> CloneSet {
    match serde_saphyr::from_str(yaml) {
        Ok(cs) => cs,
        Err(e) => panic!("seed does not deserialize: {e}"),
    }
}

#[test]
fn seeds_round_trip_without_losing_fields() {
    for (name, yaml) in SEEDS {
        let raw: serde_json::Value = serde_saphyr::from_str(yaml).expect("seed is YAML");
        let mut typed = serde_json::to_value(parse(yaml)).expect("serializes");
        // k8s-openapi always writes a PVC's apiVersion and kind; the apiserver keeps them.
        let vcts = typed.pointer_mut("/spec/volumeClaimTemplates");
        if let Some(vcts) = vcts.and_then(|v| v.as_array_mut()) {
            for vct in vcts.iter_mut().filter_map(|v| v.as_object_mut()) {
                vct.remove("apiVersion");
                vct.remove("kind");
            }
        }
        assert_eq!(typed, raw, "{name}: a field was lost or renamed");
    }
}

#[test]
fn sample_data_fields() {
    let cs = parse(SEEDS[0].1);
    assert_eq!(cs.spec.replicas, Some(2));
    assert_eq!(cs.spec.volume_claim_templates.len(), 1);
    let containers = cs.spec.template.spec.as_ref().map(|s| s.containers.len());
    assert_eq!(containers, Some(1));
}

#[test]
fn strategies_fields() {
    let inplace = parse(SEEDS[1].1);
    assert_eq!(
        inplace.spec.update_strategy.policy(),
        PodUpdatePolicy::InPlaceIfPossible
    );
    assert_eq!(
        inplace.spec.update_strategy.partition,
        Some(IntOrString::Int(1))
    );

    let cs = parse(SEEDS[2].1);
    assert!(cs.spec.scale_strategy.disable_pvc_reuse);
    assert_eq!(
        cs.spec.scale_strategy.max_unavailable,
        Some(IntOrString::Int(1))
    );
    assert_eq!(cs.spec.scale_strategy.pods_to_delete, ["sample-data-p8lh7"]);
    assert!(cs.spec.update_strategy.paused);
    assert_eq!(cs.spec.min_ready_seconds, 60);
    let weights: Vec<i32> = cs
        .spec
        .update_strategy
        .priority_strategy
        .iter()
        .flat_map(|p| p.weight_priority.iter().map(|w| w.weight))
        .collect();
    assert_eq!(weights, [50, 30]);
    let lifecycle = cs.spec.lifecycle.expect("lifecycle");
    assert!(lifecycle.pre_delete.is_some_and(|h| h.mark_pod_not_ready));
    assert!(lifecycle.pre_normal.is_some_and(|h| !h.mark_pod_not_ready));
}

#[test]
fn defaults_are_openkruise_defaults() {
    let spec = CloneSetSpec::default();
    assert_eq!(spec.desired_replicas(), 1);
    assert_eq!(spec.history_limit(), 10);
    let update = CloneSetUpdateStrategy::default();
    assert_eq!(update.policy(), PodUpdatePolicy::ReCreate);
    assert_eq!(
        update.max_unavailable_or_default(),
        IntOrString::String("20%".into())
    );
    assert_eq!(update.max_surge_or_default(), IntOrString::Int(0));
    assert_eq!(update.partition_or_default(), IntOrString::Int(0));
}

#[test]
fn crd_has_subresources_short_name_and_columns() {
    let crd = CloneSet::crd();
    assert_eq!(crd.spec.names.short_names, Some(vec!["clone".to_owned()]));
    let version = &crd.spec.versions[0];
    let scale = version
        .subresources
        .as_ref()
        .and_then(|s| s.scale.as_ref())
        .expect("scale subresource");
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
            "UPDATED",
            "UPDATED_READY",
            "UPDATED_AVAILABLE",
            "READY",
            "TOTAL",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
}

/// `partition` takes a fractional percentage; the other int-or-percent fields do not, and
/// their rules (which name the field in their messages) refuse one.
#[test]
fn only_partition_takes_a_fractional_percentage() {
    use super::common::{
        FRACTIONAL_PERCENT_REGEX, FRACTIONAL_PERCENT_RULE, INT_OR_PERCENT_RULE, WHOLE_PERCENT_REGEX,
    };
    assert!(FRACTIONAL_PERCENT_RULE.contains(FRACTIONAL_PERCENT_REGEX));
    assert!(INT_OR_PERCENT_RULE.contains(WHOLE_PERCENT_REGEX));
    let fractional = regex::Regex::new(FRACTIONAL_PERCENT_REGEX).expect("valid regex");
    let whole = regex::Regex::new(WHOLE_PERCENT_REGEX).expect("valid regex");
    let cases = [
        ("0%", true, true),
        ("20%", true, true),
        ("100%", true, true),
        ("12.5%", true, false),
        ("0.01%", true, false),
        ("99.999%", true, false),
        ("100.0%", false, false),
        ("100.5%", false, false),
        ("101%", false, false),
        ("12.%", false, false),
        (".5%", false, false),
        ("-1.5%", false, false),
        ("1e1%", false, false),
        ("12.5", false, false),
        ("05%", false, false),
    ];
    for (value, partition_ok, others_ok) in cases {
        assert_eq!(
            fractional.is_match(value),
            partition_ok,
            "partition {value}"
        );
        assert_eq!(whole.is_match(value), others_ok, "maxUnavailable {value}");
    }

    let crd = serde_json::to_string(&CloneSet::crd()).expect("CRD serializes");
    let partition_rule = serde_json::to_string(FRACTIONAL_PERCENT_RULE).expect("string");
    assert_eq!(crd.matches(partition_rule.trim_matches('"')).count(), 1);
    for field in [
        "spec.updateStrategy.maxUnavailable",
        "spec.updateStrategy.maxSurge",
        "spec.scaleStrategy.maxUnavailable",
    ] {
        assert!(
            crd.contains(&format!(
                "{field} must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"
            )),
            "{field}"
        );
    }
}

#[test]
fn update_strategy_type_on_delete_round_trips_and_is_in_the_schema() {
    use super::cloneset::CloneSetUpdateStrategyType;
    let cs = parse(
        "apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: nginx}]}
  updateStrategy: {type: OnDelete}
",
    );
    let strategy = &cs.spec.update_strategy;
    assert_eq!(strategy.type_, Some(CloneSetUpdateStrategyType::OnDelete));
    assert!(strategy.on_delete());
    assert_eq!(strategy.policy(), PodUpdatePolicy::ReCreate);
    let mut partitioned = strategy.clone();
    partitioned.partition = Some(IntOrString::String("50%".into()));
    assert_eq!(partitioned.partition_in_effect(), None);
    partitioned.type_ = Some(CloneSetUpdateStrategyType::InPlaceIfPossible);
    assert_eq!(
        partitioned.partition_in_effect(),
        Some(&IntOrString::String("50%".into()))
    );
    let json = serde_json::to_value(&cs.spec).expect("spec serializes");
    assert_eq!(json["updateStrategy"]["type"], "OnDelete");
    assert!(serde_json::from_str::<CloneSetUpdateStrategyType>("\"Rolling\"").is_err());

    let crd = serde_json::to_value(CloneSet::crd()).expect("CRD serializes");
    let type_schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["properties"]["updateStrategy"]["properties"]["type"];
    assert_eq!(
        type_schema["enum"],
        serde_json::json!(["ReCreate", "InPlaceIfPossible", "InPlaceOnly", "OnDelete"])
    );
}

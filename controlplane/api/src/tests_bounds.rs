//! Every integer the CRDs admit decodes into its Rust type, and every selector refuses
//! keys that are not label keys: a walk over every CRD (all kinds, all served versions),
//! every integer and int-or-string node of its schema (spec and status, nested types and
//! list items included). For each integer, an object with the field at the schema's
//! minimum and at its maximum is built and decoded into the kind's Rust type; a node with
//! no bound is probed at the apiserver's own limit (i64). So a field whose Rust type is
//! narrower than its schema fails here, whatever the type and wherever it sits.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value, json};

use super::bounds::{
    LABEL_KEY_REGEX, LABEL_VALUE_REGEX, match_labels_key_rule, requirement_key_rule,
};
use super::workload_rules::CONTROLLER_OWNED_POD_LABELS;
use super::*;

/// One step of a path into an object: a property, the first item of a list, or the value
/// of a map entry.
#[derive(Clone, Debug)]
enum Step {
    Property(String),
    Item,
    MapValue,
}

fn describe(path: &[Step]) -> String {
    path.iter()
        .map(|step| match step {
            Step::Property(name) => format!(".{name}"),
            Step::Item => "[0]".to_owned(),
            Step::MapValue => "[k]".to_owned(),
        })
        .collect()
}

/// Every schema node below `node` with its path, depth first.
fn nodes<'a>(node: &'a Value, path: Vec<Step>, out: &mut Vec<(Vec<Step>, &'a Value)>) {
    out.push((path.clone(), node));
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            let mut child_path = path.clone();
            child_path.push(Step::Property(name.clone()));
            nodes(child, child_path, out);
        }
    }
    if let Some(items) = node.get("items") {
        let mut child_path = path.clone();
        child_path.push(Step::Item);
        nodes(items, child_path, out);
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        let mut child_path = path;
        child_path.push(Step::MapValue);
        nodes(values, child_path, out);
    }
}

/// The smallest value `schema` describes that its Rust type reads: required properties
/// only, empty lists, the first enum value, the default where there is one.
fn minimal(schema: &Value) -> Value {
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        return json!(0);
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("integer") | Some("number") => {
            json!(
                schema
                    .get("minimum")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    .max(0)
            )
        }
        Some("boolean") => json!(false),
        Some("array") => json!([]),
        Some("string") if schema.get("format").and_then(Value::as_str) == Some("date-time") => {
            json!("2026-01-01T00:00:00Z")
        }
        Some("string") => json!("a"),
        _ => {
            let mut object = Map::new();
            let required = schema.get("required").and_then(Value::as_array);
            for name in required.into_iter().flatten().filter_map(Value::as_str) {
                if let Some(child) = schema.pointer(&format!("/properties/{name}")) {
                    object.insert(name.to_owned(), minimal(child));
                }
            }
            Value::Object(object)
        }
    }
}

/// `object` (described by `schema`) with `leaf` at `path`, creating what lies between.
fn set_at(object: &mut Value, schema: &Value, path: &[Step], leaf: Value) {
    let Some((step, rest)) = path.split_first() else {
        *object = leaf;
        return;
    };
    match step {
        Step::Property(name) => {
            let child = &schema["properties"][name];
            if !object.is_object() {
                *object = json!({});
            }
            let slot = object
                .as_object_mut()
                .expect("an object")
                .entry(name.clone())
                .or_insert_with(|| minimal(child));
            set_at(slot, child, rest, leaf);
        }
        Step::Item => {
            let child = &schema["items"];
            if object.as_array().is_none_or(Vec::is_empty) {
                *object = json!([minimal(child)]);
            }
            set_at(&mut object[0], child, rest, leaf);
        }
        Step::MapValue => {
            let child = &schema["additionalProperties"];
            if !object.is_object() {
                *object = json!({});
            }
            let slot = object
                .as_object_mut()
                .expect("an object")
                .entry("k")
                .or_insert_with(|| minimal(child));
            set_at(slot, child, rest, leaf);
        }
    }
}

/// Decodes `object` as the controllers read `kind` served in `version`.
fn decode(kind: &str, version: &str, object: Value) -> Result<(), String> {
    fn read<T: serde::de::DeserializeOwned>(object: Value) -> Result<(), String> {
        serde_json::from_value::<T>(object)
            .map(drop)
            .map_err(|e| e.to_string())
    }
    match (kind, version) {
        ("CloneSet", _) => read::<CloneSet>(object),
        ("ImagePullJob", _) => read::<ImagePullJob>(object),
        ("ImageList", _) => read::<ImageList>(object),
        ("BroadcastJob", _) => read::<BroadcastJob>(object),
        ("AdvancedCronJob", _) => read::<AdvancedCronJob>(object),
        ("StatefulSet", _) => read::<StatefulSet>(object),
        ("DaemonSet", _) => read::<DaemonSet>(object),
        ("ContainerRecreateRequest", _) => read::<ContainerRecreateRequest>(object),
        ("ImageListPullJob", _) => read::<ImageListPullJob>(object),
        ("SidecarSet", _) => read::<SidecarSet>(object),
        ("PodProbeMarker", _) => read::<PodProbeMarker>(object),
        ("NodePodProbe", _) => read::<NodePodProbe>(object),
        ("PodUnavailableBudget", "v1alpha1") => read::<PodUnavailableBudget>(object),
        ("PodUnavailableBudget", _) => {
            let stored = crate::conversion::podunavailablebudget::to_v1alpha1(
                object,
                "policy.kruise.io/v1alpha1",
            )
            .map_err(|e| e.to_string())?;
            read::<PodUnavailableBudget>(stored)
        }
        _ => Err(format!("no Rust type known for {kind} {version}")),
    }
}

/// Each served version of each CRD: its kind, version, apiVersion and schema.
fn served_schemas() -> Vec<(String, String, String, Value)> {
    let mut out = Vec::new();
    for crd in crds() {
        for version in crd.spec.versions.iter().filter(|v| v.served) {
            let schema = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("every version has a schema");
            out.push((
                crd.spec.names.kind.clone(),
                version.name.clone(),
                format!("{}/{}", crd.spec.group, version.name),
                serde_json::to_value(schema).expect("a schema serializes"),
            ));
        }
    }
    out
}

/// An object of `kind` with `leaf` at `path` and the least else its schema requires.
fn object_with(kind: &str, api_version: &str, root: &Value, path: &[Step], leaf: Value) -> Value {
    let mut object = minimal(root);
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    object["metadata"] = json!({"name": "a", "namespace": "a"});
    set_at(&mut object, root, path, leaf);
    object
}

/// The rules on a schema node, as text.
fn rules(node: &Value) -> Vec<&str> {
    node.get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r["rule"].as_str())
        .collect()
}

#[test]
fn every_integer_the_schemas_admit_decodes_into_its_rust_type() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for (kind, version, api_version, root) in served_schemas() {
        let mut all = Vec::new();
        nodes(&root, Vec::new(), &mut all);
        for (path, node) in all {
            if node.get("type").and_then(Value::as_str) != Some("integer") {
                continue;
            }
            checked += 1;
            let at = format!("{kind} {version} {}", describe(&path));
            // The apiserver refuses an integer outside i64 (it reads it as a float, and
            // `type: integer` refuses a float beyond 2^53), so an unbounded node is i64.
            let minimum = node.get("minimum").and_then(Value::as_f64);
            let maximum = node.get("maximum").and_then(Value::as_f64);
            let format = node.get("format").and_then(Value::as_str);
            if format != Some("int64") && (minimum.is_none() || maximum.is_none()) {
                failures.push(format!(
                    "{at}: format {format:?} without minimum and maximum"
                ));
            }
            #[allow(clippy::cast_possible_truncation)]
            let probes = [
                minimum.map_or(i64::MIN, |m| m.ceil() as i64),
                maximum.map_or(i64::MAX, |m| m.floor() as i64),
            ];
            for probe in probes {
                let object = object_with(&kind, &api_version, &root, &path, json!(probe));
                if let Err(err) = decode(&kind, &version, object) {
                    failures.push(format!(
                        "{at} = {probe} is admitted but does not decode: {err}"
                    ));
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} integer nodes found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_int_or_string_is_bounded_to_32_bits_by_its_rule() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for (kind, version, api_version, root) in served_schemas() {
        let mut all = Vec::new();
        nodes(&root, Vec::new(), &mut all);
        for (path, node) in all {
            if node.get("x-kubernetes-int-or-string") != Some(&Value::Bool(true)) {
                continue;
            }
            checked += 1;
            let at = format!("{kind} {version} {}", describe(&path));
            let decodes = |value: i64| {
                decode(
                    &kind,
                    &version,
                    object_with(&kind, &api_version, &root, &path, json!(value)),
                )
            };
            // The Rust type holds 32 bits: the rule must stop what would not decode.
            if let Err(err) = decodes(i64::from(i32::MAX)) {
                failures.push(format!("{at}: 2147483647 does not decode: {err}"));
            }
            if decodes(i64::from(i32::MAX) + 1).is_ok() {
                failures.push(format!(
                    "{at}: 2147483648 decodes; is the Rust type still IntOrString?"
                ));
            }
            let bounded = rules(node).iter().any(|rule| {
                rule.contains("int(self) <= 2147483647") && rule.contains("int(self) >= 0")
            });
            if !bounded {
                failures.push(format!(
                    "{at}: no rule bounds the integer to 0..=2147483647: {:?}",
                    rules(node)
                ));
            }
        }
    }
    assert!(checked >= 10, "only {checked} int-or-string nodes found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_int_or_percent_rules_refuse_what_would_not_decode() {
    use super::common::{FRACTIONAL_PERCENT_RULE, INT_OR_PERCENT_RULE};
    for rule in [INT_OR_PERCENT_RULE, FRACTIONAL_PERCENT_RULE] {
        assert!(
            rule.contains("int(self) >= 0 && int(self) <= 2147483647"),
            "{rule}"
        );
    }
    assert!(serde_json::from_value::<IntOrString>(json!(2_147_483_648_i64)).is_err());
    assert!(serde_json::from_value::<IntOrString>(json!(2_147_483_647)).is_ok());
}

#[test]
fn every_selector_refuses_keys_that_are_not_label_keys() {
    let mut failures = Vec::new();
    let mut selectors = Vec::new();
    for (kind, version, _, root) in served_schemas() {
        let mut all = Vec::new();
        nodes(&root, Vec::new(), &mut all);
        for (path, node) in all {
            let at = format!("{kind} {version} {}", describe(&path));
            if let Some(labels) = node.pointer("/properties/matchLabels") {
                selectors.push(at.clone());
                let has_rule = labels["x-kubernetes-validations"]
                    .as_array()
                    .is_some_and(|r| r.contains(&match_labels_key_rule()));
                if !has_rule || labels["additionalProperties"]["pattern"] != LABEL_VALUE_REGEX {
                    failures.push(format!("{at}.matchLabels: keys or values unchecked"));
                }
            }
            if let Some(requirement) = node.pointer("/properties/matchExpressions/items") {
                let has_rule = requirement["x-kubernetes-validations"]
                    .as_array()
                    .is_some_and(|r| r.contains(&requirement_key_rule()));
                let values = &requirement["properties"]["values"];
                let key = &requirement["properties"]["key"];
                if !has_rule
                    || key["pattern"] != LABEL_KEY_REGEX
                    || values["items"]["pattern"] != LABEL_VALUE_REGEX
                    || values["maxItems"].is_null()
                {
                    failures.push(format!("{at}.matchExpressions: keys or values unchecked"));
                }
            }
        }
    }
    // CloneSet, StatefulSet (2 versions), DaemonSet (2, with its rollingUpdate node
    // selector), PUB (2), ImagePullJob and ImageListPullJob (2 each, names and pods),
    // priority weight terms.
    assert!(
        selectors.len() >= 20,
        "only {} selectors: {selectors:?}",
        selectors.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Kubernetes' `IsQualifiedName` on label keys, as the rule's regex and prefix bound read it.
#[test]
fn label_keys_are_refused_as_kubernetes_refuses_them() {
    let regex = regex::Regex::new(LABEL_KEY_REGEX).expect("valid");
    let valid = |key: &str| regex.is_match(key) && key.find('/').is_none_or(|i| i <= 253);
    let long_prefix = format!("{}.io/app", "a".repeat(251));
    let longest_prefix = format!("{}/app", "a".repeat(253));
    let name_63 = "a".repeat(63);
    let name_64 = "a".repeat(64);
    for (key, ok) in [
        ("app", true),
        ("app.kubernetes.io/name", true),
        ("example.com/My_Key.1", true),
        ("A", true),
        (name_63.as_str(), true),
        (longest_prefix.as_str(), true),
        ("bad key!", false),
        ("", false),
        ("-app", false),
        ("app-", false),
        ("/app", false),
        ("Example.com/app", false),
        ("a/b/c", false),
        ("example.com/", false),
        (name_64.as_str(), false),
        (long_prefix.as_str(), false),
    ] {
        assert_eq!(valid(key), ok, "{key:?}");
    }
    let values = regex::Regex::new(LABEL_VALUE_REGEX).expect("valid");
    for (value, ok) in [
        ("", true),
        ("v1.2_x-y", true),
        ("bad value", false),
        ("-x", false),
    ] {
        assert_eq!(values.is_match(value), ok, "{value:?}");
    }
}

/// The texts spliced into CEL string literals (message expressions, the label list) hold
/// no quote that would end the literal.
#[test]
fn texts_inside_cel_literals_hold_no_quotes() {
    use super::bounds::LABEL_KEY_MESSAGE;
    use super::cron_rules::TIME_ZONE_KNOWN_MESSAGE;
    use super::workload_rules::CONTROLLER_OWNED_MESSAGE;
    for text in [LABEL_KEY_MESSAGE, CONTROLLER_OWNED_MESSAGE]
        .into_iter()
        .chain(CONTROLLER_OWNED_POD_LABELS)
    {
        assert!(!text.contains('\'') && !text.contains('\\'), "{text}");
    }
    // A message expression of literals and `self`: quotes come in pairs.
    assert_eq!(TIME_ZONE_KNOWN_MESSAGE.matches('\'').count(), 4);
}

/// (That these are the labels the controllers write is checked in the control plane.)
#[test]
fn the_pod_set_selectors_refuse_the_controller_owned_labels() {
    for (kind, _, _, root) in served_schemas() {
        let spec_rules = rules(&root["properties"]["spec"]);
        let refused = CONTROLLER_OWNED_POD_LABELS.iter().all(|label| {
            [
                format!("('{label}' in self.selector.matchLabels)"),
                format!("matchExpressions.exists(r, r.key == '{label}')"),
            ]
            .iter()
            .all(|form| spec_rules.iter().any(|r| r.contains(form.as_str())))
        });
        let pod_set = ["CloneSet", "StatefulSet", "DaemonSet"].contains(&kind.as_str());
        assert_eq!(refused, pod_set, "{kind}: controller-owned labels refused");
    }
}

#[test]
fn names_are_dns_subdomains_and_lists_are_bounded() {
    let regex = regex::Regex::new(super::common::DNS_SUBDOMAIN_REGEX).expect("valid");
    for (name, ok) in [
        ("regcred", true),
        ("node-1.example.com", true),
        ("pod/other", false),
        ("Regcred", false),
        ("-a", false),
        ("a..b", false),
    ] {
        assert_eq!(regex.is_match(name), ok, "{name:?}");
    }
    let schemas = served_schemas();
    let spec_of = |kind: &str| {
        schemas
            .iter()
            .find(|(k, ..)| k == kind)
            .map(|(.., root)| root["properties"]["spec"].clone())
            .expect("kind served")
    };
    for kind in ["ImagePullJob", "ImageListPullJob"] {
        let spec = spec_of(kind);
        let secrets = &spec["properties"]["pullSecrets"];
        assert_eq!(secrets["maxItems"], 64, "{kind}");
        assert_eq!(
            secrets["items"]["pattern"],
            super::common::DNS_SUBDOMAIN_REGEX,
            "{kind}"
        );
        let names = &spec["properties"]["selector"]["properties"]["names"];
        assert_eq!(names["maxItems"], 5000, "{kind}");
        assert_eq!(
            names["items"]["pattern"],
            super::common::DNS_SUBDOMAIN_REGEX,
            "{kind}"
        );
        assert_eq!(names["items"]["maxLength"], 253, "{kind}");
    }
    let request = spec_of("ContainerRecreateRequest");
    assert_eq!(
        request["properties"]["podName"]["pattern"],
        super::common::DNS_SUBDOMAIN_REGEX
    );
}

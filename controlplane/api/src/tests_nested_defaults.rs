//! Every CRD schema, every served version: an object whose fields have defaults has a
//! default itself (`{}` at least) or is required, so the apiserver fills those fields when a manifest
//! leaves the whole object out, as OpenKruise's defaulting webhook does (issue 31, item 8:
//! `updateStrategy: {type: RollingUpdate}` read back without `rollingUpdate`).

use serde_json::Value;

use super::crds;

/// The paths (`.spec.updateStrategy`) of objects under `schema` with a defaulted field and
/// no default of their own; `defaulted` says whether `schema` itself has one.
fn undefaulted_parents(schema: &Value, path: &str, defaulted: bool, found: &mut Vec<String>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        if let Some(items) = schema.get("items") {
            undefaulted_parents(items, &format!("{path}[]"), true, found);
        }
        return;
    };
    let child_defaults = properties.values().any(|p| p.get("default").is_some());
    if child_defaults && !defaulted {
        found.push(path.to_owned());
    }
    let required: Vec<&str> = (schema.get("required").and_then(Value::as_array))
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, property) in properties {
        if is_template(name) {
            // Pod and claim templates carry the Pod's own defaults, which fill an object
            // (a probe, a volume source) only when a person writes it.
            continue;
        }
        let child = format!("{path}.{name}");
        // A required object is always written, so the apiserver fills its fields.
        let present = property.get("default").is_some() || required.contains(&name.as_str());
        undefaulted_parents(property, &child, present, found);
    }
}

/// A pod, claim, Job or BroadcastJob template.
fn is_template(name: &str) -> bool {
    name == "template" || name.ends_with("Template") || name.ends_with("Templates")
}

#[test]
fn every_object_with_defaulted_fields_is_defaulted_itself() {
    let mut missing = Vec::new();
    for crd in crds() {
        for version in &crd.spec.versions {
            let Some(schema) = version.schema.as_ref() else {
                continue;
            };
            let schema = serde_json::to_value(&schema.open_api_v3_schema).expect("serializes");
            let Some(spec) = schema.get("properties").and_then(|p| p.get("spec")) else {
                continue;
            };
            let mut found = Vec::new();
            // The spec itself is required where it has defaults: start from its fields.
            undefaulted_parents(spec, ".spec", true, &mut found);
            let kind = &crd.spec.names.kind;
            missing
                .extend((found.into_iter()).map(|path| format!("{kind} {}: {path}", version.name)));
        }
    }
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "no default on {missing:#?}");
}

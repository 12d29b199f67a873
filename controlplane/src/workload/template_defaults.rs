//! A pod template's identity without the defaults the CRD schema fills in.
//!
//! The CRDs carry OpenKruise's template defaults as structural `default:`s
//! (`api::pod_schema`), and the apiserver applies them on read as well as on write: the
//! moment a CRD with new defaults is applied, every stored template reads back with more
//! fields. Revision data hashed or compared as read would then name a new revision and roll
//! every pod, and a template that only spells out a default would differ from one that
//! does not. So revision data is written, compared and diffed in its canonical form: every
//! field whose value equals the default its schema declares is removed (after its own
//! fields are), which makes a template and its defaulted form the same. Older revisions
//! written before the defaults, with or without defaults spelled out, compare equal too.
//!
//! The defaults are read from the CloneSet CRD's own schema, so a default added there is
//! ignored here without a second list to keep in step.

use std::sync::LazyLock;

use kube::CustomResourceExt as _;
use serde::Serialize;
use serde_json::Value;

use crate::api::CloneSet;

#[cfg(test)]
#[path = "template_defaults_tests.rs"]
mod tests;

/// The schemas of a workload's `spec.template` and `spec.volumeClaimTemplates`.
struct TemplateSchemas {
    template: Value,
    claims: Value,
}

static SCHEMAS: LazyLock<TemplateSchemas> = LazyLock::new(|| {
    let crd = CloneSet::crd();
    let spec = crd
        .spec
        .versions
        .iter()
        .find(|version| version.storage)
        .and_then(|version| version.schema.as_ref())
        .and_then(|schema| serde_json::to_value(&schema.open_api_v3_schema).ok())
        .and_then(|schema| schema.pointer("/properties/spec/properties").cloned())
        .unwrap_or(Value::Null);
    TemplateSchemas {
        template: spec.get("template").cloned().unwrap_or(Value::Null),
        claims: spec
            .get("volumeClaimTemplates")
            .cloned()
            .unwrap_or(Value::Null),
    }
});

/// Removes from `value` every field (at any depth reached through `properties` and
/// `items`) whose value equals the `default` its schema declares. Children go first, so an
/// object defaulted to `{}` whose own fields are all defaults goes too.
pub fn strip_defaults(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(fields) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (name, property) in properties {
                let Some(field) = fields.get_mut(name) else {
                    continue;
                };
                strip_defaults(field, property);
                if property
                    .get("default")
                    .is_some_and(|default| default == field)
                {
                    fields.remove(name);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    strip_defaults(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

/// Strips the defaults from a revision's `spec`: `{"template": ..., "volumeClaimTemplates":
/// [...]}`.
pub fn strip_revision_spec(spec: &mut Value) {
    if let Some(template) = spec.get_mut("template") {
        strip_defaults(template, &SCHEMAS.template);
    }
    if let Some(claims) = spec.get_mut("volumeClaimTemplates") {
        strip_defaults(claims, &SCHEMAS.claims);
    }
}

/// Strips the defaults from a template's pod spec (`template.spec`).
pub fn strip_pod_spec(pod_spec: &mut Value) {
    if let Some(schema) = SCHEMAS.template.pointer("/properties/spec") {
        strip_defaults(pod_spec, schema);
    }
}

/// Whether two pod templates are the same once their defaults are stripped (one may come
/// from revision data, stored stripped, the other from the object as read, defaulted).
pub fn same_template<T: Serialize>(a: &T, b: &T) -> bool {
    stripped(a, &SCHEMAS.template) == stripped(b, &SCHEMAS.template)
}

/// Whether two lists of claim templates are the same once their defaults are stripped.
pub fn same_claim_templates<T: Serialize>(a: &[T], b: &[T]) -> bool {
    stripped(a, &SCHEMAS.claims) == stripped(b, &SCHEMAS.claims)
}

fn stripped<T: Serialize + ?Sized>(value: &T, schema: &Value) -> Option<Value> {
    let mut value = serde_json::to_value(value).ok()?;
    strip_defaults(&mut value, schema);
    Some(value)
}

/// Whether two ControllerRevisions' data hold the same template once defaults are
/// stripped. Data that is not JSON is compared byte for byte.
pub fn same_revision_data(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    match (canonical_revision(a), canonical_revision(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

fn canonical_revision(data: &[u8]) -> Option<Value> {
    let mut value: Value = serde_json::from_slice(data).ok()?;
    if let Some(spec) = value.get_mut("spec") {
        strip_revision_spec(spec);
    }
    Some(value)
}

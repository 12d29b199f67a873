//! Bounds every CRD's schema carries, added after generation by [`bound`] (which
//! [`crds`](super::crds) applies to each CRD), so they reach every kind, every version and
//! every nested type without each field having to ask:
//!
//! - An `int32` integer carries `minimum` and `maximum` of an i32. The apiserver ignores
//!   `format` (`int32` is not among the formats it validates), so without them a spec
//!   with `replicas: 2147483648` is stored, and every list of the kind then fails to
//!   decode. An `int64` needs none: the apiserver reads a JSON number that does not fit
//!   an int64 as a float, and `type: integer` refuses a float beyond 2^53 (kube-openapi's
//!   `isFloat64AnInteger`). Int-or-string fields are bounded by their CEL rules
//!   (`common::INT_OR_PERCENT_RULE`); `tests_bounds` checks both for every node.
//! - A label selector (an object with `matchLabels` or `matchExpressions`) refuses keys
//!   that are not label keys ([`LABEL_KEY_REGEX`]) and values that are not label values,
//!   naming the key, and is bounded (64 terms, 64 values, key and value lengths) so its
//!   rules stay in the apiserver's CEL cost budget.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Map, Value, json};

/// Kubernetes' label key (`IsQualifiedName`): an optional DNS-1123 subdomain prefix and
/// `/`, then a name of 1 to 63 characters, alphanumeric at both ends with `-`, `_` and `.`
/// between. The prefix's limit of 253 characters is [`LABEL_KEY_PREFIX_RULE`]'s.
pub const LABEL_KEY_REGEX: &str = "^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";
/// The prefix of a label key is at most 253 characters: the index of its `/`, or -1.
const LABEL_KEY_PREFIX_LIMIT: usize = 253;
/// Kubernetes' label value: empty, or 1 to 63 characters, alphanumeric at both ends.
pub const LABEL_VALUE_REGEX: &str = "^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$";
/// Kubernetes' limit on a label key: a 253-character prefix, '/', a 63-character name.
const LABEL_KEY_MAX: u64 = 317;
/// Kubernetes' limit on a label value.
const LABEL_VALUE_MAX: u64 = 63;
/// A bound on selector terms and values, far above real use, for the CEL cost estimate.
const MAX_TERMS: u64 = 64;

/// The message of a selector key that is not a label key, after the key; the apiserver
/// prefixes the path. Inside a CEL string literal, so without single quotes.
pub const LABEL_KEY_MESSAGE: &str = "is not a label key: a label key is an optional DNS subdomain prefix of at most 253 \
characters and a slash, then a name of 1 to 63 letters, digits, dashes, underscores and dots that begins and ends \
with a letter or digit";

/// CEL: the label key `k` is a label key.
fn label_key_is_valid(k: &str) -> String {
    format!("({k}.matches(r'{LABEL_KEY_REGEX}') && {k}.indexOf('/') <= {LABEL_KEY_PREFIX_LIMIT})")
}

/// The rule on a selector's `matchLabels` map: every key is a label key, the first that
/// is not named in the message.
pub fn match_labels_key_rule() -> Value {
    let valid = label_key_is_valid("k");
    json!({
        "rule": format!("self.all(k, {valid})"),
        "messageExpression": format!("'key ' + self.filter(k, !{valid})[0] + ' {LABEL_KEY_MESSAGE}'"),
    })
}

/// The rule on one `matchExpressions` requirement: its key's prefix is at most 253
/// characters. The rest of the key's syntax is its `pattern` ([`LABEL_KEY_REGEX`]), which
/// costs nothing of the CEL budget; the apiserver's refusal quotes the key.
pub fn requirement_key_rule() -> Value {
    json!({
        "rule": format!("self.key.indexOf('/') <= {LABEL_KEY_PREFIX_LIMIT}"),
        "messageExpression": format!("'key ' + self.key + ' {LABEL_KEY_MESSAGE}'"),
        "fieldPath": ".key",
    })
}

/// `crd` with the bounds of this module in every version's schema.
pub fn bound(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        // The schema is this crate's own; it always serializes and reads back.
        let Ok(mut value) = serde_json::to_value(&*schema) else {
            continue;
        };
        bound_node(&mut value);
        if let Ok(bounded) = serde_json::from_value(value) {
            *schema = bounded;
        }
    }
    crd
}

/// Adds the bounds to `node` and every schema below it.
fn bound_node(node: &mut Value) {
    let Some(object) = node.as_object_mut() else {
        return;
    };
    if object.get("type").and_then(Value::as_str) == Some("integer")
        && let Some((min, max)) = object
            .get("format")
            .and_then(Value::as_str)
            .and_then(format_range)
    {
        tighten(object, "minimum", min, f64::max);
        tighten(object, "maximum", max, f64::min);
    }
    if let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) {
        bound_selector(properties);
    }
    for key in ["properties", "patternProperties", "definitions"] {
        if let Some(children) = object.get_mut(key).and_then(Value::as_object_mut) {
            children.values_mut().for_each(bound_node);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(child) = object.get_mut(key) {
            bound_node(child);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(children) = object.get_mut(key).and_then(Value::as_array_mut) {
            children.iter_mut().for_each(bound_node);
        }
    }
}

/// The range of the Rust integer types schemars writes as `format`, for those narrower
/// than the apiserver's i64. (`uint64` gets its `minimum: 0` from schemars; its top half
/// cannot be written, as the apiserver holds an i64.)
fn format_range(format: &str) -> Option<(f64, f64)> {
    let range = |min: i64, max: i64| {
        #[allow(clippy::cast_precision_loss)]
        Some((min as f64, max as f64))
    };
    match format {
        "int8" => range(i8::MIN.into(), i8::MAX.into()),
        "int16" => range(i16::MIN.into(), i16::MAX.into()),
        "int32" => range(i32::MIN.into(), i32::MAX.into()),
        "uint8" => range(0, u8::MAX.into()),
        "uint16" => range(0, u16::MAX.into()),
        "uint32" => range(0, u32::MAX.into()),
        _ => None,
    }
}

/// Sets `key` to `limit`, or keeps a tighter value already there (`pick` chooses).
fn tighten(object: &mut Map<String, Value>, key: &str, limit: f64, pick: fn(f64, f64) -> f64) {
    let value = object
        .get(key)
        .and_then(Value::as_f64)
        .map_or(limit, |existing| pick(existing, limit));
    // Whole numbers within ±2^32 are exact in f64 and written as integers.
    #[allow(clippy::cast_possible_truncation)]
    object.insert(key.to_owned(), Value::from(value as i64));
}

/// If `properties` are a label selector's, bounds them and adds the key rules.
fn bound_selector(properties: &mut Map<String, Value>) {
    if let Some(labels) = properties
        .get_mut("matchLabels")
        .and_then(Value::as_object_mut)
        .filter(|m| m.contains_key("additionalProperties"))
    {
        cap(labels, "maxProperties", MAX_TERMS);
        if let Some(value) = labels
            .get_mut("additionalProperties")
            .and_then(Value::as_object_mut)
        {
            cap(value, "maxLength", LABEL_VALUE_MAX);
            value.insert("pattern".into(), LABEL_VALUE_REGEX.into());
        }
        add_rule(labels, match_labels_key_rule());
    }
    let Some(expressions) = properties
        .get_mut("matchExpressions")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    cap(expressions, "maxItems", MAX_TERMS);
    let Some(requirement) = expressions.get_mut("items").and_then(Value::as_object_mut) else {
        return;
    };
    let item_properties = requirement
        .get_mut("properties")
        .and_then(Value::as_object_mut);
    if let Some(item_properties) = item_properties {
        if let Some(key) = item_properties
            .get_mut("key")
            .and_then(Value::as_object_mut)
        {
            cap(key, "maxLength", LABEL_KEY_MAX);
            key.insert("pattern".into(), LABEL_KEY_REGEX.into());
        }
        if let Some(values) = item_properties
            .get_mut("values")
            .and_then(Value::as_object_mut)
        {
            cap(values, "maxItems", MAX_TERMS);
            if let Some(value) = values.get_mut("items").and_then(Value::as_object_mut) {
                cap(value, "maxLength", LABEL_VALUE_MAX);
                value.insert("pattern".into(), LABEL_VALUE_REGEX.into());
            }
        }
    }
    add_rule(requirement, requirement_key_rule());
}

/// Sets the bound `key` to `limit` unless a tighter one is there.
fn cap(object: &mut Map<String, Value>, key: &str, limit: u64) {
    let value = object
        .get(key)
        .and_then(Value::as_u64)
        .map_or(limit, |existing| existing.min(limit));
    object.insert(key.to_owned(), value.into());
}

/// Appends `rule` to the node's `x-kubernetes-validations` unless it is there.
fn add_rule(object: &mut Map<String, Value>, rule: Value) {
    let rules = object
        .entry("x-kubernetes-validations")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(rules) = rules.as_array_mut()
        && !rules.contains(&rule)
    {
        rules.push(rule);
    }
}

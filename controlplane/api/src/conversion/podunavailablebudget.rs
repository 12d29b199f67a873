//! PodUnavailableBudget between `policy.kruise.io/v1alpha1` (stored) and `v1beta1` (pure).
//!
//! The two versions differ only where OpenKruise 1.9's `v1beta1` promoted two `v1alpha1`
//! annotations into spec fields (its `apis/policy/v1alpha1/podunavailablebudget_conversion.go`):
//! `kruise.io/pub-protect-operations` (comma-separated) ↔ `spec.protectOperations`, and
//! `pub.kruise.io/protect-total-replicas` (a decimal int32) ↔ `spec.protectTotalReplicas`.
//! Everything else, unknown fields included, is passed through untouched as JSON.
//!
//! The rules, each to keep `v1alpha1` → `v1beta1` → `v1alpha1` exact and `v1beta1`'s fields
//! the truth once written in `v1beta1`:
//! - to `v1beta1`: a field is set from its annotation when the annotation holds a valid
//!   value; the annotations stay (as OpenKruise keeps `metadata`). A value that does not
//!   parse (an unknown operation, `"abc"` replicas) sets no field rather than failing: the
//!   control plane never read these annotations, so stored budgets may carry any text,
//!   and one such budget must not make every `v1beta1` list of its namespace fail.
//! - to `v1alpha1`: the field wins. An annotation that already means the field's value is
//!   left as written; one that says otherwise is rewritten to the field's value, or
//!   removed when the field is unset (as OpenKruise's `ConvertFrom` does).

use serde_json::{Map, Value};

use super::ConversionError;

/// The `v1alpha1` annotation `spec.protectOperations` comes from.
pub const PROTECT_OPERATIONS_ANNOTATION: &str = "kruise.io/pub-protect-operations";
/// The `v1alpha1` annotation `spec.protectTotalReplicas` comes from.
pub const PROTECT_TOTAL_REPLICAS_ANNOTATION: &str = "pub.kruise.io/protect-total-replicas";
/// The operations a budget can protect (OpenKruise's `PubOperation` values).
pub const OPERATIONS: [&str; 4] = ["DELETE", "UPDATE", "EVICT", "RESIZE"];

const PROTECT_OPERATIONS_FIELD: &str = "protectOperations";
const PROTECT_TOTAL_REPLICAS_FIELD: &str = "protectTotalReplicas";

/// What a budget says about what it protects, in either version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Protection {
    operations: Option<Vec<String>>,
    total_replicas: Option<i32>,
}

/// `object` (a `v1alpha1` budget) as `v1beta1`.
pub fn to_v1beta1(mut object: Value, api_version: &str) -> Result<Value, ConversionError> {
    let from_annotations = Protection {
        operations: annotation(&object, PROTECT_OPERATIONS_ANNOTATION)?.and_then(parse_operations),
        total_replicas: annotation(&object, PROTECT_TOTAL_REPLICAS_ANNOTATION)?
            .and_then(parse_total_replicas),
    };
    let fields = [
        (
            PROTECT_OPERATIONS_FIELD,
            from_annotations.operations.map(Value::from),
        ),
        (
            PROTECT_TOTAL_REPLICAS_FIELD,
            from_annotations.total_replicas.map(Value::from),
        ),
    ];
    let anything_to_set = fields.iter().any(|(_, value)| value.is_some());
    if let Some(spec) = spec_mut(&mut object, anything_to_set)? {
        for (name, value) in fields {
            set_or_remove(spec, name, value);
        }
    }
    set_api_version(&mut object, api_version);
    Ok(object)
}

/// `object` (a `v1beta1` budget) as `v1alpha1`.
pub fn to_v1alpha1(mut object: Value, api_version: &str) -> Result<Value, ConversionError> {
    let fields = Protection {
        operations: operations_field(&object)?,
        total_replicas: total_replicas_field(&object)?,
    };
    if let Some(spec) = spec_mut(&mut object, false)? {
        spec.remove(PROTECT_OPERATIONS_FIELD);
        spec.remove(PROTECT_TOTAL_REPLICAS_FIELD);
    }
    let operations = annotation(&object, PROTECT_OPERATIONS_ANNOTATION)?.map(str::to_owned);
    if operations.as_deref().and_then(parse_operations) != fields.operations {
        let value = fields.operations.map(|ops| ops.join(","));
        set_annotation(&mut object, PROTECT_OPERATIONS_ANNOTATION, value)?;
    }
    let replicas = annotation(&object, PROTECT_TOTAL_REPLICAS_ANNOTATION)?.map(str::to_owned);
    if replicas.as_deref().and_then(parse_total_replicas) != fields.total_replicas {
        let value = fields.total_replicas.map(|n| n.to_string());
        set_annotation(&mut object, PROTECT_TOTAL_REPLICAS_ANNOTATION, value)?;
    }
    set_api_version(&mut object, api_version);
    Ok(object)
}

/// The operations a `kruise.io/pub-protect-operations` value names (`"DELETE, EVICT"`),
/// or none when it names none or one OpenKruise does not know.
fn parse_operations(value: &str) -> Option<Vec<String>> {
    let operations: Vec<String> = value
        .split(',')
        .map(str::trim)
        .filter(|op| !op.is_empty())
        .map(str::to_owned)
        .collect();
    let known = operations
        .iter()
        .all(|op| OPERATIONS.contains(&op.as_str()));
    (known && !operations.is_empty()).then_some(operations)
}

/// A `pub.kruise.io/protect-total-replicas` value as OpenKruise parses it (decimal int32).
fn parse_total_replicas(value: &str) -> Option<i32> {
    value.parse().ok()
}

/// `spec.protectOperations` of a `v1beta1` budget; an empty list is none (OpenKruise's
/// "when empty, the defaults are protected").
fn operations_field(object: &Value) -> Result<Option<Vec<String>>, ConversionError> {
    let Some(value) = field(object, PROTECT_OPERATIONS_FIELD) else {
        return Ok(None);
    };
    let not_a_list = || ConversionError::Malformed {
        field: "spec.protectOperations".into(),
        expected: format!("a list of operations ({})", OPERATIONS.join(", ")),
    };
    let items = value.as_array().ok_or_else(not_a_list)?;
    let mut operations = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match item.as_str() {
            Some(op) if OPERATIONS.contains(&op) => operations.push(op.to_owned()),
            _ => {
                return Err(ConversionError::Malformed {
                    field: format!("spec.protectOperations[{index}]"),
                    expected: format!("one of {}", OPERATIONS.join(", ")),
                });
            }
        }
    }
    Ok((!operations.is_empty()).then_some(operations))
}

/// `spec.protectTotalReplicas` of a `v1beta1` budget.
fn total_replicas_field(object: &Value) -> Result<Option<i32>, ConversionError> {
    let Some(value) = field(object, PROTECT_TOTAL_REPLICAS_FIELD) else {
        return Ok(None);
    };
    value
        .as_i64()
        .and_then(|n| i32::try_from(n).ok())
        .map(Some)
        .ok_or_else(|| ConversionError::Malformed {
            field: "spec.protectTotalReplicas".into(),
            expected: "an integer of at most 2147483647".into(),
        })
}

/// `spec.<name>`, absent when unset or null.
fn field<'a>(object: &'a Value, name: &str) -> Option<&'a Value> {
    object
        .get("spec")
        .and_then(|spec| spec.get(name))
        .filter(|value| !value.is_null())
}

/// The budget's `spec`; made when it has none and `create` says so, else none.
fn spec_mut(
    object: &mut Value,
    create: bool,
) -> Result<Option<&mut Map<String, Value>>, ConversionError> {
    let root = object.as_object_mut().ok_or(ConversionError::NotAnObject)?;
    if create {
        let spec = root.entry("spec").or_insert(Value::Null);
        if spec.is_null() {
            *spec = Value::Object(Map::new());
        }
    }
    match root.get_mut("spec") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(spec)) => Ok(Some(spec)),
        Some(_) => Err(ConversionError::Malformed {
            field: "spec".into(),
            expected: "an object".into(),
        }),
    }
}

/// The annotation `key`, if the budget has it.
fn annotation<'a>(object: &'a Value, key: &str) -> Result<Option<&'a str>, ConversionError> {
    let Some(annotations) = object.pointer("/metadata/annotations") else {
        return Ok(None);
    };
    if annotations.is_null() {
        return Ok(None);
    }
    let annotations = annotations
        .as_object()
        .ok_or_else(|| ConversionError::Malformed {
            field: "metadata.annotations".into(),
            expected: "a map of strings".into(),
        })?;
    match annotations.get(key) {
        None => Ok(None),
        Some(Value::String(value)) => Ok(Some(value)),
        Some(_) => Err(ConversionError::Malformed {
            field: format!("metadata.annotations[{key}]"),
            expected: "a string".into(),
        }),
    }
}

/// Sets the annotation `key` to `value`, or removes it when `value` is none (and the
/// annotations with it when it was the last).
fn set_annotation(
    object: &mut Value,
    key: &str,
    value: Option<String>,
) -> Result<(), ConversionError> {
    let root = object.as_object_mut().ok_or(ConversionError::NotAnObject)?;
    let metadata = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| ConversionError::Malformed {
            field: "metadata".into(),
            expected: "an object".into(),
        })?;
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if annotations.is_null() {
        *annotations = Value::Object(Map::new());
    }
    let map = annotations
        .as_object_mut()
        .ok_or_else(|| ConversionError::Malformed {
            field: "metadata.annotations".into(),
            expected: "a map of strings".into(),
        })?;
    set_or_remove(map, key, value.map(Value::from));
    if map.is_empty() {
        metadata.remove("annotations");
    }
    Ok(())
}

fn set_or_remove(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    match value {
        Some(value) => {
            map.insert(key.to_owned(), value);
        }
        None => {
            map.remove(key);
        }
    }
}

fn set_api_version(object: &mut Value, api_version: &str) {
    if let Some(root) = object.as_object_mut() {
        root.insert("apiVersion".into(), api_version.into());
    }
}

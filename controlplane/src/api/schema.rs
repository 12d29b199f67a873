//! Hand-written schemas for the embedded pod and PVC templates.
//!
//! Like OpenKruise, the templates are not validated against the full Pod schema here
//! (the Pod is validated when it is created), so unknown fields are preserved. Unlike
//! OpenKruise, the fields the CEL rules read are declared: template labels, container
//! names and images. CEL cannot see preserved-but-undeclared fields, and the full
//! k8s-openapi Pod schema would make the CRD large and the rules' estimated cost exceed
//! the apiserver's budget.

use schemars::{Schema, SchemaGenerator, json_schema};

use super::image_reference as reference;
use super::workload_rules as rules;

/// Kubernetes' limit on a label value; declared so the CEL cost estimate stays in budget.
const LABEL_VALUE_MAX: u32 = 63;
/// Kubernetes' limit on a label key: a 253-character DNS prefix, '/', a 63-character name.
const LABEL_KEY_MAX: u32 = 317;
const IMAGE_GRAMMAR_MESSAGE: &str = "must be an image reference [registry[:port]/]path[:tag][@sha256:<64 hex>], with a lowercase path";
const IMAGE_HEX_NAME_MESSAGE: &str =
    "must not have a 64-character hexadecimal name, which reads as an image ID";
const IMAGE_NAME_LENGTH_MESSAGE: &str =
    "must have a name (registry and path) of at most 255 characters";
/// A bound on selector terms and containers, far above real use, for the CEL cost estimate.
const MAX_TERMS: u32 = 64;

fn string_map(description: &str) -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "description": description,
        "additionalProperties": { "type": "string" }
    })
}

fn label_map(description: &str) -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "description": description,
        "maxProperties": MAX_TERMS,
        "additionalProperties": { "type": "string", "maxLength": LABEL_VALUE_MAX }
    })
}

/// A `metav1.LabelSelector`, bounded for the CEL cost estimate.
pub(crate) fn label_selector(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "Selector is a label query over pods that should match the replica count. It must match the pod template's labels.",
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "matchLabels": label_map("Labels the pods must carry with these values."),
            "matchExpressions": {
                "type": "array",
                "description": "Label selector requirements, ANDed.",
                "maxItems": MAX_TERMS,
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "x-kubernetes-validations": [
                        { "rule": rules::REQUIREMENT_VALUES_PRESENT, "message": rules::REQUIREMENT_VALUES_PRESENT_MESSAGE },
                        { "rule": rules::REQUIREMENT_VALUES_ABSENT, "message": rules::REQUIREMENT_VALUES_ABSENT_MESSAGE }
                    ],
                    "properties": {
                        "key": { "type": "string", "description": "The label key.", "maxLength": LABEL_KEY_MAX },
                        "operator": { "type": "string", "description": "In, NotIn, Exists or DoesNotExist.", "enum": ["In", "NotIn", "Exists", "DoesNotExist"] },
                        "values": {
                            "type": "array",
                            "description": "Values for In and NotIn; empty for Exists and DoesNotExist.",
                            "maxItems": MAX_TERMS,
                            "items": { "type": "string", "maxLength": LABEL_VALUE_MAX }
                        }
                    }
                }
            }
        }
    })
}

fn object_meta() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "description": "Standard object metadata of the objects created from this template.",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "name": { "type": "string", "description": "Name of the object." },
            "labels": label_map("Labels of the created objects."),
            "annotations": string_map("Annotations of the created objects.")
        }
    })
}

/// A list of `v1.Container`s, each with a name and an image reference in the agent's
/// grammar (the apiserver requires the image in a Pod; refusing it here means a template
/// without one never starts a rollout).
fn containers(description: &str, min_items: u32) -> serde_json::Value {
    serde_json::json!({
        "type": "array",
        "description": description,
        "minItems": min_items,
        "maxItems": MAX_TERMS,
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "required": ["name", "image"],
            "properties": {
                "name": { "type": "string", "minLength": 1, "maxLength": LABEL_VALUE_MAX, "description": "Name of the container, unique in the pod." },
                "image": {
                    "type": "string",
                    "maxLength": reference::REFERENCE_MAX_LENGTH,
                    "description": "Container image reference: [registry[:port]/]path[:tag][@digest].",
                    "x-kubernetes-validations": [
                        { "rule": reference::FIELD_GRAMMAR_RULE, "message": IMAGE_GRAMMAR_MESSAGE },
                        { "rule": reference::FIELD_HEX_NAME_RULE, "message": IMAGE_HEX_NAME_MESSAGE },
                        { "rule": reference::FIELD_NAME_LENGTH_RULE, "message": IMAGE_NAME_LENGTH_MESSAGE }
                    ]
                }
            }
        }
    })
}

/// A `v1.PodTemplateSpec`: metadata with labels, and a pod spec with named containers.
pub(crate) fn pod_template(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "Template describes the pods that will be created.",
        "x-kubernetes-preserve-unknown-fields": true,
        "required": ["spec"],
        "properties": {
            "metadata": object_meta(),
            "spec": {
                "type": "object",
                "description": "Specification of the desired behavior of the pod (a core/v1 PodSpec).",
                "x-kubernetes-preserve-unknown-fields": true,
                "required": ["containers"],
                "properties": {
                    "containers": containers("Containers of the pod (core/v1 Container). At least one.", 1),
                    "initContainers": containers("Init containers of the pod (core/v1 Container), run in order before the containers.", 0)
                }
            }
        }
    })
}

/// A list of `v1.PersistentVolumeClaim` templates, each named by its metadata.
pub(crate) fn pvc_templates(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "VolumeClaimTemplates is a list of claims that pods are allowed to reference; each pod gets its own PVC per template, named <template>-<pod name>. The PVC is deleted with its pod when the CloneSet deletes the pod.",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {
                "metadata": object_meta(),
                "spec": {
                    "type": "object",
                    "description": "Spec of the claims (a core/v1 PersistentVolumeClaimSpec).",
                    "x-kubernetes-preserve-unknown-fields": true
                }
            }
        }
    })
}

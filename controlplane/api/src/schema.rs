//! Hand-written schemas for the embedded pod and PVC templates.
//!
//! Like OpenKruise, the templates are not validated against the full Pod schema here
//! (the Pod is validated when it is created), so unknown fields are preserved. Unlike
//! OpenKruise, the fields the CEL rules read are declared (template labels, container
//! names and images), and so are the fields that hold OpenKruise's template defaults
//! (`pod_schema`). CEL cannot see preserved-but-undeclared fields, and the full
//! k8s-openapi Pod schema would make the CRD large and the rules' estimated cost exceed
//! the apiserver's budget.

use schemars::{Schema, SchemaGenerator, json_schema};

use super::pod_schema;
use super::workload_rules as rules;

/// Kubernetes' limit on a label value; declared so the CEL cost estimate stays in budget.
const LABEL_VALUE_MAX: u32 = 63;
/// Kubernetes' limit on a label key: a 253-character DNS prefix, '/', a 63-character name.
const LABEL_KEY_MAX: u32 = 317;
/// A bound on selector terms, far above real use, for the CEL cost estimate.
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

/// A `v1.PodTemplateSpec`: metadata with labels, and a pod spec with named containers.
pub(crate) fn pod_template(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "Template describes the pods that will be created.",
        "x-kubernetes-preserve-unknown-fields": true,
        "required": ["spec"],
        "properties": {
            "metadata": object_meta(),
            "spec": pod_schema::pod_spec()
        }
    })
}

/// A bound on claim templates per workload, far above real use, for the CEL cost
/// estimate of the rules that compare them.
const MAX_CLAIM_TEMPLATES: u32 = 64;
/// Kubernetes' limit on an object name (a DNS subdomain).
const NAME_MAX: u32 = 253;

/// A list of `v1.PersistentVolumeClaim` templates, each named by its metadata.
pub(crate) fn pvc_templates(_: &mut SchemaGenerator) -> Schema {
    claim_templates(
        "VolumeClaimTemplates is a list of claims that pods are allowed to reference; each pod gets its own PVC per template, named <template>-<pod name>. The PVC is deleted with its pod when the CloneSet deletes the pod.",
    )
}

/// Advanced StatefulSet's claim templates: the claims outlive pod updates.
pub(crate) fn statefulset_pvc_templates(_: &mut SchemaGenerator) -> Schema {
    claim_templates(
        "VolumeClaimTemplates is a list of claims that pods are allowed to reference; each pod gets its own PVC per template, named <template>-<statefulset name>-<ordinal>, created before the pod and kept across pod updates. Templates cannot be added or removed after creation.",
    )
}

fn claim_templates(description: &str) -> Schema {
    let mut metadata = object_meta();
    metadata["properties"]["name"]["maxLength"] = NAME_MAX.into();
    json_schema!({
        "type": "array",
        "description": description,
        "maxItems": MAX_CLAIM_TEMPLATES,
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {
                "metadata": metadata,
                "spec": {
                    "type": "object",
                    "description": "Spec of the claims (a core/v1 PersistentVolumeClaimSpec).",
                    "x-kubernetes-preserve-unknown-fields": true
                },
                "status": pod_schema::claim_template_status()
            }
        }
    })
}

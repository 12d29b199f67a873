use serde_json::{Value, json};

use super::podunavailablebudget::{
    PROTECT_OPERATIONS_ANNOTATION, PROTECT_TOTAL_REPLICAS_ANNOTATION,
};
use super::*;

const OPS: &str = PROTECT_OPERATIONS_ANNOTATION;
const TOTAL: &str = PROTECT_TOTAL_REPLICAS_ANNOTATION;

fn alpha(annotations: Value) -> Value {
    let mut object = json!({
        "apiVersion": ALPHA,
        "kind": BUDGET_KIND,
        "metadata": { "name": "web", "namespace": "shop" },
        "spec": { "selector": { "matchLabels": { "app": "web" } }, "maxUnavailable": 1 },
        "status": { "unavailableAllowed": 1, "totalReplicas": 3 },
    });
    if !annotations.is_null() {
        object["metadata"]["annotations"] = annotations;
    }
    object
}

fn beta(fields: Value, annotations: Value) -> Value {
    let mut object = alpha(annotations);
    object["apiVersion"] = BETA.into();
    if let (Some(spec), Some(fields)) = (object["spec"].as_object_mut(), fields.as_object()) {
        spec.extend(fields.clone());
    }
    object
}

fn spec_fields(object: &Value) -> (Value, Value) {
    (
        object["spec"]["protectOperations"].clone(),
        object["spec"]["protectTotalReplicas"].clone(),
    )
}

#[test]
fn annotations_become_fields_in_v1beta1() {
    let cases = [
        (Value::Null, Value::Null, Value::Null),
        (
            json!({ OPS: "DELETE,EVICT" }),
            json!(["DELETE", "EVICT"]),
            Value::Null,
        ),
        (
            json!({ OPS: " DELETE , UPDATE ,," }),
            json!(["DELETE", "UPDATE"]),
            Value::Null,
        ),
        (json!({ OPS: "RESIZE" }), json!(["RESIZE"]), Value::Null),
        (json!({ OPS: "" }), Value::Null, Value::Null),
        // Unknown text sets no field rather than failing every read of the namespace.
        (json!({ OPS: "DELETE,REBOOT" }), Value::Null, Value::Null),
        (json!({ TOTAL: "10" }), Value::Null, json!(10)),
        (json!({ TOTAL: "abc" }), Value::Null, Value::Null),
        (json!({ TOTAL: "4294967296" }), Value::Null, Value::Null),
        (
            json!({ OPS: "EVICT", TOTAL: "3" }),
            json!(["EVICT"]),
            json!(3),
        ),
    ];
    for (annotations, operations, total) in cases {
        let converted = convert(alpha(annotations.clone()), BETA).unwrap();
        assert_eq!(converted["apiVersion"], BETA, "{annotations}");
        assert_eq!(
            spec_fields(&converted),
            (operations, total),
            "{annotations}"
        );
        // The annotations stay, as OpenKruise keeps `metadata` whole.
        assert_eq!(
            converted["metadata"]
                .get("annotations")
                .cloned()
                .unwrap_or(Value::Null),
            annotations
        );
        assert_eq!(converted["status"], alpha(Value::Null)["status"]);
    }
}

#[test]
fn fields_become_annotations_in_v1alpha1_and_the_field_wins() {
    let cases = [
        ("neither", json!({}), Value::Null, Value::Null),
        (
            "operations",
            json!({ "protectOperations": ["DELETE", "EVICT"] }),
            Value::Null,
            json!({ OPS: "DELETE,EVICT" }),
        ),
        (
            "total",
            json!({ "protectTotalReplicas": 5 }),
            Value::Null,
            json!({ TOTAL: "5" }),
        ),
        (
            "both fields",
            json!({ "protectOperations": ["UPDATE"], "protectTotalReplicas": 2 }),
            Value::Null,
            json!({ OPS: "UPDATE", TOTAL: "2" }),
        ),
        (
            "an empty list is none",
            json!({ "protectOperations": [] }),
            Value::Null,
            Value::Null,
        ),
        (
            "both set, differing: the field wins",
            json!({ "protectOperations": ["EVICT"], "protectTotalReplicas": 3 }),
            json!({ OPS: "DELETE", TOTAL: "4" }),
            json!({ OPS: "EVICT", TOTAL: "3" }),
        ),
        (
            "both set, agreeing: kept as written",
            json!({ "protectOperations": ["DELETE", "EVICT"], "protectTotalReplicas": 7 }),
            json!({ OPS: "DELETE, EVICT", TOTAL: "7" }),
            json!({ OPS: "DELETE, EVICT", TOTAL: "7" }),
        ),
        (
            "annotation without its field is removed",
            json!({}),
            json!({ OPS: "DELETE", TOTAL: "4", "team": "a" }),
            json!({ "team": "a" }),
        ),
        (
            "an annotation that means nothing stays",
            json!({}),
            json!({ OPS: "", TOTAL: "abc" }),
            json!({ OPS: "", TOTAL: "abc" }),
        ),
        (
            "other annotations stay",
            json!({ "protectTotalReplicas": 1 }),
            json!({ "team": "a" }),
            json!({ "team": "a", TOTAL: "1" }),
        ),
    ];
    for (case, fields, before, after) in cases {
        let converted = convert(beta(fields, before), ALPHA).unwrap();
        assert_eq!(converted["apiVersion"], ALPHA, "{case}");
        assert_eq!(
            converted["metadata"]
                .get("annotations")
                .cloned()
                .unwrap_or(Value::Null),
            after,
            "{case}"
        );
        assert_eq!(
            spec_fields(&converted),
            (Value::Null, Value::Null),
            "{case}: no v1beta1 field is stored"
        );
        assert_eq!(converted["spec"]["maxUnavailable"], 1, "{case}");
    }
}

#[test]
fn v1alpha1_through_v1beta1_and_back_is_exact() {
    let annotations = [
        Value::Null,
        json!({ OPS: "DELETE,EVICT", TOTAL: "10" }),
        json!({ OPS: " EVICT ,DELETE,", TOTAL: "007" }),
        json!({ OPS: "", TOTAL: "" }),
        json!({ OPS: "REBOOT", TOTAL: "many" }),
        json!({ "team": "a" }),
        json!({}),
    ];
    for annotations in annotations {
        let original = alpha(annotations.clone());
        let there = convert(original.clone(), BETA).unwrap();
        assert_eq!(convert(there, ALPHA).unwrap(), original, "{annotations}");
    }
}

#[test]
fn v1beta1_through_v1alpha1_and_back_keeps_the_fields() {
    let fields = [
        json!({}),
        json!({ "protectOperations": ["DELETE", "UPDATE", "EVICT", "RESIZE"] }),
        json!({ "protectTotalReplicas": 2147483647 }),
        json!({ "protectOperations": ["EVICT"], "protectTotalReplicas": 1 }),
    ];
    for fields in fields {
        let original = beta(fields.clone(), json!({ OPS: "UPDATE" }));
        let back = convert(convert(original.clone(), ALPHA).unwrap(), BETA).unwrap();
        assert_eq!(spec_fields(&back), spec_fields(&original), "{fields}");
        assert_eq!(back["spec"]["selector"], original["spec"]["selector"]);
    }
}

#[test]
fn an_object_already_in_the_desired_version_is_unchanged() {
    let object = beta(
        json!({ "protectOperations": ["DELETE"] }),
        json!({ OPS: "EVICT" }),
    );
    assert_eq!(convert(object.clone(), BETA).unwrap(), object);
}

#[test]
fn malformed_objects_are_refused_naming_the_field() {
    let cases = [
        (
            beta(json!({ "protectTotalReplicas": "three" }), Value::Null),
            ALPHA,
            "spec.protectTotalReplicas",
        ),
        (
            beta(
                json!({ "protectTotalReplicas": 4294967296_i64 }),
                Value::Null,
            ),
            ALPHA,
            "spec.protectTotalReplicas",
        ),
        (
            beta(json!({ "protectOperations": "DELETE" }), Value::Null),
            ALPHA,
            "spec.protectOperations must be a list",
        ),
        (
            beta(json!({ "protectOperations": ["DELETE", 7] }), Value::Null),
            ALPHA,
            "spec.protectOperations[1]",
        ),
        (
            beta(json!({ "protectOperations": ["REBOOT"] }), Value::Null),
            ALPHA,
            "spec.protectOperations[0]",
        ),
        (
            json!({ "apiVersion": ALPHA, "kind": BUDGET_KIND, "metadata": {}, "spec": 5 }),
            BETA,
            "spec must be an object",
        ),
        (
            alpha(json!("x")),
            BETA,
            "metadata.annotations must be a map",
        ),
        (
            alpha(json!({ OPS: 1 })),
            BETA,
            "metadata.annotations[kruise.io/pub-protect-operations]",
        ),
        (
            json!({ "kind": BUDGET_KIND }),
            BETA,
            "apiVersion is missing",
        ),
        (
            json!({ "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet" }),
            BETA,
            "kind CloneSet in apps.kruise.io/v1alpha1",
        ),
        (json!("budget"), BETA, "not a JSON object"),
    ];
    for (object, desired, field) in cases {
        let err = convert(object.clone(), desired).unwrap_err().to_string();
        assert!(
            err.contains(field),
            "{object}: {err:?} does not name {field}"
        );
    }
}

#[test]
fn an_unknown_desired_version_is_refused() {
    let err = convert(alpha(Value::Null), "policy.kruise.io/v2").unwrap_err();
    assert_eq!(
        err.to_string(),
        "desiredAPIVersion \"policy.kruise.io/v2\" is not served for PodUnavailableBudget; it converts to policy.kruise.io/v1alpha1 or policy.kruise.io/v1beta1"
    );
}

fn review(desired: &str, objects: Vec<Value>) -> ConversionReview {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": { "uid": "0a1b", "desiredAPIVersion": desired, "objects": objects },
    }))
    .unwrap()
}

fn answered(review: ConversionReview) -> Value {
    serde_json::to_value(answer(review)).unwrap()
}

#[test]
fn a_review_is_answered_in_the_desired_version_echoing_its_uid() {
    let objects = vec![alpha(json!({ TOTAL: "3" })), beta(json!({}), Value::Null)];
    let out = answered(review(BETA, objects));
    assert_eq!(out["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(out["kind"], "ConversionReview");
    assert_eq!(out["response"]["uid"], "0a1b");
    assert_eq!(out["response"]["result"]["status"], "Success");
    let converted = out["response"]["convertedObjects"].as_array().unwrap();
    assert_eq!(converted.len(), 2);
    assert!(converted.iter().all(|o| o["apiVersion"] == BETA));
    assert_eq!(converted[0]["spec"]["protectTotalReplicas"], 3);
}

#[test]
fn a_review_that_cannot_be_converted_fails_with_a_sentence() {
    let bad = beta(json!({ "protectTotalReplicas": "x" }), Value::Null);
    let cases = [
        (
            review(ALPHA, vec![alpha(Value::Null), bad]),
            "Converting shop/web to policy.kruise.io/v1alpha1 failed: spec.protectTotalReplicas must be an integer",
        ),
        (
            review("policy.kruise.io/v9", vec![alpha(Value::Null)]),
            "desiredAPIVersion \"policy.kruise.io/v9\" is not served",
        ),
    ];
    for (review, message) in cases {
        let out = answered(review);
        assert_eq!(out["response"]["uid"], "0a1b");
        assert_eq!(out["response"]["result"]["status"], "Failure");
        let text = out["response"]["result"]["message"].as_str().unwrap();
        assert!(text.contains(message) && text.ends_with('.'), "{text}");
    }
}

#[test]
fn a_review_without_a_request_fails() {
    let review: ConversionReview = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
    }))
    .unwrap();
    let out = answered(review);
    assert_eq!(out["response"]["result"]["status"], "Failure");
    assert_eq!(
        out["response"]["result"]["message"],
        "The ConversionReview has no request."
    );
}

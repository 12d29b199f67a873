use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Value, json};

use super::*;
use crate::api::common::PodUpdatePolicy;
use crate::workload::inplace::{UpdateMethod, choose_update_method};
use crate::workload::revision::{
    Revision, UpdateRevisionPlan, hash_revision_data, plan_update_revision,
};
use crate::workload::revision_spec::RevisionSpec;

/// The apiserver's structural defaulting: absent fields get their schema's default, then
/// every field present (defaulted or not) is defaulted in turn.
fn apply_schema_defaults(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(fields) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            for (name, property) in properties {
                if let Some(default) = property.get("default")
                    && !fields.contains_key(name)
                {
                    fields.insert(name.clone(), default.clone());
                }
                if let Some(field) = fields.get_mut(name) {
                    apply_schema_defaults(field, property);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                items
                    .iter_mut()
                    .for_each(|item| apply_schema_defaults(item, item_schema));
            }
        }
        _ => {}
    }
}

/// Every property of `schema` that carries a `default`, as (JSON path, default) pairs.
fn collect_defaults(schema: &Value, path: &str, found: &mut Vec<(String, Value)>) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let child = format!("{path}.{name}");
            if let Some(default) = property.get("default") {
                found.push((child.clone(), default.clone()));
            }
            collect_defaults(property, &child, found);
        }
    }
    if let Some(items) = schema.get("items") {
        collect_defaults(items, &format!("{path}[*]"), found);
    }
}

/// A template as a user writes it, with every optional parent that holds nested defaults.
fn written_template() -> Value {
    json!({
        "metadata": { "labels": { "app": "web" } },
        "spec": {
            "initContainers": [{ "name": "init", "image": "busybox:1.36" }],
            "containers": [{
                "name": "app",
                "image": "web:v1",
                "ports": [{ "containerPort": 80 }],
                "env": [{ "name": "POD", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } }],
                "livenessProbe": { "httpGet": { "port": 80 } },
                "readinessProbe": { "tcpSocket": { "port": 80 } },
                "lifecycle": { "preStop": { "httpGet": { "port": 80 } } }
            }],
            "volumes": [
                { "name": "s", "secret": { "secretName": "s" } },
                { "name": "c", "configMap": { "name": "c" } },
                { "name": "d", "downwardAPI": { "items": [{ "path": "n", "fieldRef": { "fieldPath": "metadata.name" } }] } },
                { "name": "p", "projected": { "sources": [{ "serviceAccountToken": { "path": "t" } }] } },
                { "name": "h", "hostPath": { "path": "/data" } }
            ]
        }
    })
}

fn written_claims() -> Value {
    json!([{ "metadata": { "name": "data" }, "spec": { "accessModes": ["ReadWriteOnce"] } }])
}

fn revision_spec(template: Value, claims: Value) -> RevisionSpec {
    serde_json::from_value(json!({ "template": template, "volumeClaimTemplates": claims }))
        .expect("a revision spec")
}

fn revision_hash(spec: &RevisionSpec) -> String {
    hash_revision_data(&spec.to_data().expect("serializes"), None)
}

fn defaulted(template: &Value, claims: &Value) -> (Value, Value) {
    let (mut template, mut claims) = (template.clone(), claims.clone());
    apply_schema_defaults(&mut template, &SCHEMAS.template);
    apply_schema_defaults(&mut claims, &SCHEMAS.claims);
    (template, claims)
}

#[test]
fn strip_defaults_removes_only_values_equal_to_their_default() {
    let schema = json!({ "properties": {
        "policy": { "default": "Always" },
        "grace": { "default": 30 },
        "context": { "default": {}, "properties": { "mode": { "default": 420 } } },
        "ports": { "items": { "properties": { "protocol": { "default": "TCP" } } } }
    }});
    let cases = [
        (
            "a default is removed",
            json!({ "policy": "Always" }),
            json!({}),
        ),
        (
            "another value stays",
            json!({ "policy": "Never" }),
            json!({ "policy": "Never" }),
        ),
        (
            "a number equal to its default",
            json!({ "grace": 30 }),
            json!({}),
        ),
        (
            "a number that differs",
            json!({ "grace": 31 }),
            json!({ "grace": 31 }),
        ),
        (
            "null is not the default",
            json!({ "grace": null }),
            json!({ "grace": null }),
        ),
        (
            "an object of defaults goes",
            json!({ "context": { "mode": 420 } }),
            json!({}),
        ),
        (
            "an object with another field stays, without its defaults",
            json!({ "context": { "mode": 420, "user": 1 } }),
            json!({ "context": { "user": 1 } }),
        ),
        (
            "list items are stripped, the list stays",
            json!({ "ports": [{ "protocol": "TCP", "port": 80 }, { "protocol": "UDP" }] }),
            json!({ "ports": [{ "port": 80 }, { "protocol": "UDP" }] }),
        ),
        (
            "undeclared fields stay",
            json!({ "other": "Always" }),
            json!({ "other": "Always" }),
        ),
    ];
    for (name, mut value, expected) in cases {
        strip_defaults(&mut value, &schema);
        assert_eq!(value, expected, "{name}");
    }
}

#[test]
fn the_schema_declares_openkruise_template_defaults() {
    let mut template = Vec::new();
    collect_defaults(&SCHEMAS.template, "", &mut template);
    let find = |path: &str| {
        template
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, value)| value.clone())
    };
    let expected = [
        (".spec.restartPolicy", json!("Always")),
        (".spec.dnsPolicy", json!("ClusterFirst")),
        (".spec.schedulerName", json!("default-scheduler")),
        (".spec.securityContext", json!({})),
        (".spec.terminationGracePeriodSeconds", json!(30)),
        (".spec.containers[*].imagePullPolicy", json!("Always")),
        (
            ".spec.containers[*].terminationMessagePath",
            json!("/dev/termination-log"),
        ),
        (
            ".spec.containers[*].terminationMessagePolicy",
            json!("File"),
        ),
        (
            ".spec.initContainers[*].terminationMessagePolicy",
            json!("File"),
        ),
        (".spec.initContainers[*].imagePullPolicy", Value::Null),
    ];
    for (path, value) in expected {
        assert_eq!(find(path).unwrap_or(Value::Null), value, "{path}");
    }
}

#[test]
fn a_template_and_its_defaulted_form_hash_the_same() {
    let (template, claims) = (written_template(), written_claims());
    let (full_template, full_claims) = defaulted(&template, &claims);
    assert_ne!(full_template, template, "the schema adds defaults");
    assert_ne!(full_claims, claims, "the schema adds claim defaults");
    let written = revision_spec(template, claims);
    let read_back = revision_spec(full_template, full_claims);
    assert_ne!(written, read_back);
    assert_eq!(revision_hash(&written), revision_hash(&read_back));
    assert_eq!(written.to_data().unwrap(), read_back.to_data().unwrap());
}

#[test]
fn a_value_other_than_the_default_is_a_new_revision() {
    let cases = [
        ("/spec/containers/0/imagePullPolicy", json!("IfNotPresent")),
        ("/spec/initContainers/0/imagePullPolicy", json!("Always")),
        ("/spec/terminationGracePeriodSeconds", json!(60)),
        ("/spec/restartPolicy", json!("Never")),
        ("/spec/securityContext", json!({ "runAsUser": 1000 })),
        ("/spec/containers/0/livenessProbe/timeoutSeconds", json!(5)),
        ("/spec/volumes/0/secret/defaultMode", json!(256)),
    ];
    let minimal = revision_hash(&revision_spec(written_template(), written_claims()));
    for (pointer, value) in cases {
        let (mut template, claims) = defaulted(&written_template(), &written_claims());
        let (parent, key) = pointer.rsplit_once('/').expect("a parent");
        template.pointer_mut(parent).expect("parent exists")[key] = value;
        let changed = revision_hash(&revision_spec(template, claims));
        assert_ne!(changed, minimal, "{pointer}");
    }
}

#[test]
fn a_revision_written_before_the_defaults_stays_the_update_revision() {
    // Data as an earlier Stevedore wrote it: the typed spec, not stripped, with one default
    // spelled out by the user.
    let mut old_template = written_template();
    old_template["spec"]["containers"][0]["terminationMessagePath"] = json!("/dev/termination-log");
    let mut old_spec = serde_json::to_value(revision_spec(old_template, written_claims())).unwrap();
    old_spec["template"]["$patch"] = json!("replace");
    let old = Revision {
        name: "web-old".to_owned(),
        number: 1,
        hash_label: Some("12345".to_owned()),
        data: serde_json::to_vec(&json!({ "spec": old_spec })).unwrap(),
        created: Some(1),
    };
    let (template, claims) = defaulted(&written_template(), &written_claims());
    let data = revision_spec(template, claims).to_data().unwrap();
    let plan = plan_update_revision("web", std::slice::from_ref(&old), &data, 0);
    assert_eq!(
        plan,
        UpdateRevisionPlan::Unchanged {
            name: "web-old".to_owned()
        }
    );
    assert!(!same_revision_data(&old.data, b"{\"spec\":{}}"));
}

#[test]
fn an_image_change_after_the_defaults_is_still_in_place() {
    let old: PodTemplateSpec = serde_json::from_value(written_template()).unwrap();
    let (mut template, _) = defaulted(&written_template(), &written_claims());
    template["spec"]["containers"][0]["image"] = json!("web:v2");
    let new: PodTemplateSpec = serde_json::from_value(template).unwrap();
    for policy in [
        PodUpdatePolicy::InPlaceIfPossible,
        PodUpdatePolicy::InPlaceOnly,
    ] {
        let method = choose_update_method(policy, &old, &new).expect("in place");
        let UpdateMethod::InPlace(spec) = method else {
            panic!("{policy:?}: {method:?}");
        };
        assert_eq!(
            spec.container_images.get("app").map(String::as_str),
            Some("web:v2")
        );
    }
    let mut other: PodTemplateSpec = new.clone();
    if let Some(spec) = other.spec.as_mut() {
        spec.termination_grace_period_seconds = Some(60);
    }
    let method = choose_update_method(PodUpdatePolicy::InPlaceIfPossible, &old, &other).unwrap();
    assert!(
        matches!(method, UpdateMethod::Recreate { .. }),
        "{method:?}"
    );
}

#[test]
fn stored_and_defaulted_claim_templates_and_templates_are_the_same() {
    let (template, claims) = (written_template(), written_claims());
    let (defaulted_template, defaulted_claims) = defaulted(&template, &claims);
    assert_ne!(
        claims, defaulted_claims,
        "the schema defaults something in a claim"
    );
    let stored = revision_spec(template, claims);
    let object = revision_spec(defaulted_template, defaulted_claims);
    assert!(same_claim_templates(
        &stored.volume_claim_templates,
        &object.volume_claim_templates
    ));
    assert!(same_template(&stored.template, &object.template));
    let mut other = object.clone();
    other.volume_claim_templates[0].metadata.name = Some("logs".to_owned());
    assert!(!same_claim_templates(
        &stored.volume_claim_templates,
        &other.volume_claim_templates
    ));
}

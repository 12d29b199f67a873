use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

use super::{trim_node, trim_pod};

fn token_volume(name: &str) -> serde_json::Value {
    json!({ "name": name, "projected": { "defaultMode": 420, "sources": [
        { "serviceAccountToken": { "expirationSeconds": 3607, "path": "token" } },
        { "configMap": { "name": "kube-root-ca.crt", "items": [{ "key": "ca.crt", "path": "ca.crt" }] } },
    ] } })
}

fn pod(volumes: serde_json::Value, mounts: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": "p" },
        "spec": {
            "initContainers": [{ "name": "init", "volumeMounts": mounts }],
            "containers": [{ "name": "app", "image": "web:v1", "volumeMounts": mounts }],
            "volumes": volumes,
        }
    }))
    .expect("pod")
}

fn names(pod: &Pod) -> (Vec<String>, Vec<String>, Vec<String>) {
    let spec = pod.spec.as_ref().expect("spec");
    let volumes = (spec.volumes.iter().flatten())
        .map(|v| v.name.clone())
        .collect();
    let mounts = |c: &k8s_openapi::api::core::v1::Container| {
        (c.volume_mounts.iter().flatten())
            .map(|m| m.name.clone())
            .collect::<Vec<_>>()
    };
    let init = spec.init_containers.as_ref().expect("init");
    (volumes, mounts(&spec.containers[0]), mounts(&init[0]))
}

#[test]
fn the_token_volume_and_its_mounts_go_and_everything_else_stays() {
    let cases = [
        (
            "the admission plugin's volume goes, a claim stays",
            json!([token_volume("kube-api-access-4qz4p"),
                   { "name": "www", "persistentVolumeClaim": { "claimName": "www-web-0" } }]),
            vec!["www"],
        ),
        (
            "a volume of that name projecting no token is a person's and stays",
            json!([{ "name": "kube-api-access-mine", "projected": { "sources": [
                { "configMap": { "name": "settings" } }] } }]),
            vec!["kube-api-access-mine"],
        ),
        (
            "a token volume under another name is a person's and stays",
            json!([token_volume("my-token")]),
            vec!["my-token"],
        ),
    ];
    for (what, volumes, kept) in cases {
        let mounts: Vec<_> = (volumes.as_array().expect("array").iter())
            .map(|v| json!({ "name": v["name"], "mountPath": format!("/m/{}", v["name"]) }))
            .collect();
        let mut pod = pod(volumes, json!(mounts));
        trim_pod(&mut pod);
        let (volumes, app_mounts, init_mounts) = names(&pod);
        assert_eq!(volumes, kept, "{what}: volumes");
        assert_eq!(app_mounts, kept, "{what}: the app container's mounts");
        assert_eq!(init_mounts, kept, "{what}: the init container's mounts");
        let image = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers[0].image.clone());
        assert_eq!(image.as_deref(), Some("web:v1"), "{what}: the rest stays");
    }
}

#[test]
fn a_pod_without_volumes_or_spec_is_left_as_it_is() {
    let mut bare: Pod =
        serde_json::from_value(json!({ "metadata": { "name": "p" } })).expect("pod");
    let before = bare.clone();
    trim_pod(&mut bare);
    assert_eq!(bare, before);
    let mut no_volumes = pod(json!(null), json!(null));
    let before = no_volumes.clone();
    trim_pod(&mut no_volumes);
    assert_eq!(no_volumes, before);
}

#[test]
fn a_node_keeps_everything_but_its_image_list() {
    let mut node: Node = serde_json::from_value(json!({
        "metadata": { "name": "n", "labels": { "zone": "a" } },
        "status": {
            "conditions": [{ "type": "Ready", "status": "True" }],
            "images": [{ "names": ["web:v1"], "sizeBytes": 1024 }],
        }
    }))
    .expect("node");
    trim_node(&mut node);
    let status = node.status.as_ref().expect("status");
    assert_eq!(status.images, None);
    assert_eq!(status.conditions.as_ref().map(Vec::len), Some(1));
    assert_eq!(node.metadata.labels.as_ref().map(|l| l.len()), Some(1));
}

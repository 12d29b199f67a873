//! Injection as OpenKruise's pod webhook does it, one rule per case.

use serde_json::{Value, json};

use super::*;

const NOW: &str = "2026-01-01T00:00:00Z";

fn pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "web-1", "namespace": "shop", "labels": { "app": "web" } },
        "spec": {
            "containers": [{
                "name": "web", "image": "web:1",
                "env": [{ "name": "TZ", "value": "UTC" }, { "name": "POD", "value": "web-1" }],
                "volumeMounts": [{ "name": "data", "mountPath": "/data", "subPathExpr": "$(POD)" }],
                "someFutureField": true
            }],
            "initContainers": [{ "name": "setup", "image": "setup:1" }],
            "volumes": [{ "name": "data", "emptyDir": {} }, { "name": "logs", "hostPath": { "path": "/pod-own" } }],
            "imagePullSecrets": [{ "name": "own" }]
        }
    })
}

fn set(name: &str, spec: Value) -> SidecarSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": { "name": name },
        "spec": spec,
    }))
    .expect("a SidecarSet")
}

fn log_agent() -> SidecarSet {
    set(
        "log",
        json!({
            "selector": { "matchLabels": { "app": "web" } },
            "containers": [{
                "name": "log-agent", "image": "agent:1",
                "volumeMounts": [{ "name": "logs", "mountPath": "/logs" }, { "name": "spool", "mountPath": "/spool" }]
            }],
            "volumes": [{ "name": "logs", "emptyDir": {} }, { "name": "spool", "emptyDir": {} }],
            "imagePullSecrets": [{ "name": "own" }, { "name": "agent-pull" }]
        }),
    )
}

/// The pod with `patch` applied (each op an `add` of a whole member).
fn patched(patch: &[Value]) -> Value {
    let mut pod = pod();
    for op in patch {
        assert_eq!(op["op"], "add");
        let path = op["path"].as_str().expect("a path");
        let (parent, member) = path.rsplit_once('/').expect("a member path");
        pod.pointer_mut(parent).expect("the parent exists")[member] = op["value"].clone();
    }
    pod
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|c| c["name"].as_str().unwrap_or(""))
        .collect()
}

#[test]
fn nothing_matched_is_no_patch() {
    assert_eq!(injection_patch(&pod(), &[], NOW), Ok(Vec::new()));
}

#[test]
fn containers_go_before_or_after_the_pod_s_own() {
    let before = log_agent();
    let after = set(
        "mesh",
        json!({ "namespace": "shop", "containers": [
        { "name": "proxy", "image": "proxy:1", "podInjectPolicy": "AfterAppContainer" }
    ] }),
    );
    let pod = patched(&injection_patch(&pod(), &[&after, &before], NOW).expect("a patch"));
    assert_eq!(
        names(&pod["spec"]["containers"]),
        ["log-agent", "web", "proxy"]
    );
    // The pod's own container keeps the fields this build does not know.
    assert_eq!(pod["spec"]["containers"][1]["someFutureField"], true);
    let env = &pod["spec"]["containers"][0]["env"];
    assert_eq!(env, &json!([{ "name": "IS_INJECTED", "value": "true" }]));
}

#[test]
fn volumes_and_pull_secrets_are_added_unless_the_pod_has_them() {
    let pod = patched(&injection_patch(&pod(), &[&log_agent()], NOW).expect("a patch"));
    assert_eq!(names(&pod["spec"]["volumes"]), ["data", "logs", "spool"]);
    // The pod's own volume of a sidecar volume's name wins.
    assert_eq!(pod["spec"]["volumes"][1]["hostPath"]["path"], "/pod-own");
    assert_eq!(
        names(&pod["spec"]["imagePullSecrets"]),
        ["own", "agent-pull"]
    );
}

#[test]
fn shared_volumes_and_transferred_variables_reach_the_sidecar() {
    let shared = set(
        "shared",
        json!({ "namespace": "shop", "containers": [{
        "name": "shipper", "image": "shipper:1",
        "env": [{ "name": "TZ", "value": "own" }],
        "shareVolumePolicy": { "type": "enabled" },
        "transferEnv": [{ "sourceContainerName": "web", "envNames": ["TZ", "ABSENT"] }]
    }] }),
    );
    let pod = patched(&injection_patch(&pod(), &[&shared], NOW).expect("a patch"));
    let shipper = &pod["spec"]["containers"][0];
    assert_eq!(
        shipper["volumeMounts"],
        json!([{ "name": "data", "mountPath": "/data", "subPathExpr": "$(POD)" }])
    );
    // Its own TZ wins over the transferred one; POD comes with the subPathExpr.
    assert_eq!(
        shipper["env"],
        json!([
            { "name": "TZ", "value": "own" },
            { "name": "IS_INJECTED", "value": "true" },
            { "name": "POD", "value": "web-1" },
        ])
    );
}

#[test]
fn init_containers_go_after_the_pod_s_own_by_name() {
    let inits = set(
        "init",
        json!({ "namespace": "shop", "initContainers": [
        { "name": "z-wait", "image": "wait:1" }, { "name": "a-fetch", "image": "fetch:1" }
    ] }),
    );
    let pod = patched(&injection_patch(&pod(), &[&inits], NOW).expect("a patch"));
    assert_eq!(
        names(&pod["spec"]["initContainers"]),
        ["setup", "a-fetch", "z-wait"]
    );
    assert_eq!(names(&pod["spec"]["containers"]), ["web"]);
}

#[test]
fn the_versions_and_the_list_are_recorded_as_openkruise_writes_them() {
    let mesh = set(
        "mesh",
        json!({ "namespace": "shop", "containers": [{ "name": "proxy", "image": "proxy:1" }] }),
    );
    let pod = patched(&injection_patch(&pod(), &[&mesh, &log_agent()], NOW).expect("a patch"));
    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(annotations[INJECTED_LIST_ANNOTATION], "log,mesh");
    let hashes: Value =
        serde_json::from_str(annotations[HASH_ANNOTATION].as_str().expect("text")).expect("JSON");
    let log = &hashes["log"];
    assert_eq!(log["hash"], json!(sidecarset_hash(&log_agent())));
    assert_eq!(log["sidecarSetName"], "log");
    assert_eq!(log["sidecarList"], json!(["log-agent"]));
    assert_eq!(log["updateTimestamp"], NOW);
    let bare: Value = serde_json::from_str(
        annotations[HASH_WITHOUT_IMAGE_ANNOTATION]
            .as_str()
            .expect("text"),
    )
    .expect("JSON");
    assert_eq!(
        bare["mesh"]["hash"],
        json!(sidecarset_hash_without_image(&mesh))
    );
}

#[test]
fn patch_pod_metadata_is_applied() {
    let annotated = set(
        "annotated",
        json!({ "namespace": "shop",
            "containers": [{ "name": "proxy", "image": "proxy:1" }],
            "patchPodMetadata": [{ "annotations": { "example.com/mesh": "on" } }]
        }),
    );
    let pod = patched(&injection_patch(&pod(), &[&annotated], NOW).expect("a patch"));
    assert_eq!(pod["metadata"]["annotations"]["example.com/mesh"], "on");
}

#[test]
fn two_sidecarsets_injecting_one_name_are_refused_naming_both() {
    let cases = [
        (
            "containers",
            json!({ "namespace": "shop", "containers": [{ "name": "log-agent", "image": "other:1" }] }),
        ),
        (
            "an init container",
            json!({ "namespace": "shop", "initContainers": [{ "name": "log-agent", "image": "other:1" }] }),
        ),
    ];
    for (case, spec) in cases {
        let other = set("other-log", spec);
        let refused = injection_patch(&pod(), &[&other, &log_agent()], NOW).expect_err(case);
        let message = refused.to_string();
        assert!(
            message.contains("SidecarSets log and other-log"),
            "{case}: {message}"
        );
        assert!(message.contains("named log-agent"), "{case}: {message}");
    }
}

#[test]
fn a_sidecar_the_pod_already_has_is_replaced_where_it_stands() {
    let mut existing = pod();
    existing["spec"]["containers"] =
        json!([{ "name": "web", "image": "web:1" }, { "name": "log-agent", "image": "agent:0" }]);
    let patch = injection_patch(&existing, &[&log_agent()], NOW).expect("a patch");
    let containers = &patch[0]["value"];
    assert_eq!(names(containers), ["web", "log-agent"]);
    assert_eq!(containers[1]["image"], "agent:1");
}

#[test]
fn a_hot_sidecar_is_injected_as_a_working_and_an_idle_container() {
    let mesh = set(
        "mesh",
        json!({
            "selector": { "matchLabels": { "app": "web" } },
            "containers": [{
                "name": "envoy", "image": "envoy:1",
                "upgradeStrategy": { "upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1" }
            }]
        }),
    );
    let pod = patched(&injection_patch(&pod(), &[&mesh], NOW).expect("injected"));
    let containers = pod["spec"]["containers"].as_array().expect("containers");
    let named: Vec<(&str, &str)> = (containers.iter())
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default(),
                c["image"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            ("envoy-1", "envoy:1"),
            ("envoy-2", "empty:1"),
            ("web", "web:1")
        ]
    );
    let env: Vec<&str> = (containers[1]["env"].as_array().expect("env").iter())
        .map(|e| e["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        env,
        [
            "IS_INJECTED",
            "SIDECARSET_VERSION",
            "SIDECARSET_VERSION_ALT"
        ]
    );
    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(
        annotations["kruise.io/sidecarset-working-hotupgrade-container"],
        json!(r#"{"envoy":"envoy-1"}"#)
    );
    let versions = [
        ("version.sidecarset.kruise.io/envoy-1", "1"),
        ("versionalt.sidecarset.kruise.io/envoy-1", "0"),
        ("version.sidecarset.kruise.io/envoy-2", "0"),
        ("versionalt.sidecarset.kruise.io/envoy-2", "1"),
    ];
    for (key, value) in versions {
        assert_eq!(annotations[key], json!(value), "{key}");
    }
    let hashes: Value =
        serde_json::from_str(annotations[HASH_ANNOTATION].as_str().expect("text")).expect("JSON");
    assert_eq!(
        hashes["mesh"]["sidecarList"],
        json!(["envoy"]),
        "the sidecar's own name"
    );
}

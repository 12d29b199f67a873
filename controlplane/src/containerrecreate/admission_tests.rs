use serde_json::json;

use super::*;

fn pod(phase: &str, node: Option<&str>, container_id: Option<&str>) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": "web-0", "namespace": "shop", "uid": "uid-1" },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 5,
            "containers": [{ "name": "web", "image": "web:v1" }, { "name": "side", "image": "web:v1" }],
        },
        "status": {
            "phase": phase,
            "containerStatuses": [{
                "name": "web", "containerID": container_id, "restartCount": 2,
                "image": "web:v1", "imageID": "", "ready": true,
            }],
        },
    }))
    .expect("pod")
}

fn request(spec: Value, labels: Value) -> ContainerRecreateRequest {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ContainerRecreateRequest",
        "metadata": { "name": "r", "namespace": "shop", "labels": labels },
        "spec": spec,
    }))
    .expect("request")
}

fn web() -> Value {
    json!({ "podName": "web-0", "containers": [{ "name": "web" }] })
}

#[test]
fn a_create_is_filled_from_the_running_pod() {
    let running = pod("Running", Some("node-a"), Some("containerd://abc"));
    let patch =
        default_crr(&request(web(), json!({ "team": "shop" })), Some(&running)).expect("admitted");
    assert_eq!(
        patch,
        vec![
            json!({ "op": "add", "path": "/metadata/labels", "value": {
                "team": "shop",
                "crr.apps.kruise.io/pod-name": "web-0",
                "crr.apps.kruise.io/pod-uid": "uid-1",
                "crr.apps.kruise.io/node-name": "node-a",
            } }),
            json!({ "op": "add", "path": "/spec/containers/0/statusContext",
                    "value": { "containerID": "containerd://abc", "restartCount": 2 } }),
            json!({ "op": "add", "path": "/spec/strategy",
                    "value": { "failurePolicy": "Fail", "terminationGracePeriodSeconds": 5 } }),
        ]
    );
    // A strategy the writer gave is kept.
    let mut spec = web();
    spec["strategy"] = json!({ "failurePolicy": "Ignore", "terminationGracePeriodSeconds": 1 });
    let patch = default_crr(&request(spec, json!(null)), Some(&running)).expect("admitted");
    assert_eq!(
        patch[2]["value"],
        json!({ "failurePolicy": "Ignore", "terminationGracePeriodSeconds": 1 })
    );
}

#[test]
fn a_create_is_refused_naming_the_field_unless_the_pod_can_be_recreated_in() {
    let running = pod("Running", Some("node-a"), Some("containerd://abc"));
    let finished = pod("Succeeded", Some("node-a"), Some("containerd://abc"));
    let pending = pod("Pending", None, None);
    let starting = pod("Running", Some("node-a"), None);
    let mut deleting = running.clone();
    deleting.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).expect("time"));
    let ghost = json!({ "podName": "web-0", "containers": [{ "name": "ghost" }] });
    let side = json!({ "podName": "web-0", "containers": [{ "name": "side" }] });
    let preset = json!({ "podName": "web-0", "containers": [
        { "name": "web", "statusContext": { "containerID": "x", "restartCount": 0 } },
    ] });
    let mut short = web();
    short["activeDeadlineSeconds"] = json!(2);
    let cases: [(&str, Value, Option<&Pod>, &str); 8] = [
        (
            "deadline under 3 s",
            short,
            Some(&running),
            "spec.activeDeadlineSeconds must be at least 3, not 2.",
        ),
        (
            "no pod",
            web(),
            None,
            "spec.podName: there is no pod web-0 in this namespace",
        ),
        (
            "finished",
            web(),
            Some(&finished),
            "spec.podName: pod web-0 is not active",
        ),
        (
            "deleting",
            web(),
            Some(&deleting),
            "spec.podName: pod web-0 is not active",
        ),
        (
            "pending",
            web(),
            Some(&pending),
            "spec.podName: pod web-0 is pending",
        ),
        (
            "no such container",
            ghost,
            Some(&running),
            "spec.containers[0].name: pod web-0 has no container ghost.",
        ),
        (
            "not started",
            side,
            Some(&running),
            "spec.containers[0].name: container side of pod web-0 has not started yet",
        ),
        (
            "statusContext given",
            preset,
            Some(&running),
            "spec.containers[0].statusContext is set by the control plane",
        ),
    ];
    for (case, spec, pod, message) in cases {
        let refused = default_crr(&request(spec, json!(null)), pod).expect_err(case);
        assert_eq!(refused.code, 400, "{case}");
        assert!(
            refused.message.starts_with(message),
            "{case}: {}",
            refused.message
        );
    }
    let refused = default_crr(&request(web(), json!(null)), Some(&starting)).expect_err("starting");
    assert!(
        refused.message.contains("has not started yet"),
        "{}",
        refused.message
    );
}

#[test]
fn what_the_schema_refuses_is_left_to_it() {
    let cases = [
        json!({ "podName": "absent", "containers": [] }),
        json!({ "podName": "absent", "containers": [{ "name": "a" }, { "name": "a" }] }),
        json!({ "podName": "absent", "containers": [{ "name": "a" }], "activeDeadlineSeconds": -1 }),
        json!({ "podName": "absent", "containers": [{ "name": "a" }], "strategy": { "unreadyGracePeriodSeconds": -1 } }),
        json!({ "podName": "../other/web-0", "containers": [{ "name": "a" }] }),
        json!({ "podName": "Web-0", "containers": [{ "name": "a" }] }),
        json!({ "podName": "web-", "containers": [{ "name": "a" }] }),
        json!({ "podName": "web..0", "containers": [{ "name": "a" }] }),
    ];
    for spec in cases {
        let patch =
            default_crr(&request(spec.clone(), json!(null)), None).expect("left to the schema");
        assert!(patch.is_empty(), "{spec}");
    }
}

#[test]
fn a_pod_name_is_looked_up_only_when_the_schema_admits_it() {
    let cases = [
        ("web-0", true),
        ("web-0.shop", true),
        ("0", true),
        ("", false),
        ("web/0", false),
        ("-web", false),
        ("web.", false),
        ("WEB", false),
    ];
    for (name, valid) in cases {
        assert_eq!(is_dns_subdomain(name), valid, "{name:?}");
    }
    assert!(!is_dns_subdomain(&"a".repeat(254)));
}

#[test]
fn an_update_keeps_the_spec_and_the_admitted_labels() {
    let labels = json!({
        "crr.apps.kruise.io/pod-name": "web-0",
        "crr.apps.kruise.io/pod-uid": "uid-1",
        "crr.apps.kruise.io/node-name": "node-a",
    });
    let admitted = request(web(), labels.clone());
    let unlabelled = request(web(), json!({ "team": "shop" }));
    let mut other_uid = labels.clone();
    other_uid["crr.apps.kruise.io/pod-uid"] = json!("uid-2");
    let mut no_node = labels.clone();
    no_node
        .as_object_mut()
        .expect("map")
        .remove("crr.apps.kruise.io/node-name");
    let mut extra = labels.clone();
    extra["team"] = json!("shop");
    let mut deadline = web();
    deadline["activeDeadlineSeconds"] = json!(30);
    let other_pod = json!({ "podName": "web-1", "containers": [{ "name": "web" }] });
    let cases: [(
        &str,
        &ContainerRecreateRequest,
        ContainerRecreateRequest,
        Result<(), &str>,
    ); 7] = [
        (
            "labels of its own",
            &admitted,
            request(web(), extra),
            Ok(()),
        ),
        (
            "the controller labels an unlabelled request",
            &unlabelled,
            request(web(), labels.clone()),
            Ok(()),
        ),
        (
            "spec.podName",
            &admitted,
            request(other_pod, labels.clone()),
            Err("spec.podName is immutable: create a new ContainerRecreateRequest instead."),
        ),
        (
            "spec.activeDeadlineSeconds",
            &admitted,
            request(deadline, labels.clone()),
            Err(
                "spec.activeDeadlineSeconds is immutable: create a new ContainerRecreateRequest instead.",
            ),
        ),
        (
            "the pod UID",
            &admitted,
            request(web(), other_uid),
            Err(
                "metadata.labels[crr.apps.kruise.io/pod-uid] is immutable: it was \"uid-1\" when the request was admitted.",
            ),
        ),
        (
            "the node removed",
            &admitted,
            request(web(), no_node),
            Err(
                "metadata.labels[crr.apps.kruise.io/node-name] is immutable: it was \"node-a\" when the request was admitted.",
            ),
        ),
        ("nothing", &admitted, admitted.clone(), Ok(())),
    ];
    for (case, old, new, want) in cases {
        let got = validate_crr_update(old, &new);
        match want {
            Ok(()) => assert_eq!(got, Ok(()), "{case}"),
            Err(message) => {
                let refused = got.expect_err(case);
                assert_eq!(
                    (refused.code, refused.message.as_str()),
                    (403, message),
                    "{case}"
                );
            }
        }
    }
}

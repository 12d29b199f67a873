//! A hot sidecar's upgrade as the pod records it: swapped, reset due, done.

use serde_json::json;

use super::*;
use crate::sidecarset::hot::WORKING_SLOT_ANNOTATION;

fn set() -> SidecarSet {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": { "name": "mesh" },
        "spec": { "namespace": "shop", "containers": [{
            "name": "envoy", "image": "envoy:2",
            "upgradeStrategy": { "upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1" }
        }] },
    }))
    .expect("a SidecarSet")
}

/// A pod swapped to `envoy-2` (new image recorded from `empty-id`), `envoy-1` running
/// `first`; `envoy-2` runs image ID `second_id`, ready or not.
fn pod(first: &str, second_id: &str, second_ready: bool) -> Pod {
    let state = json!({ "mesh": { "revision": "new", "lastContainerStatuses": {
        "envoy-2": { "imageID": "empty-id", "containerID": "c-2" }
    } } });
    serde_json::from_value(json!({
        "metadata": { "name": "web-1", "annotations": {
            INJECTED_LIST_ANNOTATION: "mesh",
            WORKING_SLOT_ANNOTATION: r#"{"envoy":"envoy-2"}"#,
            STATE_ANNOTATION: state.to_string(),
        } },
        "spec": { "containers": [
            { "name": "envoy-1", "image": first },
            { "name": "envoy-2", "image": "envoy:2" },
        ] },
        "status": { "phase": "Running", "containerStatuses": [
            { "name": "envoy-1", "image": first, "imageID": "old-id", "containerID": "c-1", "ready": true, "restartCount": 0 },
            { "name": "envoy-2", "image": "envoy:2", "imageID": second_id, "containerID": "c-2b", "ready": second_ready, "restartCount": 1 },
        ] },
    }))
    .expect("a pod")
}

#[test]
fn the_old_container_is_emptied_only_once_the_new_one_is_ready() {
    let cases = [
        (
            "new container starting",
            pod("envoy:1", "empty-id", false),
            false,
            false,
        ),
        (
            "new container not ready",
            pod("envoy:1", "new-id", false),
            false,
            false,
        ),
        (
            "new container ready",
            pod("envoy:1", "new-id", true),
            true,
            false,
        ),
        (
            "old container emptied",
            pod("empty:1", "new-id", true),
            false,
            true,
        ),
    ];
    for (case, pod, reset_due, done) in cases {
        let state = SidecarPod::of(&pod, &set(), Timestamp::now());
        assert!(state.upgrading, "{case}");
        assert_eq!(state.reset_due, reset_due, "{case}: reset due");
        assert_eq!(state.upgrade_done, done, "{case}: done");
    }
}

#[test]
fn an_emptied_container_is_waited_for_until_it_runs_the_empty_image() {
    let mut pod = pod("empty:1", "new-id", true);
    let annotations = pod.metadata.annotations.as_mut().expect("annotations");
    let mut state: serde_json::Value =
        serde_json::from_str(&annotations[STATE_ANNOTATION]).expect("JSON");
    state["mesh"]["lastContainerStatuses"]["envoy-1"] =
        json!({ "imageID": "old-id", "containerID": "c-1" });
    annotations.insert(STATE_ANNOTATION.to_owned(), state.to_string());
    let state = SidecarPod::of(&pod, &set(), Timestamp::now());
    assert!(!state.upgrade_done && !state.reset_due, "{state:?}");
}

/// A plain (not hot) upgrade of sidecar `envoy` recorded with `recorded` IDs, the
/// container now reporting `image_id` and `container_id` (absent when `None`), ready.
fn plain_upgrade(recorded: serde_json::Value, image_id: &str, container_id: Option<&str>) -> Pod {
    let state =
        json!({ "mesh": { "revision": "new", "lastContainerStatuses": { "envoy": recorded } } });
    let mut status = json!({ "name": "envoy", "image": "envoy:2", "imageID": image_id, "ready": true, "restartCount": 1 });
    if let Some(id) = container_id {
        status["containerID"] = json!(id);
    }
    serde_json::from_value(json!({
        "metadata": { "name": "web-1", "annotations": {
            INJECTED_LIST_ANNOTATION: "mesh",
            STATE_ANNOTATION: state.to_string(),
        } },
        "spec": { "containers": [{ "name": "envoy", "image": "envoy:2" }] },
        "status": { "phase": "Running", "containerStatuses": [status] },
    }))
    .expect("a pod")
}

#[test]
fn a_sidecar_counts_as_restarted_only_once_an_id_moved_on() {
    let plain_set = || {
        let mut set = set();
        set.spec.containers[0].upgrade_strategy = Default::default();
        set
    };
    let unknown = json!({ "imageID": "", "containerID": "" });
    let known = json!({ "imageID": "img-1", "containerID": "c-1" });
    let cases = [
        (
            "no IDs then, none reported now",
            plain_upgrade(unknown.clone(), "", None),
            false,
        ),
        (
            "no IDs then, an empty one now",
            plain_upgrade(unknown.clone(), "", Some("")),
            false,
        ),
        (
            "no IDs then, a container ID now",
            plain_upgrade(unknown, "", Some("c-2")),
            true,
        ),
        (
            "the same IDs",
            plain_upgrade(known.clone(), "img-1", Some("c-1")),
            false,
        ),
        (
            "a new container ID",
            plain_upgrade(known.clone(), "img-1", Some("c-2")),
            true,
        ),
        (
            "a new image ID",
            plain_upgrade(known, "img-2", Some("c-1")),
            true,
        ),
    ];
    for (case, pod, restarted) in cases {
        let state = SidecarPod::of(&pod, &plain_set(), Timestamp::now());
        assert!(state.upgrading, "{case}");
        assert_eq!(state.upgrade_done, restarted, "{case}");
    }
}

//! The pod patches of an in-place sidecar upgrade (pure). Starting one changes only the
//! images of the SidecarSet's sidecars that differ (the kubelet restarts just those
//! containers; the pod's own containers are never named), records the new versions in
//! the pod's annotations and the upgrade in [`STATE_ANNOTATION`]; finishing one drops
//! that entry. Both are strategic merge patches: containers merge by name.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Map, Value, json};

use super::inject::{HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION, recorded};
use super::pod_state::{STATE_ANNOTATION, upgrade_entry_for};
use crate::api::SidecarSet;

/// The sidecars of `set` whose image in `pod` is not the SidecarSet's: name → new image.
pub fn changed_images(pod: &Pod, set: &SidecarSet) -> Vec<(String, String)> {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    (set.spec.containers.iter())
        .filter_map(|sidecar| {
            let wanted = sidecar.container.image.as_ref()?;
            let running = containers
                .iter()
                .find(|c| c.name == sidecar.container.name)?;
            (running.image.as_ref() != Some(wanted))
                .then(|| (sidecar.container.name.clone(), wanted.clone()))
        })
        .collect()
}

/// The versions `set` is at now.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub set_name: &'a str,
    pub hash: &'a str,
    pub hash_without_image: &'a str,
    /// RFC 3339.
    pub now: &'a str,
}

/// The patch starting the upgrade of `pod`'s sidecars to `images`.
pub fn start_patch(pod: &Pod, images: &[(String, String)], target: Target<'_>) -> Value {
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let mut hashes = recorded(&annotations, HASH_ANNOTATION);
    let mut bare = recorded(&annotations, HASH_WITHOUT_IMAGE_ANNOTATION);
    set_version(&mut hashes, target.set_name, target.hash, target.now);
    set_version(
        &mut bare,
        target.set_name,
        target.hash_without_image,
        target.now,
    );
    let names: Vec<String> = images.iter().map(|(name, _)| name.clone()).collect();
    let mut state = recorded(&annotations, STATE_ANNOTATION);
    state.insert(
        target.set_name.to_owned(),
        upgrade_entry_for(pod, &names, target.hash, target.now),
    );
    let containers: Vec<Value> = (images.iter())
        .map(|(name, image)| json!({ "name": name, "image": image }))
        .collect();
    json!({
        "metadata": { "annotations": {
            HASH_ANNOTATION: Value::Object(hashes).to_string(),
            HASH_WITHOUT_IMAGE_ANNOTATION: Value::Object(bare).to_string(),
            STATE_ANNOTATION: Value::Object(state).to_string(),
        } },
        "spec": { "containers": containers },
    })
}

/// The pod's version entry of `set_name`, moved to `hash` at `now` (its sidecar list and
/// revision kept).
fn set_version(versions: &mut Map<String, Value>, set_name: &str, hash: &str, now: &str) {
    let entry = versions
        .entry(set_name.to_owned())
        .or_insert_with(|| json!({ "sidecarSetName": set_name }));
    if !entry.is_object() {
        *entry = json!({ "sidecarSetName": set_name });
    }
    entry["hash"] = json!(hash);
    entry["updateTimestamp"] = json!(now);
}

/// The patch closing the finished upgrade of `set_name` (the annotation goes with its last
/// entry).
pub fn finish_patch(pod: &Pod, set_name: &str) -> Value {
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let mut state = recorded(&annotations, STATE_ANNOTATION);
    state.remove(set_name);
    let value = if state.is_empty() {
        Value::Null
    } else {
        Value::String(Value::Object(state).to_string())
    };
    json!({ "metadata": { "annotations": { STATE_ANNOTATION: value } } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": { "name": "web-1", "annotations": {
                HASH_ANNOTATION: r#"{"log":{"hash":"old","sidecarSetName":"log","sidecarList":["log-agent"]},"mesh":{"hash":"m"}}"#,
                STATE_ANNOTATION: r#"{"mesh":{"revision":"m"}}"#,
            } },
            "spec": { "containers": [
                { "name": "log-agent", "image": "agent:1" },
                { "name": "web", "image": "web:1" },
                { "name": "proxy", "image": "proxy:1" },
            ] },
            "status": { "containerStatuses": [
                { "name": "log-agent", "image": "agent:1", "imageID": "sha-1", "containerID": "c-1", "ready": true, "restartCount": 0 },
            ] },
        }))
        .expect("a pod")
    }

    fn set(image: &str) -> SidecarSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
            "metadata": { "name": "log" },
            "spec": { "namespace": "shop", "containers": [{ "name": "log-agent", "image": image }] },
        }))
        .expect("a SidecarSet")
    }

    const TARGET: Target<'static> = Target {
        set_name: "log",
        hash: "new",
        hash_without_image: "shape",
        now: "2026-01-01T00:00:00Z",
    };

    #[test]
    fn only_the_sidecars_with_another_image_change() {
        assert_eq!(changed_images(&pod(), &set("agent:1")), []);
        assert_eq!(
            changed_images(&pod(), &set("agent:2")),
            [("log-agent".to_owned(), "agent:2".to_owned())]
        );
    }

    #[test]
    fn a_start_names_only_the_sidecar_and_records_versions_and_state() {
        let images = changed_images(&pod(), &set("agent:2"));
        let patch = start_patch(&pod(), &images, TARGET);
        assert_eq!(
            patch["spec"]["containers"],
            json!([{ "name": "log-agent", "image": "agent:2" }])
        );
        let annotations = &patch["metadata"]["annotations"];
        let hashes: Value =
            serde_json::from_str(annotations[HASH_ANNOTATION].as_str().expect("text"))
                .expect("JSON");
        assert_eq!(hashes["log"]["hash"], "new");
        assert_eq!(hashes["log"]["sidecarList"], json!(["log-agent"]));
        assert_eq!(
            hashes["mesh"]["hash"], "m",
            "another SidecarSet's version is kept"
        );
        let state: Value =
            serde_json::from_str(annotations[STATE_ANNOTATION].as_str().expect("text"))
                .expect("JSON");
        assert_eq!(
            state["log"]["lastContainerStatuses"]["log-agent"]["imageID"],
            "sha-1"
        );
        assert_eq!(state["mesh"]["revision"], "m");
    }

    #[test]
    fn a_finish_drops_only_its_own_state_entry() {
        let patch = finish_patch(&pod(), "mesh");
        assert_eq!(
            patch["metadata"]["annotations"][STATE_ANNOTATION],
            Value::Null
        );
        let mut two = pod();
        let images = changed_images(&two, &set("agent:2"));
        let started = start_patch(&two, &images, TARGET);
        let state = started["metadata"]["annotations"][STATE_ANNOTATION]
            .as_str()
            .expect("text")
            .to_owned();
        two.metadata
            .annotations
            .as_mut()
            .expect("annotations")
            .insert(STATE_ANNOTATION.to_owned(), state);
        let patch = finish_patch(&two, "mesh");
        let left: Value = serde_json::from_str(
            patch["metadata"]["annotations"][STATE_ANNOTATION]
                .as_str()
                .expect("text"),
        )
        .expect("JSON");
        assert!(
            left.get("mesh").is_none() && left.get("log").is_some(),
            "{left}"
        );
    }
}

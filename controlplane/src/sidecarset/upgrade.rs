//! The pod patches of an in-place sidecar upgrade (pure). Starting one changes only the
//! images of the SidecarSet's sidecars that differ (the kubelet restarts just those
//! containers; the pod's own containers are never named) — for a HotUpgrade sidecar the
//! idle container's, the working-slot annotation flipping to it (`hot`) — records the new
//! versions in the pod's annotations and the upgrade in [`STATE_ANNOTATION`]; a hot
//! sidecar's reset sets the old container to the empty image once the new one is ready;
//! finishing drops the state entry. All are strategic merge patches: containers merge by
//! name.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Map, Value, json};

use super::hot::{Reset, Swap, reset_annotations, swap_annotations, swaps};
use super::marks::{HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION, recorded};
use super::pod_state::{STATE_ANNOTATION, container_ids, upgrade_entry_for};
use crate::api::SidecarSet;

/// The sidecars of `set` whose image in `pod` is not the SidecarSet's: container → new
/// image (for a hot sidecar whose working container runs another image, its idle
/// container).
pub fn changed_images(pod: &Pod, set: &SidecarSet) -> Vec<(String, String)> {
    let mut changed = cold_changed_images(pod, set);
    changed
        .extend((swaps(pod, &set.spec.containers).into_iter()).map(|swap| (swap.idle, swap.image)));
    changed
}

fn cold_changed_images(pod: &Pod, set: &SidecarSet) -> Vec<(String, String)> {
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
    /// The SidecarSet's resourceVersion: a hot sidecar's new container's version.
    pub version: &'a str,
}

/// The patch starting the upgrade of `pod`'s sidecars to `images`, `swaps` among them.
pub fn start_patch(
    pod: &Pod,
    images: &[(String, String)],
    swaps: &[Swap],
    target: Target<'_>,
) -> Value {
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
    let mut written = json!({
        HASH_ANNOTATION: Value::Object(hashes).to_string(),
        HASH_WITHOUT_IMAGE_ANNOTATION: Value::Object(bare).to_string(),
        STATE_ANNOTATION: Value::Object(state).to_string(),
    });
    for (key, value) in swap_annotations(&annotations, swaps, target.version) {
        written[key] = Value::String(value);
    }
    json!({
        "metadata": { "annotations": written },
        "spec": { "containers": containers },
    })
}

/// The patch setting the old containers of `resets` (hot sidecars whose new container is
/// ready) to their empty image; the state of `set_name`'s upgrade records what they run
/// now, so the upgrade is done only once they run the empty image.
pub fn reset_patch(pod: &Pod, resets: &[Reset], set_name: &str) -> Value {
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let mut state = recorded(&annotations, STATE_ANNOTATION);
    let entry = state
        .entry(set_name.to_owned())
        .or_insert_with(|| json!({}));
    if !entry["lastContainerStatuses"].is_object() {
        entry["lastContainerStatuses"] = json!({});
    }
    for reset in resets {
        entry["lastContainerStatuses"][&reset.slot] = container_ids(pod, &reset.slot);
    }
    let mut written = json!({ STATE_ANNOTATION: Value::Object(state).to_string() });
    for (key, value) in reset_annotations(resets) {
        written[key] = Value::String(value);
    }
    let containers: Vec<Value> = (resets.iter())
        .map(|r| json!({ "name": r.slot, "image": r.empty_image }))
        .collect();
    json!({
        "metadata": { "annotations": written },
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
    use crate::sidecarset::hot::resets;

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
        version: "9",
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
        let patch = start_patch(&pod(), &images, &[], TARGET);
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
        let started = start_patch(&two, &images, &[], TARGET);
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

    fn hot_pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": { "name": "web-1", "annotations": {
                "kruise.io/sidecarset-working-hotupgrade-container": r#"{"envoy":"envoy-1"}"#,
                "version.sidecarset.kruise.io/envoy-1": "1",
            } },
            "spec": { "containers": [
                { "name": "envoy-1", "image": "envoy:1" },
                { "name": "envoy-2", "image": "empty:1" },
                { "name": "web", "image": "web:1" },
            ] },
            "status": { "containerStatuses": [
                { "name": "envoy-1", "image": "envoy:1", "imageID": "sha-1", "containerID": "c-1", "ready": true, "restartCount": 0 },
                { "name": "envoy-2", "image": "empty:1", "imageID": "sha-e", "containerID": "c-2", "ready": true, "restartCount": 0 },
            ] },
        }))
        .expect("a pod")
    }

    fn hot_set() -> SidecarSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
            "metadata": { "name": "log" },
            "spec": { "namespace": "shop", "containers": [{
                "name": "envoy", "image": "envoy:2",
                "upgradeStrategy": { "upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1" }
            }] },
        }))
        .expect("a SidecarSet")
    }

    fn annotation(patch: &Value, key: &str) -> Value {
        let text = patch["metadata"]["annotations"][key]
            .as_str()
            .expect("text");
        serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
    }

    #[test]
    fn a_hot_start_puts_the_new_image_in_the_idle_container_and_flips_the_working_one() {
        let (pod, set) = (hot_pod(), hot_set());
        let images = changed_images(&pod, &set);
        assert_eq!(images, [("envoy-2".to_owned(), "envoy:2".to_owned())]);
        let patch = start_patch(&pod, &images, &swaps(&pod, &set.spec.containers), TARGET);
        assert_eq!(
            patch["spec"]["containers"],
            json!([{ "name": "envoy-2", "image": "envoy:2" }]),
            "the working container is not touched"
        );
        assert_eq!(
            annotation(&patch, "kruise.io/sidecarset-working-hotupgrade-container"),
            json!({ "envoy": "envoy-2" })
        );
        assert_eq!(
            annotation(&patch, "version.sidecarset.kruise.io/envoy-2"),
            json!(9)
        );
        let state = annotation(&patch, STATE_ANNOTATION);
        assert_eq!(
            state["log"]["lastContainerStatuses"]["envoy-2"]["imageID"], "sha-e",
            "done once the idle container moved on from the empty image"
        );
    }

    #[test]
    fn a_reset_empties_the_old_container_and_waits_for_it() {
        let mut pod = hot_pod();
        let swapped = start_patch(
            &pod,
            &changed_images(&pod, &hot_set()),
            &swaps(&pod, &hot_set().spec.containers),
            TARGET,
        );
        // The pod after the swap: its annotations and envoy-2's image as patched.
        let annotations = pod.metadata.annotations.as_mut().expect("annotations");
        for (key, value) in swapped["metadata"]["annotations"].as_object().expect("map") {
            annotations.insert(key.clone(), value.as_str().unwrap_or_default().to_owned());
        }
        pod.spec.as_mut().expect("spec").containers[1].image = Some("envoy:2".into());
        let resets = resets(&pod, &hot_set().spec.containers);
        let patch = reset_patch(&pod, &resets, "log");
        assert_eq!(
            patch["spec"]["containers"],
            json!([{ "name": "envoy-1", "image": "empty:1" }])
        );
        assert_eq!(
            annotation(&patch, "version.sidecarset.kruise.io/envoy-1"),
            json!(0)
        );
        let state = annotation(&patch, STATE_ANNOTATION);
        let last = &state["log"]["lastContainerStatuses"];
        assert_eq!(last["envoy-1"]["imageID"], "sha-1", "{state}");
        assert_eq!(
            last["envoy-2"]["imageID"], "sha-e",
            "the swap's record is kept"
        );
    }
}

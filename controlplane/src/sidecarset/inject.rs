//! Injection at pod creation (pure): a pod and the SidecarSets it matches → the JSON patch
//! that adds their sidecars, as OpenKruise's pod webhook does:
//!
//! - containers BeforeAppContainer (default) or AfterAppContainer the pod's own, each with
//!   `IS_INJECTED=true`, the variables `transferEnv` names and, under
//!   `shareVolumePolicy: enabled`, the pod's own containers' volume mounts (and the
//!   variables their `subPathExpr`s read); a container the pod already has by that name is
//!   replaced where it stands;
//! - a HotUpgrade sidecar as two containers `<name>-1` (its image, working) and `<name>-2`
//!   (`hotUpgradeEmptyImage`, idle), with the working-slot and version annotations
//!   (`hot`);
//! - init containers after the pod's own, by name;
//! - the volumes the sidecars mount (a pod's own volume of that name wins), the
//!   `imagePullSecrets`, the `patchPodMetadata` annotations;
//! - the annotations `kruise.io/sidecarset-hash`, `kruise.io/sidecarset-hash-without-image`
//!   (JSON: SidecarSet name → its version, sidecars and revision) and
//!   `kruise.io/sidecarset-injected-list` (the names, sorted, comma-separated).
//!
//! Two SidecarSets that would inject the same container name are refused, naming both:
//! one would silently replace the other's sidecar.
//!
//! The pod's own arrays are edited as JSON, never through the typed Pod, so fields this
//! build's API types do not know survive.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, Volume, VolumeMount};
use serde_json::{Map, Value, json};

use super::hash::{sidecarset_hash, sidecarset_hash_without_image};
use super::hot;
use super::marks::{
    HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION, INJECTED_ENV, INJECTED_LIST_ANNOTATION,
    recorded,
};
use super::metadata::{MetadataError, patch_annotations};
use crate::api::SidecarSet;
use crate::api::sidecarset::{PodInjectPolicy, SidecarContainer};

/// Why a pod is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InjectError {
    #[error(
        "the pod matches the SidecarSets {first} and {second}, which both inject a container named {container}: \
         change one SidecarSet's selector or container name"
    )]
    SameContainer {
        container: String,
        first: String,
        second: String,
    },
    #[error("the pod cannot be read: {0}")]
    Pod(String),
    #[error(transparent)]
    Metadata(#[from] MetadataError),
}

/// The JSON patch injecting `sets` (the SidecarSets the pod matches, injection not paused)
/// into `pod` (the review's object); `now` is the RFC 3339 time recorded as their update.
/// Empty when there is nothing to inject.
pub fn injection_patch(
    pod: &Value,
    sets: &[&SidecarSet],
    now: &str,
) -> Result<Vec<Value>, InjectError> {
    if sets.is_empty() {
        return Ok(Vec::new());
    }
    let mut sets = sets.to_vec();
    sets.sort_by(|a, b| name_of(a).cmp(name_of(b)));
    refuse_shared_names(&sets)?;
    let typed: Pod =
        serde_json::from_value(pod.clone()).map_err(|e| InjectError::Pod(e.to_string()))?;
    let spec = typed.spec.clone().unwrap_or_default();
    let mut built = Built::default();
    for set in &sets {
        built.add_set(set, &typed, &spec.containers);
    }
    let mut patch = vec![json!({
        "op": "add",
        "path": "/spec/containers",
        "value": merge_containers(pod.pointer("/spec/containers"), &built.containers),
    })];
    if !built.init_containers.is_empty() {
        built.init_containers.sort_by(|a, b| a.name.cmp(&b.name));
        let placed: Vec<_> = built
            .init_containers
            .iter()
            .map(|c| (c.clone(), PodInjectPolicy::AfterAppContainer))
            .collect();
        patch.push(json!({ "op": "add", "path": "/spec/initContainers", "value": merge_containers(pod.pointer("/spec/initContainers"), &placed) }));
    }
    if let Some(volumes) = merged_by_name(pod.pointer("/spec/volumes"), &built.volumes) {
        patch.push(json!({ "op": "add", "path": "/spec/volumes", "value": volumes }));
    }
    if let Some(secrets) =
        merged_by_name(pod.pointer("/spec/imagePullSecrets"), &built.pull_secrets)
    {
        patch.push(json!({ "op": "add", "path": "/spec/imagePullSecrets", "value": secrets }));
    }
    let mut annotations = annotations_after(&typed, &sets, now)?;
    add_hot_annotations(&mut annotations, &built.hot_sidecars);
    patch.push(json!({ "op": "add", "path": "/metadata/annotations", "value": annotations }));
    Ok(patch)
}

fn name_of(set: &SidecarSet) -> &str {
    set.metadata.name.as_deref().unwrap_or_default()
}

/// Refuses two SidecarSets naming the same container (or init container).
fn refuse_shared_names(sets: &[&SidecarSet]) -> Result<(), InjectError> {
    let mut owners: BTreeMap<&str, &str> = BTreeMap::new();
    for set in sets {
        let sidecars = set.spec.containers.iter().chain(&set.spec.init_containers);
        for name in sidecars
            .map(|s| s.container.name.as_str())
            .collect::<BTreeSet<_>>()
        {
            if let Some(first) = owners.insert(name, name_of(set)) {
                return Err(InjectError::SameContainer {
                    container: name.to_owned(),
                    first: first.to_owned(),
                    second: name_of(set).to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// What the SidecarSets add to the pod.
#[derive(Default)]
struct Built {
    containers: Vec<(Container, PodInjectPolicy)>,
    init_containers: Vec<Container>,
    volumes: Vec<Value>,
    pull_secrets: Vec<Value>,
    /// The names of the hot sidecars (injected as two containers each).
    hot_sidecars: Vec<String>,
}

impl Built {
    fn add_set(&mut self, set: &SidecarSet, pod: &Pod, app_containers: &[Container]) {
        let volumes: BTreeMap<&str, &Volume> = set
            .spec
            .volumes
            .iter()
            .map(|v| (v.name.as_str(), v))
            .collect();
        for sidecar in &set.spec.containers {
            let container = built_container(sidecar, pod, app_containers);
            self.add_volumes_of(&container, &volumes);
            let policy = sidecar.pod_inject_policy.unwrap_or_default();
            if sidecar.upgrade_strategy.is_hot() {
                let empty_image = &sidecar.upgrade_strategy.hot_upgrade_empty_image;
                for slot in hot::slot_containers(&container, empty_image) {
                    self.containers.push((slot, policy));
                }
                self.hot_sidecars.push(container.name);
            } else {
                self.containers.push((container, policy));
            }
        }
        for sidecar in &set.spec.init_containers {
            let container = built_container(sidecar, pod, app_containers);
            self.add_volumes_of(&container, &volumes);
            self.init_containers.push(container);
        }
        let secrets = set.spec.image_pull_secrets.iter();
        self.pull_secrets
            .extend(secrets.filter_map(|s| serde_json::to_value(s).ok()));
    }

    /// The SidecarSet's volumes the container mounts (a shared mount names a volume the
    /// pod has already).
    fn add_volumes_of(&mut self, container: &Container, volumes: &BTreeMap<&str, &Volume>) {
        for mount in container.volume_mounts.iter().flatten() {
            if let Some(volume) = volumes.get(mount.name.as_str()) {
                self.volumes.extend(serde_json::to_value(volume).ok());
            }
        }
    }
}

/// The sidecar as injected: its own mounts and variables, then the shared mounts, the
/// marker variable and the transferred variables (a name it sets itself wins).
fn built_container(
    sidecar: &SidecarContainer,
    pod: &Pod,
    app_containers: &[Container],
) -> Container {
    let mut container = sidecar.container.clone();
    let mut env = container.env.take().unwrap_or_default();
    env.push(EnvVar {
        name: INJECTED_ENV.to_owned(),
        value: Some("true".to_owned()),
        ..EnvVar::default()
    });
    let mut added = super::env::transferred(sidecar, pod, app_containers);
    if sidecar.share_volume_policy.enabled() {
        let (mounts, mount_env) = super::env::shared_mounts(app_containers);
        let mut own = container.volume_mounts.take().unwrap_or_default();
        for mount in mounts {
            if !own
                .iter()
                .any(|m: &VolumeMount| m.name == mount.name || m.mount_path == mount.mount_path)
            {
                own.push(mount);
            }
        }
        container.volume_mounts = Some(own);
        added.extend(mount_env);
    }
    for variable in added {
        if !env.iter().any(|e| e.name == variable.name) {
            env.push(variable);
        }
    }
    container.env = Some(env);
    container
}

/// The pod's containers (as JSON) with `injected` placed: a name the pod has is replaced
/// where it stands, others go before or after the pod's own.
fn merge_containers(own: Option<&Value>, injected: &[(Container, PodInjectPolicy)]) -> Value {
    let mut own: Vec<Value> = own.and_then(Value::as_array).cloned().unwrap_or_default();
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for (container, policy) in injected {
        let Ok(value) = serde_json::to_value(container) else {
            continue;
        };
        if let Some(slot) = own.iter_mut().find(|c| c["name"] == json!(container.name)) {
            *slot = value;
            continue;
        }
        match policy {
            PodInjectPolicy::BeforeAppContainer => before.push(value),
            PodInjectPolicy::AfterAppContainer => after.push(value),
        }
    }
    Value::Array(before.into_iter().chain(own).chain(after).collect())
}

/// The pod's list (as JSON) with each of `added` whose name it lacks appended, or `None`
/// when nothing is added.
fn merged_by_name(own: Option<&Value>, added: &[Value]) -> Option<Value> {
    let mut list: Vec<Value> = own.and_then(Value::as_array).cloned().unwrap_or_default();
    let before = list.len();
    for item in added {
        if !list.iter().any(|existing| existing["name"] == item["name"]) {
            list.push(item.clone());
        }
    }
    (list.len() > before).then_some(Value::Array(list))
}

/// The pod's annotations after injection: `patchPodMetadata`, then the versions and the
/// list of SidecarSets.
fn annotations_after(
    pod: &Pod,
    sets: &[&SidecarSet],
    now: &str,
) -> Result<Map<String, Value>, InjectError> {
    let mut annotations = pod.metadata.annotations.clone().unwrap_or_default();
    for set in sets {
        patch_annotations(&mut annotations, &set.spec.patch_pod_metadata, name_of(set))?;
    }
    let mut hashes = recorded(&annotations, HASH_ANNOTATION);
    let mut without_image = recorded(&annotations, HASH_WITHOUT_IMAGE_ANNOTATION);
    let mut names: BTreeSet<String> = (annotations.get(INJECTED_LIST_ANNOTATION).into_iter())
        .flat_map(|list| list.split(','))
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect();
    for set in sets {
        let name = name_of(set);
        let sidecars: BTreeSet<&str> =
            (set.spec.containers.iter().chain(&set.spec.init_containers))
                .map(|s| s.container.name.as_str())
                .collect();
        let mut version = json!({ "updateTimestamp": now, "hash": sidecarset_hash(set), "sidecarSetName": name, "sidecarList": sidecars });
        let mut bare = version.clone();
        bare["hash"] = json!(sidecarset_hash_without_image(set));
        if let Some(revision) = set
            .status
            .as_ref()
            .map(|s| &s.latest_revision)
            .filter(|r| !r.is_empty())
        {
            version["controllerRevision"] = json!(revision);
        }
        hashes.insert(name.to_owned(), version);
        without_image.insert(name.to_owned(), bare);
        names.insert(name.to_owned());
    }
    annotations.insert(
        HASH_ANNOTATION.to_owned(),
        Value::Object(hashes).to_string(),
    );
    annotations.insert(
        HASH_WITHOUT_IMAGE_ANNOTATION.to_owned(),
        Value::Object(without_image).to_string(),
    );
    annotations.insert(
        INJECTED_LIST_ANNOTATION.to_owned(),
        names.into_iter().collect::<Vec<_>>().join(","),
    );
    Ok(annotations
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect())
}

/// The working-slot map and the versions of each hot sidecar, as OpenKruise's webhook
/// writes them at creation.
fn add_hot_annotations(annotations: &mut Map<String, Value>, hot_sidecars: &[String]) {
    if hot_sidecars.is_empty() {
        return;
    }
    let mut working = (annotations.get(hot::WORKING_SLOT_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .and_then(|value| value.as_object().cloned())
        .unwrap_or_default();
    for name in hot_sidecars {
        for (key, value) in hot::injected_annotations(name, &mut working) {
            annotations.insert(key, Value::String(value));
        }
    }
    annotations.insert(
        hot::WORKING_SLOT_ANNOTATION.to_owned(),
        Value::String(Value::Object(working).to_string()),
    );
}

#[cfg(test)]
#[path = "inject_tests.rs"]
mod tests;

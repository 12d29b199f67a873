//! Which containers an in-place update restarts, and in what order (OpenKruise
//! `defaultPatchUpdateSpecToPod` with `pkg/util/containerlaunchpriority` and the
//! `InPlaceUpdateEnvFromMetadata` gate): a container restarts when its image changes or
//! when its env reads a label or annotation that changed (`env[].valueFrom.fieldRef`
//! `metadata.labels['k']`); those with the highest launch priority go first, each later
//! batch only once the one before is running and ready. Pure: no clock, no client.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, ContainerStatus};

use super::MetadataChanges;
use super::state::RefMetadata;

/// Pod annotation: `Ordered` gives containers priority in declaration order.
pub const LAUNCH_PRIORITY_ANNOTATION: &str = "apps.kruise.io/container-launch-priority";
/// Container env: an integer priority, higher first; absent means 0.
pub const PRIORITY_ENV: &str = "KRUISE_CONTAINER_PRIORITY";
/// Container env OpenKruise's webhook writes (`configMapKeyRef.key` = `p_<priority>`), read
/// so pods created under OpenKruise keep their order.
pub const BARRIER_ENV: &str = "KRUISE_CONTAINER_BARRIER";

/// Each container's launch priority: `Ordered` on the pod gives the first container the
/// highest (0, then -1, -2, …); otherwise `KRUISE_CONTAINER_PRIORITY` (or OpenKruise's
/// barrier env), 0 when absent or not an integer.
pub fn container_priorities(
    containers: &[Container],
    annotations: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, i64> {
    let ordered = annotations
        .and_then(|a| a.get(LAUNCH_PRIORITY_ANNOTATION))
        .is_some_and(|v| v == "Ordered");
    containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let priority = if ordered {
                -i64::try_from(i).unwrap_or(i64::MAX)
            } else {
                env_priority(c).unwrap_or(0)
            };
            (c.name.clone(), priority)
        })
        .collect()
}

fn env_priority(container: &Container) -> Option<i64> {
    let env = container.env.as_deref().unwrap_or_default();
    env.iter().find_map(|e| match e.name.as_str() {
        PRIORITY_ENV => e.value.as_deref()?.trim().parse().ok(),
        BARRIER_ENV => {
            let key = &e.value_from.as_ref()?.config_map_key_ref.as_ref()?.key;
            key.strip_prefix("p_")?.parse().ok()
        }
        _ => None,
    })
}

/// The containers of `waiting` that restart now: those of the highest priority.
pub fn next_batch(
    waiting: &BTreeSet<String>,
    priorities: &BTreeMap<String, i64>,
) -> BTreeSet<String> {
    let priority = |name: &String| priorities.get(name).copied().unwrap_or(0);
    let Some(highest) = waiting.iter().map(priority).max() else {
        return BTreeSet::new();
    };
    waiting
        .iter()
        .filter(|name| priority(name) == highest)
        .cloned()
        .collect()
}

/// A pod-metadata key an env var can read.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MetaKey {
    Label(String),
    Annotation(String),
}

/// The key a downward-API field path reads (`metadata.labels['k']`,
/// `metadata.annotations['k']`); other paths (`metadata.name`, …) never change in place.
pub fn meta_key(field_path: &str) -> Option<MetaKey> {
    let subscript = |prefix: &str| {
        field_path
            .strip_prefix(prefix)?
            .strip_prefix("['")?
            .strip_suffix("']")
            .map(str::to_owned)
    };
    subscript("metadata.labels")
        .map(MetaKey::Label)
        .or_else(|| subscript("metadata.annotations").map(MetaKey::Annotation))
}

/// The containers whose env reads a label or annotation that `labels` / `annotations`
/// change, each with the keys it reads and their new values (empty when removed): the
/// kubelet does not restart a container for a metadata change, so the node's agent must.
pub fn env_readers(
    containers: &[Container],
    labels: &MetadataChanges,
    annotations: &MetadataChanges,
) -> BTreeMap<String, RefMetadata> {
    let mut readers = BTreeMap::new();
    for container in containers {
        let mut read = RefMetadata::default();
        let env = container.env.as_deref().unwrap_or_default();
        let paths = env
            .iter()
            .filter_map(|e| Some(&e.value_from.as_ref()?.field_ref.as_ref()?.field_path));
        for key in paths.filter_map(|p| meta_key(p)) {
            let (changes, into, key) = match key {
                MetaKey::Label(k) => (labels, &mut read.labels, k),
                MetaKey::Annotation(k) => (annotations, &mut read.annotations, k),
            };
            if let Some(value) = changes.get(&key) {
                into.insert(key, value.clone().unwrap_or_default());
            }
        }
        if !read.is_empty() {
            readers.insert(container.name.clone(), read);
        }
    }
    readers
}

/// Why a container of the running batch will not come up by itself, from its status:
/// the kubelet is backing off a pull or a crash, or cannot create it.
pub fn container_failure(status: &ContainerStatus) -> Option<String> {
    const FAILED: &[&str] = &[
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CrashLoopBackOff",
        "CreateContainerError",
        "CreateContainerConfigError",
        "RunContainerError",
    ];
    let waiting = status.state.as_ref()?.waiting.as_ref()?;
    let reason = waiting.reason.as_deref()?;
    if !FAILED.contains(&reason) {
        return None;
    }
    Some(match waiting.message.as_deref().filter(|m| !m.is_empty()) {
        Some(message) => format!("{reason}: {message}"),
        None => reason.to_owned(),
    })
}

#[cfg(test)]
#[path = "inplace_batches_tests.rs"]
mod tests;

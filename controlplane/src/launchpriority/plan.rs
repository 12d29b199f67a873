//! The launch-priority rules, pure (OpenKruise's `containerLaunchPriorityInitialization`
//! and its controller's next key, read for semantics):
//!
//! - [`priorities`]: each container's priority, or none when the pod does not ask for an
//!   order (one container, no `Ordered`, every `KRUISE_CONTAINER_PRIORITY` equal);
//! - [`barrier_patch`]: the JSON patch giving every container below the highest priority
//!   the barrier env (and dropping a stale one), idempotent under reinvocation;
//! - [`keys_due`]: on a running pod, the barrier keys whose containers may start now.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{Value, json};

pub use crate::workload::inplace::batches::{
    BARRIER_ENV, LAUNCH_PRIORITY_ANNOTATION, PRIORITY_ENV,
};

/// The annotation value that orders containers as the spec lists them.
pub const ORDERED: &str = "Ordered";

/// The value the controller writes under each key (OpenKruise's).
pub const KEY_VALUE: &str = "true";

/// The ConfigMap holding a pod's barrier keys.
pub fn barrier_name(pod: &str) -> String {
    format!("{pod}-barrier")
}

/// The key containers of `priority` wait for.
pub fn barrier_key(priority: i32) -> String {
    format!("p_{priority}")
}

/// Why a pod's priorities cannot be read; the webhook refuses the pod with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "container {container} has {PRIORITY_ENV} {value:?}, but a launch priority is a whole number from -2147483647 to 2147483647"
)]
pub struct PriorityError {
    pub container: String,
    pub value: String,
}

/// Each container's launch priority in spec order, higher first; `None` when the pod asks
/// for no order. `Ordered` gives 0, -1, -2, … in spec order (and wins over the env);
/// otherwise `KRUISE_CONTAINER_PRIORITY`, 0 when absent. A value that is not a whole
/// number in range is refused, as OpenKruise refuses it.
pub fn priorities(pod: &Pod) -> Result<Option<Vec<i32>>, PriorityError> {
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice());
    let containers = containers.unwrap_or_default();
    if containers.len() < 2 {
        return Ok(None);
    }
    if is_ordered(pod) {
        // Spec order: the first container is the highest (0), as OpenKruise counts.
        let ordered = (0..containers.len()).map(|i| -(i32::try_from(i).unwrap_or(i32::MAX)));
        return Ok(Some(ordered.collect()));
    }
    let env: Vec<i32> = containers
        .iter()
        .map(env_priority)
        .collect::<Result<_, _>>()?;
    let all_equal = env.iter().all(|p| *p == env[0]);
    Ok((!all_equal).then_some(env))
}

/// Whether the pod carries `apps.kruise.io/container-launch-priority: Ordered`.
fn is_ordered(pod: &Pod) -> bool {
    (pod.metadata.annotations.as_ref())
        .and_then(|a| a.get(LAUNCH_PRIORITY_ANNOTATION))
        .is_some_and(|v| v == ORDERED)
}

/// A container's `KRUISE_CONTAINER_PRIORITY`, 0 when absent.
fn env_priority(container: &Container) -> Result<i32, PriorityError> {
    let env = container.env.as_deref().unwrap_or_default();
    let Some(var) = env.iter().find(|e| e.name == PRIORITY_ENV) else {
        return Ok(0);
    };
    let value = var.value.clone().unwrap_or_default();
    match value.parse::<i32>() {
        Ok(priority) if priority != i32::MIN => Ok(priority),
        _ => Err(PriorityError {
            container: container.name.clone(),
            value,
        }),
    }
}

/// Whether a pod asks for a launch order at all, read cheaply before anything is parsed:
/// the `Ordered` annotation or a `KRUISE_CONTAINER_PRIORITY` env (or a barrier env an
/// earlier call of the webhook wrote, which a reinvocation must keep right).
pub fn asks_for_order(pod: &Value) -> bool {
    let annotation = &pod["metadata"]["annotations"][LAUNCH_PRIORITY_ANNOTATION];
    if annotation.as_str() == Some(ORDERED) {
        return true;
    }
    let containers = pod["spec"]["containers"].as_array();
    containers.into_iter().flatten().any(|c| {
        let env = c["env"].as_array();
        env.into_iter().flatten().any(|e| {
            let name = e["name"].as_str();
            name == Some(PRIORITY_ENV) || name == Some(BARRIER_ENV)
        })
    })
}

/// The barrier env a container of `priority` in pod `pod` waits on.
pub fn barrier_env(pod: &str, priority: i32) -> Value {
    json!({
        "name": BARRIER_ENV,
        "valueFrom": { "configMapKeyRef": { "name": barrier_name(pod), "key": barrier_key(priority) } },
    })
}

/// The JSON patch that leaves each container of `pod` (named `name`) with the barrier env
/// it should have: none for the highest priority (it starts at once, without waiting for
/// the controller), `p_<priority>` for the others. `priorities: None` (the pod asks for
/// no order) drops any barrier env. Empty when the pod is already right, so a reinvoked
/// webhook changes nothing twice.
pub fn barrier_patch(pod: &Pod, name: &str, priorities: Option<&[i32]>) -> Vec<Value> {
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice());
    let containers = containers.unwrap_or_default();
    let highest = priorities.and_then(|p| p.iter().max().copied());
    let mut patch = Vec::new();
    for (i, container) in containers.iter().enumerate() {
        let priority = priorities.and_then(|p| p.get(i).copied());
        let wanted = priority
            .filter(|p| Some(*p) != highest)
            .map(|p| barrier_env(name, p));
        patch.extend(container_env_op(i, container, wanted));
    }
    patch
}

/// The one operation (or none) that gives container `i` the `wanted` barrier env.
fn container_env_op(i: usize, container: &Container, wanted: Option<Value>) -> Option<Value> {
    let env = container.env.as_deref().unwrap_or_default();
    let present = env.iter().position(|e| e.name == BARRIER_ENV);
    let path = format!("/spec/containers/{i}/env");
    match (present, wanted) {
        (None, None) => None,
        (Some(at), None) => Some(json!({ "op": "remove", "path": format!("{path}/{at}") })),
        (None, Some(var)) if container.env.is_none() => {
            Some(json!({ "op": "add", "path": path, "value": [var] }))
        }
        (None, Some(var)) => {
            Some(json!({ "op": "add", "path": format!("{path}/-"), "value": var }))
        }
        (Some(at), Some(var)) => {
            let current = serde_json::to_value(&env[at]).unwrap_or(Value::Null);
            (current != var)
                .then(|| json!({ "op": "replace", "path": format!("{path}/{at}"), "value": var }))
        }
    }
}

/// Characters of a generated name suffix: the apiserver's own (no vowels, no confusable
/// digits), so a name made here looks like one it would make.
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// The apiserver's suffix length and the longest `generateName` prefix it keeps.
const SUFFIX_LEN: usize = 5;
const MAX_PREFIX: usize = 63 - SUFFIX_LEN;

/// The name of a pod created with only `generateName`, made at admission as OpenKruise
/// makes it: the barrier env must name the ConfigMap, which is named after the pod, and
/// the apiserver only names the pod after the webhooks. `random` draws an index below its
/// argument.
pub fn generated_name(generate_name: &str, mut random: impl FnMut(usize) -> usize) -> String {
    let prefix: String = generate_name.chars().take(MAX_PREFIX).collect();
    let suffix: String = (0..SUFFIX_LEN)
        .map(|_| char::from(NAME_ALPHABET[random(NAME_ALPHABET.len()) % NAME_ALPHABET.len()]))
        .collect();
    format!("{prefix}{suffix}")
}

/// The barrier key each container of a running pod waits on (from its env, so pods
/// OpenKruise's webhook wrote are read the same), by container name.
pub fn barrier_keys(pod: &Pod) -> BTreeMap<String, i32> {
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice());
    (containers.unwrap_or_default().iter())
        .filter_map(|c| Some((c.name.clone(), barrier_priority(c)?)))
        .collect()
}

/// The priority of a container's barrier env (`configMapKeyRef.key` `p_<n>`).
fn barrier_priority(container: &Container) -> Option<i32> {
    let env = container.env.as_deref().unwrap_or_default();
    let var = env.iter().find(|e| e.name == BARRIER_ENV)?;
    let key = &var.value_from.as_ref()?.config_map_key_ref.as_ref()?.key;
    key.strip_prefix("p_")?.parse().ok()
}

/// Whether the pod has containers waiting on a barrier.
pub fn has_barrier(pod: &Pod) -> bool {
    // Asked on every pod change the cache sees: no allocation.
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice());
    (containers.unwrap_or_default().iter()).any(|c| barrier_priority(c).is_some())
}

/// The barrier keys to add now, highest priority first: a key is due once every container
/// that starts before it is ready (containers without a barrier, and those of a higher
/// priority). OpenKruise adds the key of the highest priority whose containers are not
/// ready; waiting for readiness of everything above is the same order, and also holds when
/// the highest priority has no barrier (it has none here) or several keys fell due while
/// no controller was running. `present` are the keys the ConfigMap has. A pod that is
/// finished or being deleted gets none.
pub fn keys_due(pod: &Pod, present: &BTreeSet<String>) -> Vec<String> {
    if is_finished(pod) {
        return Vec::new();
    }
    let barriers = barrier_keys(pod);
    let ready = ready_containers(pod);
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice());
    let names: Vec<&str> = (containers.unwrap_or_default().iter())
        .map(|c| c.name.as_str())
        .collect();
    let levels: BTreeSet<i32> = barriers.values().copied().collect();
    let mut due = Vec::new();
    for &level in levels.iter().rev() {
        let before_ready = names.iter().all(|name| match barriers.get(*name) {
            Some(priority) if *priority <= level => true,
            _ => ready.contains(*name),
        });
        if !before_ready {
            break;
        }
        let key = barrier_key(level);
        if !present.contains(&key) {
            due.push(key);
        }
    }
    due
}

/// The containers the kubelet reports ready.
fn ready_containers(pod: &Pod) -> BTreeSet<&str> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    (statuses.into_iter().flatten())
        .filter(|s| s.ready)
        .map(|s| s.name.as_str())
        .collect()
}

/// A pod whose containers will start no more: deleted, or in phase Succeeded or Failed.
pub fn is_finished(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_some() || matches!(phase, Some("Succeeded" | "Failed"))
}

/// Whether the controller has anything to do for the pod: containers waiting on a
/// barrier, not all ready yet, the pod still starting them.
pub fn is_waiting(pod: &Pod) -> bool {
    has_barrier(pod) && !containers_ready(pod) && !is_finished(pod)
}

/// Whether every container is ready (`ContainersReady` True): then every key is present,
/// since no container is ready before it started, and the pod needs no look.
pub fn containers_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    (conditions.into_iter().flatten()).any(|c| c.type_ == "ContainersReady" && c.status == "True")
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

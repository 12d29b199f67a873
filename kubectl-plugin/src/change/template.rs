//! The pod-template edits of `rollout restart` and `set image|env|resources`: pure
//! functions from the workload's pod spec and the command's arguments to the new
//! containers (the I/O layer sends them conditional on the object's resourceVersion).

use serde_json::{Map, Value, json};

/// The template annotation `kubectl rollout restart` (and kubectl-kruise's) sets: a new
/// value makes a new revision, so every pod is replaced under the update strategy.
pub const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";

/// The merge patch of `rollout restart` at `now` (RFC 3339, as kubectl writes it).
pub fn restart_patch(now: &str) -> Value {
    json!({ "spec": { "template": { "metadata": { "annotations": { RESTARTED_AT: now } } } } })
}

/// The container lists of a pod spec, init containers first (as `kubectl set image`
/// looks them up).
const CONTAINER_LISTS: [&str; 2] = ["initContainers", "containers"];

/// Whether a container name matches kubectl's `--containers` pattern (`*` is any run of
/// characters; the default `*` matches every container).
pub fn name_matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if name.len() < first.len() + last.len() || !name.starts_with(first) || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

/// The containers of the pod spec's `lists`, in the order of `lists`.
fn containers_mut<'a>(
    pod_spec: &'a mut Value,
    lists: &'a [&'a str],
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    let mut chosen: Vec<(usize, &mut Value)> = pod_spec
        .as_object_mut()
        .into_iter()
        .flat_map(|spec| spec.iter_mut())
        .filter_map(|(key, list)| Some((lists.iter().position(|l| l == key)?, list)))
        .collect();
    chosen.sort_by_key(|(order, _)| *order);
    chosen
        .into_iter()
        .flat_map(|(_, list)| list.as_array_mut().into_iter().flatten())
        .filter_map(Value::as_object_mut)
}

fn container_name(container: &Map<String, Value>) -> &str {
    container.get("name").and_then(Value::as_str).unwrap_or("")
}

/// `name=value` pairs, as `set image` and `--limits`/`--requests` take them.
pub fn parse_pairs(words: &[String], what: &str) -> Result<Vec<(String, String)>, String> {
    words
        .iter()
        .flat_map(|word| word.split(','))
        .filter(|pair| !pair.trim().is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if !name.trim().is_empty() && !value.trim().is_empty() => {
                Ok((name.trim().to_owned(), value.trim().to_owned()))
            }
            _ => Err(format!("\"{pair}\" is not {what}")),
        })
        .collect()
}

/// `set image`: each `container=image` (`*=image`: every container) applied to the pod
/// spec; the containers whose image changed. A name no container has is an error, as in
/// kubectl.
pub fn set_images(
    pod_spec: &mut Value,
    images: &[(String, String)],
) -> Result<Vec<String>, String> {
    if images.is_empty() {
        return Err("give at least one container=image".to_owned());
    }
    let mut changed = Vec::new();
    for (container, image) in images {
        let mut matched = false;
        for c in containers_mut(pod_spec, &CONTAINER_LISTS) {
            if container == "*" || container_name(c) == container {
                matched = true;
                if c.get("image").and_then(Value::as_str) != Some(image) {
                    changed.push(container_name(c).to_owned());
                    c.insert("image".to_owned(), json!(image));
                }
            }
        }
        if !matched {
            return Err(format!(
                "the pod template has no container named \"{container}\""
            ));
        }
    }
    Ok(changed)
}

/// One `set env` argument: `NAME=value` sets, `NAME-` removes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvEdit {
    Set(String, String),
    Remove(String),
}

pub fn parse_env(words: &[String]) -> Result<Vec<EnvEdit>, String> {
    if words.is_empty() {
        return Err("give at least one NAME=value (or NAME- to remove one)".to_owned());
    }
    words
        .iter()
        .map(|word| match word.split_once('=') {
            Some((name, value)) if !name.is_empty() => {
                Ok(EnvEdit::Set(name.to_owned(), value.to_owned()))
            }
            None if word.len() > 1 && word.ends_with('-') => {
                Ok(EnvEdit::Remove(word[..word.len() - 1].to_owned()))
            }
            _ => Err(format!("\"{word}\" is neither NAME=value nor NAME-")),
        })
        .collect()
}

fn apply_env(container: &mut Map<String, Value>, edits: &[EnvEdit]) -> bool {
    let before = container.get("env").cloned();
    let env = container
        .entry("env")
        .or_insert_with(|| json!([]))
        .as_array_mut();
    let Some(env) = env else { return false };
    for edit in edits {
        let name = match edit {
            EnvEdit::Set(name, _) | EnvEdit::Remove(name) => name,
        };
        let at = env.iter().position(|e| e.get("name") == Some(&json!(name)));
        match (edit, at) {
            (EnvEdit::Set(_, value), Some(at)) => env[at] = json!({ "name": name, "value": value }),
            (EnvEdit::Set(_, value), None) => env.push(json!({ "name": name, "value": value })),
            (EnvEdit::Remove(_), Some(at)) => {
                env.remove(at);
            }
            (EnvEdit::Remove(_), None) => {}
        }
    }
    if env.is_empty() && before.is_none() {
        container.remove("env");
    }
    container.get("env") != before.as_ref()
}

/// `set env` on the containers matching `pattern` (init containers too, as kubectl); the
/// containers that changed.
pub fn set_env(
    pod_spec: &mut Value,
    pattern: &str,
    edits: &[EnvEdit],
) -> Result<Vec<String>, String> {
    let mut matched = false;
    let mut changed = Vec::new();
    for c in containers_mut(pod_spec, &CONTAINER_LISTS) {
        if name_matches(pattern, container_name(c)) {
            matched = true;
            if apply_env(c, edits) {
                changed.push(container_name(c).to_owned());
            }
        }
    }
    if !matched {
        return Err(format!(
            "no container of the pod template matches \"{pattern}\""
        ));
    }
    Ok(changed)
}

/// `set resources`: `--limits` and `--requests` (`cpu=200m,memory=512Mi`) on the regular
/// containers matching `pattern`; the containers that changed.
pub fn set_resources(
    pod_spec: &mut Value,
    pattern: &str,
    limits: &[(String, String)],
    requests: &[(String, String)],
) -> Result<Vec<String>, String> {
    if limits.is_empty() && requests.is_empty() {
        return Err("give --limits or --requests (e.g. --limits=cpu=200m,memory=512Mi)".to_owned());
    }
    let mut matched = false;
    let mut changed = Vec::new();
    for c in containers_mut(pod_spec, &["containers"]) {
        if !name_matches(pattern, container_name(c)) {
            continue;
        }
        matched = true;
        let before = c.get("resources").cloned();
        let resources = c.entry("resources").or_insert_with(|| json!({}));
        for (field, pairs) in [("limits", limits), ("requests", requests)] {
            for (name, quantity) in pairs {
                resources[field][name] = json!(quantity);
            }
        }
        if c.get("resources") != before.as_ref() {
            changed.push(container_name(c).to_owned());
        }
    }
    if !matched {
        return Err(format!(
            "no container of the pod template matches \"{pattern}\""
        ));
    }
    Ok(changed)
}

/// The merge patch that writes the edited container lists back, conditional on the
/// object's resourceVersion (a concurrent change makes the apiserver refuse it).
pub fn containers_patch(pod_spec: &Value, resource_version: &str) -> Value {
    let mut spec = Map::new();
    for list in CONTAINER_LISTS {
        if let Some(containers) = pod_spec.get(list) {
            spec.insert(list.to_owned(), containers.clone());
        }
    }
    json!({
        "metadata": { "resourceVersion": resource_version },
        "spec": { "template": { "spec": spec } }
    })
}

#[cfg(test)]
#[path = "template_tests.rs"]
mod tests;

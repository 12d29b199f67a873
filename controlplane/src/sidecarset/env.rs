//! What a sidecar takes from the pod's own containers (pure): the variables `transferEnv`
//! names, and under `shareVolumePolicy: enabled` their volume mounts with the variables
//! those mounts' `subPathExpr`s read (`$(NAME)`), as OpenKruise's injection copies them.

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, VolumeMount};

use super::marks::INJECTED_ENV;
use crate::api::sidecarset::SidecarContainer;

/// The variables `sidecar.transferEnv` copies from the pod's own containers; one its
/// source container lacks is skipped, as OpenKruise skips it.
pub fn transferred(
    sidecar: &SidecarContainer,
    pod: &Pod,
    app_containers: &[Container],
) -> Vec<EnvVar> {
    let mut out = Vec::new();
    for transfer in &sidecar.transfer_env {
        let source = match transfer
            .source_container_name_from
            .as_ref()
            .and_then(|s| s.field_ref.as_ref())
        {
            Some(field) => pod_field(pod, &field.field_path).unwrap_or_default(),
            None => transfer.source_container_name.clone(),
        };
        let Some(container) = app_containers.iter().find(|c| c.name == source) else {
            continue;
        };
        let names = std::iter::once(&transfer.env_name)
            .filter(|n| !n.is_empty())
            .chain(&transfer.env_names);
        for name in names {
            out.extend(variable(container, name).cloned());
        }
    }
    out
}

/// `metadata.name`, `metadata.labels['k']` or `metadata.annotations['k']` of the pod.
fn pod_field(pod: &Pod, path: &str) -> Option<String> {
    if path == "metadata.name" {
        return pod.metadata.name.clone();
    }
    let (map, key) = if let Some(rest) = path.strip_prefix("metadata.labels[") {
        (pod.metadata.labels.as_ref(), rest)
    } else {
        (
            pod.metadata.annotations.as_ref(),
            path.strip_prefix("metadata.annotations[")?,
        )
    };
    let key = key
        .strip_suffix(']')?
        .trim_matches(|c| c == '\'' || c == '"');
    map?.get(key).cloned()
}

fn variable<'a>(container: &'a Container, name: &str) -> Option<&'a EnvVar> {
    container.env.iter().flatten().find(|e| e.name == name)
}

/// The volume mounts of the pod's own containers (sidecars left out), and the variables
/// their `subPathExpr`s read from the container that mounts them.
pub fn shared_mounts(app_containers: &[Container]) -> (Vec<VolumeMount>, Vec<EnvVar>) {
    let (mut mounts, mut env) = (Vec::new(), Vec::new());
    for container in app_containers.iter().filter(|c| !is_sidecar(c)) {
        for mount in container.volume_mounts.iter().flatten() {
            mounts.push(mount.clone());
            for name in expression_variables(mount.sub_path_expr.as_deref().unwrap_or_default()) {
                env.extend(variable(container, name).cloned());
            }
        }
    }
    (mounts, env)
}

/// Whether the container was injected by a SidecarSet.
pub fn is_sidecar(container: &Container) -> bool {
    variable(container, INJECTED_ENV).and_then(|e| e.value.as_deref()) == Some("true")
}

/// The names `$(NAME)` in a `subPathExpr`.
fn expression_variables(expression: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = expression;
    while let Some(start) = rest.find("$(") {
        let after = &rest[start + 2..];
        let Some(end) = after.find(')') else { break };
        let name = &after[..end];
        if !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
        {
            names.push(name);
        }
        rest = &after[end + 1..];
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_path_expressions_name_their_variables() {
        let cases = [
            ("", vec![]),
            ("logs", vec![]),
            ("$(POD_NAME)", vec!["POD_NAME"]),
            ("a/$(NODE)/$(POD_NAME)/b", vec!["NODE", "POD_NAME"]),
            ("$(unclosed", vec![]),
            ("$(bad name)", vec![]),
        ];
        for (expression, names) in cases {
            assert_eq!(expression_variables(expression), names, "{expression}");
        }
    }

    #[test]
    fn a_pod_field_is_read_from_its_name_labels_or_annotations() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "web-1", "labels": { "main": "web" }, "annotations": { "c": "app" } }
        }))
        .expect("pod");
        let cases = [
            ("metadata.name", Some("web-1")),
            ("metadata.labels['main']", Some("web")),
            ("metadata.annotations['c']", Some("app")),
            ("metadata.labels['absent']", None),
            ("spec.nodeName", None),
        ];
        for (path, value) in cases {
            assert_eq!(pod_field(&pod, path).as_deref(), value, "{path}");
        }
    }
}

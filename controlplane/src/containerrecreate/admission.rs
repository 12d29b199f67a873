//! What OpenKruise's mutating webhook for ContainerRecreateRequests decides (pure):
//! on create, the request is refused unless it names a running container of an active
//! pod bound to a node, and is otherwise filled from that pod (the pod name, UID and
//! node labels, each container's `statusContext`, the strategy's defaults); on update,
//! the spec and those labels, once set, are immutable. The route that reads the pod and
//! answers is `webhook`.
//!
//! What the CRD schema refuses on its own (no containers, a container named twice,
//! negative seconds, an unknown failure policy, a pod name that is no DNS subdomain) is
//! left to it, unchanged: as OpenKruise
//! checks those before it looks for the pod, the writer is told about its own mistake
//! rather than about the pod.

use std::collections::BTreeMap;

use crate::api::containerrecreaterequest::{
    ContainerRecreateRequestContainer, ContainerRecreateRequestContainerContext, FailurePolicy,
    NODE_NAME_LABEL, POD_NAME_LABEL, POD_UID_LABEL,
};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use serde_json::{Value, json};

use crate::admission::review::Refusal;
use crate::api::ContainerRecreateRequest;

/// The labels a request carries from admission on, never changed afterwards.
pub const IMMUTABLE_LABELS: [&str; 3] = [POD_NAME_LABEL, POD_UID_LABEL, NODE_NAME_LABEL];

/// The shortest `activeDeadlineSeconds` OpenKruise admits: a shorter one would fail the
/// request before the agent could answer.
pub const MIN_DEADLINE_SECONDS: i64 = 3;

/// The JSON patch that fills `request` from `pod` (the pod it names, `None` when there is
/// none), or why it is refused. An empty patch admits it as it is.
pub fn default_crr(
    request: &ContainerRecreateRequest,
    pod: Option<&Pod>,
) -> Result<Vec<Value>, Refusal> {
    if schema_refuses(request) {
        return Ok(Vec::new());
    }
    if let Some(seconds) = request.spec.active_deadline_seconds
        && seconds < MIN_DEADLINE_SECONDS
    {
        return Err(Refusal::bad_request(format!(
            "spec.activeDeadlineSeconds must be at least {MIN_DEADLINE_SECONDS}, not {seconds}."
        )));
    }
    let pod_name = &request.spec.pod_name;
    let pod = pod.ok_or_else(|| {
        Refusal::bad_request(format!(
            "spec.podName: there is no pod {pod_name} in this namespace; a ContainerRecreateRequest can only name an existing pod."
        ))
    })?;
    let node = runnable_on(pod)?;
    let mut patch = vec![labels_patch(request, pod, node)];
    for (index, container) in request.spec.containers.iter().enumerate() {
        let context = status_context(pod, index, container)?;
        patch.push(json!({
            "op": "add",
            "path": format!("/spec/containers/{index}/statusContext"),
            "value": context,
        }));
    }
    patch.push(strategy_patch(request, pod));
    Ok(patch)
}

/// Whether the CRD's schema refuses `request` anyway (its rules, read as it reads them).
/// Mutating webhooks run before the schema is checked: such a request is left to the
/// schema, whose message names the field, and its pod is never looked up.
pub(super) fn schema_refuses(request: &ContainerRecreateRequest) -> bool {
    let spec = &request.spec;
    let strategy = &spec.strategy;
    let names = &spec.containers;
    let twice = (names.iter().enumerate())
        .any(|(i, c)| names[..i].iter().any(|earlier| earlier.name == c.name));
    let negative = [
        spec.active_deadline_seconds,
        spec.ttl_seconds_after_finished.map(i64::from),
        strategy.termination_grace_period_seconds,
        strategy.unready_grace_period_seconds,
        Some(i64::from(strategy.min_started_seconds)),
    ]
    .into_iter()
    .flatten()
    .any(|seconds| seconds < 0);
    names.is_empty() || twice || negative || !is_dns_subdomain(&spec.pod_name)
}

/// Whether `name` is a DNS-1123 subdomain, as the schema's `podName` pattern requires (a
/// name that is not could not be looked up as a pod: `../other/web-0`).
fn is_dns_subdomain(name: &str) -> bool {
    let label_ok = |label: &str| {
        let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        label.starts_with(alnum)
            && label.ends_with(alnum)
            && label.chars().all(|c| alnum(c) || c == '-')
    };
    name.len() <= 253 && name.split('.').all(label_ok)
}

/// The node `pod` runs on, if it is one whose containers can be recreated: active (not
/// finished, not being deleted) and bound to a node.
fn runnable_on(pod: &Pod) -> Result<&str, Refusal> {
    let name = pod.name_any();
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let finished = matches!(phase, Some("Succeeded" | "Failed"));
    if finished || pod.metadata.deletion_timestamp.is_some() {
        return Err(Refusal::bad_request(format!(
            "spec.podName: pod {name} is not active (it has finished or is being deleted); its containers cannot be recreated."
        )));
    }
    let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    node.filter(|n| !n.is_empty()).ok_or_else(|| {
        Refusal::bad_request(format!(
            "spec.podName: pod {name} is pending (not bound to a node yet); its containers cannot be recreated."
        ))
    })
}

/// The `statusContext` of the request's container `index`, from the pod's status.
fn status_context(
    pod: &Pod,
    index: usize,
    container: &ContainerRecreateRequestContainer,
) -> Result<ContainerRecreateRequestContainerContext, Refusal> {
    let field = format!("spec.containers[{index}]");
    if container.status_context.is_some() {
        return Err(Refusal::bad_request(format!(
            "{field}.statusContext is set by the control plane from the pod's status; leave it out."
        )));
    }
    let (pod_name, name) = (pod.name_any(), &container.name);
    let in_spec = (pod.spec.iter().flat_map(|s| &s.containers)).any(|c| c.name == *name);
    if !in_spec {
        return Err(Refusal::bad_request(format!(
            "{field}.name: pod {pod_name} has no container {name}."
        )));
    }
    let statuses = pod
        .status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten());
    let status = statuses.into_iter().find(|s| s.name == *name);
    let container_id = status
        .and_then(|s| s.container_id.clone())
        .unwrap_or_default();
    match status {
        Some(status) if !container_id.is_empty() => Ok(ContainerRecreateRequestContainerContext {
            container_id,
            restart_count: status.restart_count,
        }),
        _ => Err(Refusal::bad_request(format!(
            "{field}.name: container {name} of pod {pod_name} has not started yet (its status names no containerID)."
        ))),
    }
}

/// The operation setting the pod name, UID and node labels (every other label kept).
fn labels_patch(request: &ContainerRecreateRequest, pod: &Pod, node: &str) -> Value {
    let mut labels: BTreeMap<String, String> = request.labels().clone();
    labels.insert(POD_NAME_LABEL.to_owned(), pod.name_any());
    labels.insert(POD_UID_LABEL.to_owned(), pod.uid().unwrap_or_default());
    labels.insert(NODE_NAME_LABEL.to_owned(), node.to_owned());
    json!({ "op": "add", "path": "/metadata/labels", "value": labels })
}

/// The operation writing the strategy with OpenKruise's defaults: `failurePolicy: Fail`
/// and the pod's `terminationGracePeriodSeconds` (so the request records what it used).
fn strategy_patch(request: &ContainerRecreateRequest, pod: &Pod) -> Value {
    let mut strategy = request.spec.strategy.clone();
    strategy.failure_policy = Some(strategy.failure_policy.unwrap_or(FailurePolicy::Fail));
    if strategy.termination_grace_period_seconds.is_none() {
        strategy.termination_grace_period_seconds = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds);
    }
    json!({ "op": "add", "path": "/spec/strategy", "value": strategy })
}

/// Whether an update from `old` to `new` is allowed: the spec never changes, and the
/// pod name, UID and node labels never change once set. A label the request lacks may
/// be added: the controller adds them to a request admitted without this webhook (made
/// before it was installed).
pub fn validate_crr_update(
    old: &ContainerRecreateRequest,
    new: &ContainerRecreateRequest,
) -> Result<(), Refusal> {
    if let Some(field) = changed_spec_field(old, new) {
        return Err(Refusal::forbidden(format!(
            "spec.{field} is immutable: create a new ContainerRecreateRequest instead."
        )));
    }
    for label in IMMUTABLE_LABELS {
        let Some(was) = old.labels().get(label) else {
            continue;
        };
        if new.labels().get(label) != Some(was) {
            return Err(Refusal::forbidden(format!(
                "metadata.labels[{label}] is immutable: it was {was:?} when the request was admitted."
            )));
        }
    }
    Ok(())
}

/// The first field of the spec (as written) that differs between `old` and `new`.
fn changed_spec_field(
    old: &ContainerRecreateRequest,
    new: &ContainerRecreateRequest,
) -> Option<String> {
    if old.spec == new.spec {
        return None;
    }
    let as_map = |request: &ContainerRecreateRequest| match serde_json::to_value(&request.spec) {
        Ok(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let (old, new) = (as_map(old), as_map(new));
    let mut fields: Vec<&String> = old.keys().chain(new.keys()).collect();
    fields.sort();
    let changed = fields.into_iter().find(|f| old.get(*f) != new.get(*f));
    Some(changed.cloned().unwrap_or_default())
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;

//! ContainerRecreateRequests in a chaos run: every few seconds one for a live pod of the
//! recreate CloneSet, through its agent. Checked: each reaches a terminal phase
//! (Completed, or Failed with a reason) within the settle time; none stays in progress.

use anyhow::{Context as _, Result};
use kube::ResourceExt as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::{Value, json};

use crate::TestContext;

fn requests(ctx: &TestContext) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "apps.kruise.io",
        "v1alpha1",
        "ContainerRecreateRequest",
    ));
    Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &resource)
}

/// The name of the run's `n`th request.
pub fn name(n: usize) -> String {
    format!("crr-{n}")
}

/// Asks for the container of a live pod of `app` (the `n`th by name, modulo their
/// number) to be recreated; Ok(false) when the set has no live pod.
pub async fn launch(ctx: &TestContext, app: &str, n: usize) -> Result<bool> {
    let live = super::faults::live_pod_names(ctx, app).await?;
    let Some(pod) = live.get(n % live.len().max(1)) else {
        return Ok(false);
    };
    let request: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ContainerRecreateRequest",
        "metadata": { "name": name(n), "namespace": ctx.namespace },
        "spec": { "podName": pod, "containers": [{ "name": "main" }] },
    }))?;
    requests(ctx)
        .create(&PostParams::default(), &request)
        .await
        .with_context(|| format!("creating ContainerRecreateRequest {} for {pod}", name(n)))?;
    Ok(true)
}

/// What is wrong with request `name` (its object's `data`) at the end of a run: in
/// progress, or failed without saying why. None when it ended properly. Pure.
pub fn unfinished(name: &str, data: &Value) -> Option<String> {
    let status = &data["status"];
    let phase = status["phase"].as_str().unwrap_or("Pending");
    let message = status["message"].as_str().unwrap_or_default();
    match phase {
        "Completed" => None,
        "Failed" if !message.is_empty() => None,
        "Failed" => Some(format!(
            "ContainerRecreateRequest {name} failed without a reason"
        )),
        _ => Some(format!(
            "ContainerRecreateRequest {name} is still {phase}: \"{message}\""
        )),
    }
}

/// The run's requests that have not ended properly, and how many did.
pub async fn check_all(ctx: &TestContext) -> Result<(Vec<String>, usize)> {
    let all = requests(ctx).list(&ListParams::default()).await?.items;
    let problems: Vec<String> = all
        .iter()
        .filter_map(|r| unfinished(&r.name_any(), &r.data))
        .collect();
    let ended = all.len() - problems.len();
    Ok((problems, ended))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_ends_completed_or_failed_with_a_reason() {
        let cases = [
            (json!({ "phase": "Completed" }), None),
            (
                json!({ "phase": "Failed", "message": "pod has gone" }),
                None,
            ),
            (
                json!({ "phase": "Failed" }),
                Some("failed without a reason"),
            ),
            (
                json!({ "phase": "Recreating", "message": "m" }),
                Some("still Recreating"),
            ),
            (json!({ "phase": "Pending" }), Some("still Pending")),
            (json!(null), Some("still Pending")), // no status yet
        ];
        for (status, problem) in cases {
            let found = unfinished("r", &json!({ "status": status }));
            match (problem, found) {
                (None, None) => {}
                (Some(words), Some(text)) => assert!(text.contains(words), "{text}"),
                (want, got) => panic!("{status}: wanted {want:?}, got {got:?}"),
            }
        }
    }
}

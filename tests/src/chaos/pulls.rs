//! ImagePullJobs in a chaos run: one at a time over the run's nodes (pulled by their
//! agents), the next made as soon as the last one finished, the two images taking turns.
//! Checked: the last job finishes within the settle time, and no node's ImageList is left
//! with a pull in progress.

use anyhow::{Context as _, Result};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use super::pool::Placement;
use crate::TestContext;

fn jobs(ctx: &TestContext) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "apps.kruise.io",
        "v1alpha1",
        "ImagePullJob",
    ));
    Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &resource)
}

fn lists(ctx: &TestContext) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "stevedore.dev",
        "v1alpha1",
        "ImageList",
    ));
    Api::all_with(ctx.client.clone(), &resource)
}

/// The name of the run's `n`th ImagePullJob.
pub fn name(n: usize) -> String {
    format!("pull-{n}")
}

pub async fn launch(
    ctx: &TestContext,
    placement: &Placement,
    name: &str,
    image: &str,
) -> Result<()> {
    let job: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ImagePullJob",
        "metadata": { "name": name, "namespace": ctx.namespace },
        "spec": {
            "image": image,
            "selector": { "matchLabels": placement.node_selector() },
            "parallelism": 2,
            "completionPolicy": { "type": "Always" },
        },
    }))?;
    jobs(ctx)
        .create(&PostParams::default(), &job)
        .await
        .with_context(|| format!("creating ImagePullJob {name}"))?;
    Ok(())
}

/// Whether the job finished (its completion time is set, whatever its nodes' outcomes).
pub async fn finished(ctx: &TestContext, name: &str) -> Result<bool> {
    Ok(is_finished(&jobs(ctx).get(name).await?.data))
}

/// Whether an ImagePullJob's `data` says it finished. Pure.
pub fn is_finished(data: &Value) -> bool {
    data["status"]["completionTime"].is_string()
}

/// The images an ImageList's `data` reports as being pulled now. Pure.
pub fn pulling(data: &Value) -> Vec<String> {
    data["status"]["images"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, status)| status["phase"] == "Pulling")
        .map(|(image, _)| image.clone())
        .collect()
}

/// The pulls in progress on `nodes`, in words (`node: image`).
pub async fn in_progress(ctx: &TestContext, nodes: &[String]) -> Result<Vec<String>> {
    let lists = lists(ctx);
    let mut found = Vec::new();
    for node in nodes {
        if let Some(list) = lists.get_opt(node).await? {
            found.extend(
                pulling(&list.data)
                    .into_iter()
                    .map(|i| format!("{node}: {i}")),
            );
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_finished_once_it_has_a_completion_time_and_a_pull_is_in_progress_only_pulling() {
        assert!(!is_finished(
            &json!({ "status": { "desired": 3, "active": 1 } })
        ));
        assert!(!is_finished(&json!({})));
        assert!(is_finished(&json!({ "status": {
            "desired": 3, "succeeded": 2, "failed": 1, "completionTime": "2026-01-01T00:00:00Z",
        } })));

        let list = json!({ "status": { "observedGeneration": 1, "images": {
            "a": { "phase": "Pulling" }, "b": { "phase": "Succeeded" },
            "c": { "phase": "Waiting" }, "d": { "phase": "Failed" },
        } } });
        assert_eq!(pulling(&list), ["a"]);
        assert!(pulling(&json!({ "spec": {} })).is_empty());
    }
}

//! BroadcastJobs in a chaos run: one at a time over the run's nodes, the next launched
//! as soon as the last one completed. kwok completes a pod that asks for it
//! (`stevedore.dev/kwok-complete`); a pod the harness deletes before that is the job's to
//! replace.

use anyhow::{Context as _, Result};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use super::pool::Placement;
use crate::TestContext;

pub fn resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "apps.kruise.io",
        "v1alpha1",
        "BroadcastJob",
    ))
}

fn api(ctx: &TestContext) -> Api<DynamicObject> {
    Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &resource())
}

/// The name of the run's `n`th job.
pub fn name(n: usize) -> String {
    format!("bj-{n}")
}

pub fn manifest(namespace: &str, placement: &Placement, name: &str, image: &str) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "BroadcastJob",
        "metadata": { "name": name, "namespace": namespace },
        "spec": {
            "completionPolicy": { "type": "Always" },
            "template": {
                "metadata": {
                    "labels": { "app": name },
                    "annotations": { "stevedore.dev/kwok-complete": "true" },
                },
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "nodeSelector": placement.node_selector(),
                    "tolerations": placement.tolerations(),
                    "containers": [{ "name": "task", "image": image }],
                },
            },
        },
    })
}

pub async fn launch(
    ctx: &TestContext,
    placement: &Placement,
    name: &str,
    image: &str,
) -> Result<()> {
    let object: DynamicObject =
        serde_json::from_value(manifest(&ctx.namespace, placement, name, image))?;
    api(ctx)
        .create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating BroadcastJob {name}"))?;
    Ok(())
}

/// Whether the job says it completed (its Complete condition is True).
pub async fn completed(ctx: &TestContext, name: &str) -> Result<bool> {
    let object = api(ctx).get(name).await?;
    Ok(is_complete(&object.data))
}

/// Whether a BroadcastJob's status has a Complete condition that is True. Pure.
pub fn is_complete(data: &Value) -> bool {
    data["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Complete" && c["status"] == "True")
    })
}

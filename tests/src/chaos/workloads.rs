//! The workloads a chaos run rolls: a CloneSet, an Advanced StatefulSet and an Advanced
//! DaemonSet that recreate their pods, all with `maxUnavailable: 1`, on the run's own
//! simulated nodes, their images flipped between two tags for every rollout. (In place
//! needs an agent per node to flip `InPlaceUpdateReady`: the simulated nodes with agents
//! of `deploy/local/sim-agents.sh`, a next step; the checkers already count in-place
//! updates.) Dynamic objects, so the harness
//! needs no API crate.

use anyhow::{Context as _, Result};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

use super::invariants::{SetKind, SetRule};
use crate::TestContext;
use crate::test_nodes;

/// One workload of the run.
#[derive(Clone, Debug)]
pub struct Workload {
    pub rule: SetRule,
    pub resource: ApiResource,
}

impl Workload {
    pub fn api(&self, ctx: &TestContext) -> Api<DynamicObject> {
        Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &self.resource)
    }

    pub fn name(&self) -> &str {
        &self.rule.name
    }
}

fn resource(version: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("apps.kruise.io", version, kind))
}

/// The three workloads, by name `clone`, `sts` and `ds` (the DaemonSet's replicas are its
/// nodes).
pub fn workloads(nodes: i32) -> Vec<Workload> {
    let rule = |kind, name: &str, replicas| SetRule {
        kind,
        name: name.into(),
        replicas,
        max_unavailable: 1,
    };
    vec![
        Workload {
            rule: rule(SetKind::CloneSet, "clone", 6),
            resource: resource("v1alpha1", "CloneSet"),
        },
        Workload {
            rule: rule(SetKind::StatefulSet, "sts", 4),
            resource: resource("v1beta1", "StatefulSet"),
        },
        Workload {
            rule: rule(SetKind::DaemonSet, "ds", nodes),
            resource: resource("v1alpha1", "DaemonSet"),
        },
    ]
}

fn pod_template(ctx: &TestContext, name: &str, image: &str) -> Value {
    json!({
        "metadata": { "labels": { "app": name } },
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": test_nodes::node_selector(ctx),
            "tolerations": test_nodes::tolerations(ctx),
            "containers": [{ "name": "main", "image": image }],
        },
    })
}

/// The manifest of `workload` running `image`.
pub fn manifest(ctx: &TestContext, workload: &Workload, image: &str) -> Value {
    let name = workload.name();
    let template = pod_template(ctx, name, image);
    let selector = json!({ "matchLabels": { "app": name } });
    let spec = match workload.rule.kind {
        SetKind::CloneSet => json!({
            "replicas": workload.rule.replicas, "selector": selector, "template": template,
            "updateStrategy": { "type": "ReCreate", "maxUnavailable": 1 },
        }),
        SetKind::StatefulSet => json!({
            "replicas": workload.rule.replicas, "selector": selector, "template": template,
            "serviceName": name, "podManagementPolicy": "Parallel",
            "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": {
                "maxUnavailable": 1, "podUpdatePolicy": "ReCreate" } },
        }),
        SetKind::BroadcastJob => return super::jobs::manifest(ctx, name, image),
        SetKind::DaemonSet => json!({
            "selector": selector, "template": template,
            "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": {
                "rollingUpdateType": "Standard", "maxUnavailable": 1 } },
        }),
    };
    json!({
        "apiVersion": workload.resource.api_version,
        "kind": workload.resource.kind,
        "metadata": { "name": name, "namespace": ctx.namespace },
        "spec": spec,
    })
}

pub async fn create(ctx: &TestContext, workload: &Workload, image: &str) -> Result<()> {
    let object: DynamicObject = serde_json::from_value(manifest(ctx, workload, image))?;
    workload
        .api(ctx)
        .create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating {}", workload.name()))?;
    Ok(())
}

/// The image the workload's template asks for now.
pub async fn current_image(ctx: &TestContext, workload: &Workload) -> Result<String> {
    let object = workload.api(ctx).get(workload.name()).await?;
    object.data["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .map(str::to_owned)
        .context("the template has no image")
}

/// Sets the template's image: a new revision, so a rollout.
pub async fn set_image(ctx: &TestContext, workload: &Workload, image: &str) -> Result<()> {
    // The template's one container, whole: a merge patch replaces the list.
    let patch = json!({ "spec": { "template": { "spec": {
        "containers": [{ "name": "main", "image": image }],
    } } } });
    workload
        .api(ctx)
        .patch(
            workload.name(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

/// The generation the workload's status says is rolled out in full (every pod updated
/// and ready, none surplus), if it is.
pub async fn rolled_out_generation(ctx: &TestContext, workload: &Workload) -> Result<Option<i64>> {
    let object = workload.api(ctx).get(workload.name()).await?;
    let generation = object.metadata.generation.unwrap_or_default();
    Ok(rolled_out(
        workload.rule.kind,
        workload.rule.replicas,
        generation,
        &object.data,
    )
    .then_some(generation))
}

/// Whether `data`'s status says generation `generation` is rolled out in full. Pure.
pub fn rolled_out(kind: SetKind, replicas: i32, generation: i64, data: &Value) -> bool {
    let status = &data["status"];
    let int = |field: &str| status[field].as_i64().unwrap_or(-1);
    if int("observedGeneration") != generation {
        return false;
    }
    let want = i64::from(replicas);
    match kind {
        SetKind::CloneSet => {
            int("replicas") == want
                && int("updatedReplicas") == want
                && int("updatedReadyReplicas") == want
        }
        SetKind::StatefulSet => {
            int("replicas") == want
                && int("updatedReplicas") == want
                && int("readyReplicas") == want
        }
        SetKind::BroadcastJob => super::jobs::is_complete(data),
        SetKind::DaemonSet => {
            int("desiredNumberScheduled") == want
                && int("currentNumberScheduled") == want
                && int("updatedNumberScheduled") == want
                && int("numberReady") == want
        }
    }
}

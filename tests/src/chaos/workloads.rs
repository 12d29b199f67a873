//! The workloads a chaos run rolls on its own simulated nodes ([`super::pool`]), their
//! images flipped between two tags for every rollout: a CloneSet, an Advanced StatefulSet
//! (with a claim per pod) and an Advanced DaemonSet that recreate their pods with
//! `maxUnavailable: 1`, and a CloneSet updated in place (through the nodes' agents) with
//! `maxUnavailable: 2` under a PodUnavailableBudget of 1, so the budget is what holds it.
//! Dynamic objects, so the harness needs no API crate.

use anyhow::{Context as _, Result};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

use super::invariants::{BudgetRule, SetKind, SetRule};
use super::pool::Placement;
use crate::TestContext;

/// One workload of the run.
#[derive(Clone, Debug)]
pub struct Workload {
    pub rule: SetRule,
    pub resource: ApiResource,
    /// Updated in place (through the agents) rather than by recreating pods.
    pub in_place: bool,
    /// Runs on the cluster's real (kubelet) nodes rather than the run's simulated ones:
    /// only a real container can be recreated by a ContainerRecreateRequest.
    pub on_real_nodes: bool,
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

/// The in-place CloneSet, which the run's PodUnavailableBudget covers.
pub const IN_PLACE: &str = "inplace";
/// The StatefulSet, whose claims the delete-pvc fault deletes.
pub const STATEFUL: &str = "sts";
/// The CloneSet on the real nodes, whose containers the ContainerRecreateRequests
/// recreate and whose nodes' agents the kill-real-agent fault restarts.
pub const REAL: &str = "real";

/// The five workloads, by name `clone`, `sts`, `ds`, `inplace` and `real` (the DaemonSet's
/// replicas are its nodes; `real` runs on the real nodes, two pods updated in place).
pub fn workloads(nodes: i32) -> Vec<Workload> {
    let rule = |kind, name: &str, replicas, max_unavailable| SetRule {
        kind,
        name: name.into(),
        replicas,
        max_unavailable,
    };
    let clone_sets = resource("v1alpha1", "CloneSet");
    vec![
        Workload {
            rule: rule(SetKind::CloneSet, "clone", 6, 1),
            resource: clone_sets.clone(),
            in_place: false,
            on_real_nodes: false,
        },
        Workload {
            rule: rule(SetKind::StatefulSet, STATEFUL, 4, 1),
            resource: resource("v1beta1", "StatefulSet"),
            in_place: false,
            on_real_nodes: false,
        },
        Workload {
            rule: rule(SetKind::DaemonSet, "ds", nodes, 1),
            resource: resource("v1alpha1", "DaemonSet"),
            in_place: false,
            on_real_nodes: false,
        },
        Workload {
            rule: rule(SetKind::CloneSet, IN_PLACE, 4, 2),
            resource: clone_sets.clone(),
            in_place: true,
            on_real_nodes: false,
        },
        Workload {
            rule: rule(SetKind::CloneSet, REAL, 2, 1),
            resource: clone_sets,
            in_place: true,
            on_real_nodes: true,
        },
    ]
}

/// The run's PodUnavailableBudget: one pod of the in-place CloneSet at a time, tighter
/// than the CloneSet's own `maxUnavailable`.
pub fn budget() -> BudgetRule {
    BudgetRule {
        name: "inplace-budget".into(),
        app: IN_PLACE.into(),
        max_unavailable: 1,
    }
}

pub fn budget_manifest(ctx: &TestContext, rule: &BudgetRule) -> Value {
    json!({
        "apiVersion": "policy.kruise.io/v1alpha1",
        "kind": "PodUnavailableBudget",
        "metadata": { "name": rule.name, "namespace": ctx.namespace },
        "spec": {
            "selector": { "matchLabels": { "app": rule.app } },
            "maxUnavailable": rule.max_unavailable,
        },
    })
}

pub fn pod_template(placement: &Placement, name: &str, image: &str) -> Value {
    json!({
        "metadata": { "labels": { "app": name } },
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": placement.node_selector(),
            "tolerations": placement.tolerations(),
            "containers": [{ "name": "main", "image": image }],
        },
    })
}

/// A pod template for the real nodes: real containers, which the simulated nodes lack.
pub fn real_node_template(name: &str, image: &str) -> Value {
    json!({
        "metadata": { "labels": { "app": name } },
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "affinity": crate::real_nodes::real_node_affinity(),
            "containers": [{ "name": "main", "image": image }],
        },
    })
}

/// The manifest of `workload` running `image`.
pub fn manifest(namespace: &str, placement: &Placement, workload: &Workload, image: &str) -> Value {
    let name = workload.name();
    let template = if workload.on_real_nodes {
        real_node_template(name, image)
    } else {
        pod_template(placement, name, image)
    };
    let selector = json!({ "matchLabels": { "app": name } });
    let max_unavailable = workload.rule.max_unavailable;
    let spec = match workload.rule.kind {
        SetKind::CloneSet => json!({
            "replicas": workload.rule.replicas, "selector": selector, "template": template,
            "updateStrategy": {
                "type": if workload.in_place { "InPlaceIfPossible" } else { "ReCreate" },
                "maxUnavailable": max_unavailable,
            },
        }),
        SetKind::StatefulSet => json!({
            "replicas": workload.rule.replicas, "selector": selector, "template": template,
            "serviceName": name, "podManagementPolicy": "Parallel",
            "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": {
                "maxUnavailable": max_unavailable, "podUpdatePolicy": "ReCreate" } },
            "volumeClaimTemplates": [{
                "metadata": { "name": "data" },
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": { "requests": { "storage": "1Mi" } },
                },
            }],
        }),
        SetKind::BroadcastJob => return super::jobs::manifest(namespace, placement, name, image),
        SetKind::ForbidCron => return super::cron::manifest(namespace, placement, name, image),
        SetKind::DaemonSet => json!({
            "selector": selector, "template": template,
            "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": {
                "rollingUpdateType": "Standard", "maxUnavailable": max_unavailable } },
        }),
    };
    json!({
        "apiVersion": workload.resource.api_version,
        "kind": workload.resource.kind,
        "metadata": { "name": name, "namespace": namespace },
        "spec": spec,
    })
}

pub async fn create(
    ctx: &TestContext,
    placement: &Placement,
    workload: &Workload,
    image: &str,
) -> Result<()> {
    let manifest = manifest(&ctx.namespace, placement, workload, image);
    let object: DynamicObject = serde_json::from_value(manifest)?;
    workload
        .api(ctx)
        .create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating {}", workload.name()))?;
    Ok(())
}

pub async fn create_budget(ctx: &TestContext, rule: &BudgetRule) -> Result<()> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "policy.kruise.io",
        "v1alpha1",
        "PodUnavailableBudget",
    ));
    let object: DynamicObject = serde_json::from_value(budget_manifest(ctx, rule))?;
    Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &ctx.namespace, &resource)
        .create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating PodUnavailableBudget {}", rule.name))?;
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
        SetKind::ForbidCron => false,
        SetKind::DaemonSet => {
            int("desiredNumberScheduled") == want
                && int("currentNumberScheduled") == want
                && int("updatedNumberScheduled") == want
                && int("numberReady") == want
        }
    }
}

//! The Advanced StatefulSet controller (running in the cluster) scaling down an
//! OrderedReady set whose pods are all unhealthy: nothing is deleted while a lower ordinal
//! than the pod next in line is unhealthy, as the native controller and OpenKruise's
//! `processCondemned` wait (issue 31, item 5).
//!
//! The pods run on a kwok node of this test's own. The test then takes the node from
//! kwok (removes its annotation), so nothing renews its heartbeat: the node lifecycle
//! controller marks the node unknown and its pods not Ready, which is how the set's pods
//! become unhealthy without a kubelet. The pods tolerate the node's NoExecute taints, so
//! nothing evicts them meanwhile; the node is deleted at the end (the pod garbage collector
//! removes its pods).

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stevedore_controlplane::api::StatefulSet;
use stevedore_tests::pods::{is_ready, is_running_and_ready};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

/// The annotation kwok selects the nodes it manages by.
const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";
/// The label this test's node carries, valued with the namespace.
const NODE_LABEL: &str = "stevedore.dev/sts-scale-down-test";
/// Kwok's start, and the node lifecycle controller's grace period (40–50 s) before it
/// marks the pods of a silent node not Ready, with room to spare.
const WAIT: Duration = Duration::from_secs(150);

fn nodes(ctx: &TestContext) -> Api<Node> {
    Api::all(ctx.client.clone())
}

/// A Ready kwok node of this test's own.
async fn add_node(ctx: &TestContext) -> Result<String> {
    let name = format!("{}-node", ctx.namespace);
    let node: Node = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": { NODE_LABEL: ctx.namespace, "type": "kwok" },
            "annotations": { KWOK_ANNOTATION: "fake" },
        },
        // Its own taint besides kwok's: other suites' pods tolerate kwok's and would
        // otherwise land on a node this test takes from kwok.
        "spec": { "taints": [
            { "key": KWOK_ANNOTATION, "value": "fake", "effect": "NoSchedule" },
            { "key": NODE_LABEL, "value": "only", "effect": "NoSchedule" },
        ] },
    }))?;
    nodes(ctx).create(&PostParams::default(), &node).await?;
    poll_until(&format!("node {name} Ready"), WAIT, || async {
        let node = nodes(ctx).get(&name).await?;
        let ready = (node.status.and_then(|s| s.conditions).unwrap_or_default())
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        Ok(ready.then_some(()))
    })
    .await?;
    Ok(name)
}

/// An OrderedReady StatefulSet of three pods pinned to this test's node, tolerating its
/// taints for ever.
fn statefulset(ctx: &TestContext, name: &str) -> Result<StatefulSet> {
    let toleration =
        |key: &str, effect: &str| json!({ "key": key, "operator": "Exists", "effect": effect });
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "StatefulSet",
        "metadata": { "name": name },
        "spec": {
            "replicas": 3,
            "serviceName": name,
            "podManagementPolicy": "OrderedReady",
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "nodeSelector": { NODE_LABEL: ctx.namespace },
                    "tolerations": [
                        toleration(KWOK_ANNOTATION, "NoSchedule"),
                        toleration(NODE_LABEL, "NoSchedule"),
                        toleration("node.kubernetes.io/unreachable", "NoExecute"),
                        toleration("node.kubernetes.io/not-ready", "NoExecute"),
                    ],
                    "containers": [{ "name": "web", "image": ctx.cluster.image("web:v1") }]
                }
            }
        }
    }))?)
}

async fn pods_of(ctx: &TestContext, name: &str) -> Result<Vec<Pod>> {
    let list = ctx
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await?;
    Ok(list.items)
}

fn describe(pods: &[Pod]) -> String {
    let line = |p: &Pod| {
        let gone = if p.metadata.deletion_timestamp.is_some() {
            " terminating"
        } else {
            ""
        };
        format!("{} ready={}{gone}", p.name_any(), is_ready(p))
    };
    pods.iter().map(line).collect::<Vec<_>>().join(", ")
}

async fn body(ctx: &TestContext, node: &str) -> Result<()> {
    let name = "web";
    let api = ctx.api::<StatefulSet>();
    api.create(&PostParams::default(), &statefulset(ctx, name)?)
        .await?;
    poll_until("web-0..2 running and ready", WAIT, || async {
        let pods = pods_of(ctx, name).await?;
        Ok((pods.len() == 3 && pods.iter().all(is_running_and_ready)).then_some(()))
    })
    .await?;

    // Take the node from kwok: its pods turn not Ready once the node goes silent.
    let patch = json!({ "metadata": { "annotations": { KWOK_ANNOTATION: null } } });
    nodes(ctx)
        .patch(node, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    poll_until("every pod not Ready", WAIT, || async {
        let pods = pods_of(ctx, name).await?;
        Ok((pods.len() == 3 && pods.iter().all(|p| !is_ready(p))).then_some(()))
    })
    .await?;

    let scale = json!({ "spec": { "replicas": 0 } });
    let scaled = api
        .patch(name, &PatchParams::default(), &Patch::Merge(scale))
        .await?;
    let generation = scaled.metadata.generation.context("a generation")?;
    poll_until("the set to see the scale-down", WAIT, || async {
        let status = api.get(name).await?.status.unwrap_or_default();
        Ok((status.observed_generation == generation).then_some(()))
    })
    .await?;
    // More syncs follow (pod and status events); none may delete web-2 while web-0 and
    // web-1 below it are unhealthy.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let pods = pods_of(ctx, name).await?;
    ensure!(
        pods.len() == 3 && pods.iter().all(|p| p.metadata.deletion_timestamp.is_none()),
        "an OrderedReady scale-down deleted a pod while web-0 was unhealthy: {}",
        describe(&pods)
    );
    let status = api.get(name).await?.status.unwrap_or_default();
    let waiting = status
        .conditions
        .iter()
        .find(|c| c.type_ == "WaitingForPod" && c.status == "True");
    ensure!(
        waiting.is_some_and(|c| c.message.contains("web-0")),
        "the set says it waits for web-0: {:?}",
        status.conditions
    );
    Ok(())
}

#[tokio::test]
async fn ordered_ready_scale_down_waits_for_the_lowest_unhealthy_pod() -> Result<()> {
    run_in_namespace("sts-scale-down-unhealthy", |ctx| async move {
        let node = add_node(&ctx).await?;
        let result = body(&ctx, &node).await;
        // The pods go with the node (pod garbage collection), the namespace after them.
        let _ = nodes(&ctx).delete(&node, &DeleteParams::default()).await;
        result
    })
    .await
}

//! kwok Nodes that belong to one test. Suites run side by side, and many of their pods
//! tolerate kwok's own taint to run on the cluster's simulated nodes: a node a test made
//! with only kwok's taint would draw those pods, and lose them when the test deletes it.
//! So a test's node also carries a taint of its own, [`TEST_NODE_TAINT`] = the test's
//! namespace, which only that test's pods tolerate ([`tolerations`]); pods bound with
//! `nodeName` need no toleration (NoSchedule is the scheduler's rule).

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::{TestContext, poll_until};

/// The taint (and label) of a test's own nodes; its value is the test's namespace.
pub const TEST_NODE_TAINT: &str = "stevedore.dev/test-node";
/// kwok's taint, on every simulated node.
pub const KWOK_TAINT: &str = "kwok.x-k8s.io/node";

/// What a test's node carries besides its name.
#[derive(Debug, Default, Clone)]
pub struct TestNode {
    /// Labels besides `TEST_NODE_TAINT=<namespace>` and `type=kwok`.
    pub labels: Value,
    /// Taints besides kwok's and the test's own.
    pub extra_taints: Vec<Value>,
}

/// The tolerations a pod needs to run on this test's nodes (and on no other test's):
/// kwok's taint and the test's own, with the test's namespace as its value.
pub fn tolerations(ctx: &TestContext) -> Value {
    json!([
        { "key": KWOK_TAINT, "operator": "Exists", "effect": "NoSchedule" },
        { "key": TEST_NODE_TAINT, "operator": "Equal", "value": ctx.namespace, "effect": "NoSchedule" },
    ])
}

/// The node selector that keeps a pod on this test's nodes.
pub fn node_selector(ctx: &TestContext) -> Value {
    json!({ TEST_NODE_TAINT: ctx.namespace })
}

/// Creates the kwok node `name` for this test and returns it once it is Ready.
pub async fn create(ctx: &TestContext, name: &str, spec: TestNode) -> Result<Node> {
    let mut labels = json!({ TEST_NODE_TAINT: ctx.namespace, "type": "kwok" });
    if let (Some(all), Some(more)) = (labels.as_object_mut(), spec.labels.as_object()) {
        all.extend(more.clone());
    }
    let mut taints = vec![
        json!({ "key": KWOK_TAINT, "value": "fake", "effect": "NoSchedule" }),
        json!({ "key": TEST_NODE_TAINT, "value": ctx.namespace, "effect": "NoSchedule" }),
    ];
    taints.extend(spec.extra_taints);
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": { "kwok.x-k8s.io/node": "fake" },
        },
        "spec": { "taints": taints },
    }))?;
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    nodes.create(&PostParams::default(), &node).await?;
    wait_ready(&nodes, name).await
}

async fn wait_ready(nodes: &Api<Node>, name: &str) -> Result<Node> {
    poll_until(
        &format!("node {name} Ready"),
        Duration::from_secs(60),
        || async move {
            let node = nodes.get(name).await?;
            let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
            let ready = conditions
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            Ok(ready.then_some(node))
        },
    )
    .await
}

/// Deletes the nodes `names`, ignoring those already gone.
pub async fn delete(ctx: &TestContext, names: &[String]) {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    for name in names {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
    }
}

/// Sets node `node`'s Ready condition to `status` ("True" or "False") as a kubelet would
/// report it; kwok leaves it as patched until its next pass over the node.
pub async fn set_ready(ctx: &TestContext, node: &str, status: &str) -> Result<()> {
    let reason = if status == "True" {
        "KubeletReady"
    } else {
        "KubeletNotReady"
    };
    let now = Timestamp::now().to_string();
    let patch = json!({ "status": { "conditions": [{
        "type": "Ready", "status": status, "reason": reason,
        "message": "set by the test", "lastHeartbeatTime": now, "lastTransitionTime": now,
    }] } });
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    nodes
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(patch))
        .await?;
    Ok(())
}

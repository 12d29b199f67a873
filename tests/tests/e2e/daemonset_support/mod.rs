//! Shared by the Advanced DaemonSet suites: kwok nodes labelled for one test (removed
//! after it), the DaemonSet manifest for them, and waits on its pods per node.

#![allow(dead_code, reason = "each suite uses its own subset of these helpers")]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::DaemonSet;
use stevedore_controlplane::workload::node_pin::pinned_node;
use stevedore_tests::test_nodes::{self, KWOK_TAINT, TEST_NODE_TAINT, TestNode};
use stevedore_tests::{TestContext, invariant, poll_until};

/// The label that keeps a DaemonSet on this test's nodes.
pub const TEST_LABEL: &str = TEST_NODE_TAINT;
pub const WAIT: Duration = Duration::from_secs(90);

pub fn node_name(ctx: &TestContext, i: usize) -> String {
    format!("{}-node-{i}", ctx.namespace)
}

pub fn nodes(ctx: &TestContext) -> Api<Node> {
    Api::all(ctx.client.clone())
}

/// A Ready kwok Node of this test (`test_nodes`: its label and its own taint).
pub async fn add_node(ctx: &TestContext, i: usize) -> Result<String> {
    let name = node_name(ctx, i);
    test_nodes::create(ctx, &name, TestNode::default()).await?;
    Ok(name)
}

/// Runs `body` with `count` test nodes, removing the test's DaemonSets and nodes after.
pub async fn with_nodes<F, Fut>(ctx: TestContext, count: usize, body: F) -> Result<()>
where
    F: FnOnce(TestContext, Vec<String>) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut names = Vec::new();
    let mut result = Ok(());
    for i in 0..count {
        match add_node(&ctx, i).await {
            Ok(name) => names.push(name),
            Err(err) => {
                result = Err(err);
                break;
            }
        }
    }
    if result.is_ok() {
        result = body(ctx.clone(), names).await;
    }
    let _ = ctx
        .api::<DaemonSet>()
        .delete_collection(&DeleteParams::background(), &ListParams::default())
        .await;
    for i in 0..count {
        let _ = nodes(&ctx)
            .delete(&node_name(&ctx, i), &DeleteParams::default())
            .await;
    }
    result
}

/// A native apps/v1 DaemonSet manifest for this test's nodes, with only its apiVersion
/// changed.
pub fn manifest(ctx: &TestContext, name: &str, image: &str, rolling_update: Value) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "DaemonSet",
        "metadata": { "name": name },
        "spec": {
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "nodeSelector": test_nodes::node_selector(ctx),
                    "tolerations": test_nodes::tolerations(ctx),
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{ "name": "main", "image": ctx.cluster.image(image) }],
                },
            },
            "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": rolling_update },
        },
    })
}

pub async fn create(ctx: &TestContext, manifest: Value) -> Result<DaemonSet> {
    let ds: DaemonSet = serde_json::from_value(manifest)?;
    Ok(ctx
        .api::<DaemonSet>()
        .create(&PostParams::default(), &ds)
        .await?)
}

pub async fn patch_spec(ctx: &TestContext, name: &str, spec: Value) -> Result<()> {
    ctx.api::<DaemonSet>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await?;
    Ok(())
}

/// The DaemonSet's live (not terminating) pods by the node they are pinned to.
pub async fn pods_by_node(ctx: &TestContext, app: &str) -> Result<BTreeMap<String, Vec<Pod>>> {
    let params = ListParams::default().labels(&format!("app={app}"));
    let mut by_node: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
    for pod in ctx.api::<Pod>().list(&params).await?.items {
        if pod.metadata.deletion_timestamp.is_none() {
            by_node
                .entry(pinned_node(&pod).unwrap_or_default())
                .or_default()
                .push(pod);
        }
    }
    Ok(by_node)
}

/// Waits until exactly `want` nodes each run one pod of `app` (and no other node does).
pub async fn wait_on_nodes(ctx: &TestContext, app: &str, want: &[&String]) -> Result<()> {
    let want: BTreeSet<String> = want.iter().map(|n| (*n).clone()).collect();
    poll_until(&format!("{app} pods on exactly {want:?}"), WAIT, || async {
        let by_node = pods_by_node(ctx, app).await?;
        let on: BTreeSet<String> = by_node.keys().cloned().collect();
        let one_each = by_node.values().all(|pods| pods.len() == 1);
        Ok((on == want && one_each).then_some(()))
    })
    .await
}

pub fn image_of(pod: &Pod) -> String {
    (pod.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

pub fn ready(pod: &Pod) -> bool {
    (pod.status.as_ref().and_then(|s| s.conditions.as_ref()))
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

pub async fn taint(ctx: &TestContext, node: &str, extra: &[Value]) -> Result<()> {
    let mut taints = vec![
        json!({ "key": KWOK_TAINT, "value": "fake", "effect": "NoSchedule" }),
        json!({ "key": TEST_NODE_TAINT, "value": ctx.namespace, "effect": "NoSchedule" }),
    ];
    taints.extend(extra.iter().cloned());
    let patch = json!({ "spec": { "taints": taints } });
    nodes(ctx)
        .patch(node, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// Checks, while waiting, that no more than `max_unavailable` of `nodes` lack a ready pod.
pub async fn within_unavailable(
    ctx: &TestContext,
    app: &str,
    nodes: &[String],
    max_unavailable: usize,
) -> Result<BTreeMap<String, Vec<Pod>>> {
    let by_node = pods_by_node(ctx, app).await?;
    let unavailable = nodes
        .iter()
        .filter(|n| !by_node.get(*n).is_some_and(|pods| pods.iter().any(ready)))
        .count();
    invariant(unavailable <= max_unavailable, || {
        format!("{unavailable} nodes without a ready pod (maxUnavailable {max_unavailable})")
    })?;
    Ok(by_node)
}

//! Per-node workloads where they happen: an Advanced DaemonSet and a BroadcastJob across
//! the cluster's three real kubelet nodes (`deploy/local/run.sh --real-nodes 3`), each
//! node with its own containerd and agent, so pods really start, restart in place and
//! finish on every node. The pods tolerate the workers' taint and keep off kwok's nodes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::{BroadcastJob, DaemonSet};
use stevedore_tests::pods::is_serving;
use stevedore_tests::real_node_jobs::{broadcast_job, create_job, runs, wait_for_runs_on};
use stevedore_tests::real_nodes::{RealNode, real_node_affinity, real_nodes, worker_toleration};
use stevedore_tests::{TestContext, invariant, poll_until, run_in_namespace};

const WAIT: Duration = Duration::from_secs(180);
const NODES: usize = 3;

/// An Advanced DaemonSet of `web` for every real node (or those with `node_label`).
fn daemonset(ctx: &TestContext, name: &str, rolling: Value, node_label: Option<&str>) -> Value {
    let mut spec = json!({
        "affinity": real_node_affinity(),
        "tolerations": worker_toleration(),
        "terminationGracePeriodSeconds": 0,
        "containers": [{
            "name": "main",
            "image": ctx.cluster.image("web:v1"),
            "readinessProbe": { "httpGet": { "path": "/", "port": 8080 }, "periodSeconds": 1 },
        }],
    });
    if let Some(label) = node_label {
        spec["nodeSelector"] = json!({ label: "yes" });
    }
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "DaemonSet",
        "metadata": { "name": name },
        "spec": {
            "selector": { "matchLabels": { "app": name } },
            "template": { "metadata": { "labels": { "app": name } }, "spec": spec },
            "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": rolling },
        },
    })
}

async fn create_daemonset(ctx: &TestContext, object: Value) -> Result<()> {
    let ds: DaemonSet = serde_json::from_value(object)?;
    ctx.api::<DaemonSet>()
        .create(&PostParams::default(), &ds)
        .await?;
    Ok(())
}

/// A JSON patch of the image alone: a merge patch would replace the containers list,
/// probe included, and the change would no longer be an image change only.
async fn set_image(ctx: &TestContext, name: &str, image: &str) -> Result<()> {
    let patch: json_patch::Patch = serde_json::from_value(json!([{
        "op": "replace",
        "path": "/spec/template/spec/containers/0/image",
        "value": ctx.cluster.image(image),
    }]))?;
    ctx.api::<DaemonSet>()
        .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await?;
    Ok(())
}

/// What the test reads of one live pod.
#[derive(Debug, Clone)]
struct Seen {
    uid: String,
    image: String,
    restarts: i32,
    ready: bool,
}

/// The live (not terminating) pods of `app` by node.
async fn pods_by_node(ctx: &TestContext, app: &str) -> Result<BTreeMap<String, Vec<Seen>>> {
    let params = ListParams::default().labels(&format!("app={app}"));
    let mut by_node: BTreeMap<String, Vec<Seen>> = BTreeMap::new();
    for pod in ctx.api::<Pod>().list(&params).await?.items {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let node = (pod.spec.as_ref()).and_then(|s| s.node_name.clone());
        by_node
            .entry(node.unwrap_or_default())
            .or_default()
            .push(seen(&pod));
    }
    Ok(by_node)
}

fn seen(pod: &Pod) -> Seen {
    let status = pod.status.clone().unwrap_or_default();
    let main = (status.container_statuses.unwrap_or_default().into_iter())
        .find(|c| c.name == "main")
        .unwrap_or_default();
    // The spec's image: the status names the image by one of its names, and another
    // suite may have pushed the same image under another name.
    let image = (pod.spec.as_ref())
        .and_then(|s| s.containers.iter().find(|c| c.name == "main"))
        .and_then(|c| c.image.clone());
    Seen {
        uid: pod.uid().unwrap_or_default(),
        image: image.unwrap_or_default(),
        restarts: main.restart_count,
        // Serving, not only Ready: an in-place update closes the gate before the kubelet
        // turns Ready False, and the spec already names the new image then.
        ready: is_serving(pod) && main.ready,
    }
}

fn names(nodes: &[RealNode]) -> BTreeSet<String> {
    nodes.iter().map(|n| n.name.clone()).collect()
}

/// Waits until each of `nodes` (and no other) runs one ready pod of `app` on `image`,
/// checking all along that no more than `max_unavailable` of them lack a ready pod.
async fn settle_on(
    ctx: &TestContext,
    app: &str,
    nodes: &BTreeSet<String>,
    image: &str,
    max_unavailable: usize,
) -> Result<BTreeMap<String, Seen>> {
    let image = ctx.cluster.image(image);
    poll_until(
        &format!("{app} ready on {image} on {nodes:?}"),
        WAIT,
        || async {
            let by_node = pods_by_node(ctx, app).await?;
            let unavailable = (nodes.iter())
                .filter(|n| !by_node.get(*n).is_some_and(|p| p.iter().any(|s| s.ready)))
                .count();
            invariant(unavailable <= max_unavailable, || {
                format!("{unavailable} real nodes without a ready {app} pod: {by_node:?}")
            })?;
            let on: BTreeSet<String> = by_node.keys().cloned().collect();
            let done = on == *nodes
                && (by_node.values()).all(|p| p.len() == 1 && p[0].ready && p[0].image == image);
            Ok(done.then(|| {
                by_node
                    .into_iter()
                    .map(|(n, mut p)| (n, p.remove(0)))
                    .collect()
            }))
        },
    )
    .await
}

async fn delete_daemonset(ctx: &TestContext, name: &str) -> Result<()> {
    ctx.api::<DaemonSet>()
        .delete(name, &DeleteParams::background())
        .await?;
    Ok(())
}

/// An image change under InPlaceIfPossible restarts the daemon's container in place on
/// every real node, one node at a time (maxUnavailable 1): same pods, one restart each.
#[tokio::test]
async fn an_advanced_daemonset_updates_in_place_on_every_real_node() -> Result<()> {
    run_in_namespace("real-ds-inplace", |ctx| async move {
        let nodes = names(&real_nodes(&ctx, NODES).await?);
        let rolling = json!({ "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 1 });
        create_daemonset(&ctx, daemonset(&ctx, "daemon", rolling, None)).await?;
        let before = settle_on(&ctx, "daemon", &nodes, "web:v1", NODES).await?;

        set_image(&ctx, "daemon", "web:v2").await?;
        let after = settle_on(&ctx, "daemon", &nodes, "web:v2", 1).await?;
        for (node, old) in &before {
            let new = &after[node];
            ensure!(
                new.uid == old.uid,
                "{node}: the pod was replaced ({old:?} → {new:?})"
            );
            ensure!(
                new.restarts == old.restarts + 1,
                "{node}: restartCount {} → {}",
                old.restarts,
                new.restarts
            );
        }
        delete_daemonset(&ctx, "daemon").await
    })
    .await
}

/// A surging rollout (maxSurge 1, maxUnavailable 0) replaces the pod of every real node
/// while each node keeps a ready pod the whole time.
#[tokio::test]
async fn a_surging_rollout_keeps_a_ready_pod_on_every_real_node() -> Result<()> {
    run_in_namespace("real-ds-surge", |ctx| async move {
        let nodes = names(&real_nodes(&ctx, NODES).await?);
        let rolling = json!({ "rollingUpdateType": "Surging", "maxSurge": 1, "maxUnavailable": 0 });
        create_daemonset(&ctx, daemonset(&ctx, "surge", rolling, None)).await?;
        let before = settle_on(&ctx, "surge", &nodes, "web:v1", NODES).await?;

        set_image(&ctx, "surge", "web:v2").await?;
        let after = settle_on(&ctx, "surge", &nodes, "web:v2", 0).await?;
        for (node, old) in &before {
            ensure!(
                after[node].uid != old.uid,
                "{node}: the pod was not replaced"
            );
        }
        delete_daemonset(&ctx, "surge").await
    })
    .await
}

async fn label_node(ctx: &TestContext, node: &str, key: &str, value: Option<&str>) -> Result<()> {
    let patch = json!({ "metadata": { "labels": { key: value } } });
    Api::<Node>::all(ctx.client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// Runs `body` with the label `<key>=yes` on `nodes`, and removes it from every real
/// node afterwards, whatever `body` did.
async fn with_label<F, Fut>(ctx: &TestContext, key: &str, nodes: &[String], body: F) -> Result<()>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut result = Ok(());
    for node in nodes {
        if let Err(err) = label_node(ctx, node, key, Some("yes")).await {
            result = Err(err);
            break;
        }
    }
    if result.is_ok() {
        result = body().await;
    }
    for node in real_nodes(ctx, 1).await.unwrap_or_default() {
        let _ = label_node(ctx, &node.name, key, None).await;
    }
    result
}

/// The daemon runs on the real nodes its nodeSelector names, and leaves a node whose
/// label is removed.
#[tokio::test]
async fn an_advanced_daemonset_follows_its_node_selector_across_real_nodes() -> Result<()> {
    run_in_namespace("real-ds-select", |ctx| async move {
        let nodes: Vec<String> = names(&real_nodes(&ctx, NODES).await?).into_iter().collect();
        let key = format!("{}.stevedore.dev/selected", ctx.namespace);
        let chosen = vec![nodes[1].clone(), nodes[2].clone()];
        with_label(&ctx, &key, &chosen, || async {
            let rolling = json!({ "maxUnavailable": 1 });
            create_daemonset(&ctx, daemonset(&ctx, "picky", rolling, Some(&key))).await?;
            let both: BTreeSet<String> = chosen.iter().cloned().collect();
            settle_on(&ctx, "picky", &both, "web:v1", 2).await?;

            label_node(&ctx, &chosen[0], &key, None).await?;
            let one: BTreeSet<String> = [chosen[1].clone()].into();
            settle_on(&ctx, "picky", &one, "web:v1", 1).await?;
            delete_daemonset(&ctx, "picky").await
        })
        .await
    })
    .await
}

/// parallelism 1 over three real nodes: each node runs the job's pod once, one node after
/// another (each pod's container starts after the previous one finished).
#[tokio::test]
async fn a_broadcastjob_with_parallelism_one_visits_each_real_node_in_turn() -> Result<()> {
    run_in_namespace("real-bcj-serial", |ctx| async move {
        let nodes = names(&real_nodes(&ctx, NODES).await?);
        create_job(
            &ctx,
            broadcast_job(&ctx, "serial", json!({ "parallelism": 1 }), None),
        )
        .await?;
        let done = poll_until("the job finished on every real node", WAIT, || async {
            let job = ctx.api::<BroadcastJob>().get("serial").await?;
            let status = job.status.unwrap_or_default();
            invariant(status.active <= 1, || {
                format!("{} pods active (parallelism 1)", status.active)
            })?;
            let finished = runs(&ctx, "serial").await?;
            Ok((status.succeeded == NODES as i32 && finished.len() == NODES).then_some(finished))
        })
        .await?;
        let visited: BTreeSet<String> = done.iter().map(|r| r.node.clone()).collect();
        ensure!(
            visited == nodes,
            "ran on {visited:?}, expected each of {nodes:?} once: {done:?}"
        );
        for pair in done.windows(2) {
            ensure!(
                pair[1].started >= pair[0].finished,
                "two pods ran at once: {:?} and {:?}",
                pair[0],
                pair[1]
            );
        }
        Ok(())
    })
    .await
}

/// Under completion policy Never, a real node that becomes eligible while the job runs
/// (it gets the label the job's nodeSelector names) gets the job's pod.
#[tokio::test]
async fn a_never_completing_broadcastjob_reaches_a_real_node_that_joins_it() -> Result<()> {
    run_in_namespace("real-bcj-join", |ctx| async move {
        let nodes: Vec<String> = names(&real_nodes(&ctx, NODES).await?).into_iter().collect();
        let key = format!("{}.stevedore.dev/joined", ctx.namespace);
        let first = vec![nodes[0].clone(), nodes[1].clone()];
        with_label(&ctx, &key, &first, || async {
            let spec = json!({ "completionPolicy": { "type": "Never" } });
            create_job(&ctx, broadcast_job(&ctx, "watcher", spec, Some(&key))).await?;
            wait_for_runs_on(&ctx, "watcher", &first).await?;

            label_node(&ctx, &nodes[2], &key, Some("yes")).await?;
            wait_for_runs_on(&ctx, "watcher", &nodes).await
        })
        .await
    })
    .await
}

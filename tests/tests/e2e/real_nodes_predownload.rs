//! Pre-download of a CloneSet's new image on the cluster's three real kubelet nodes
//! (`deploy/local/run.sh --real-nodes 3`): four pods spread over the nodes (pre-download
//! needs more than three replicas, as in OpenKruise), an in-place rollout held by its
//! partition after the first pod; the new image (a name no node has pulled yet) lands in
//! the containerd of each node whose pods still wait, through that node's own agent,
//! before those pods are updated.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::CloneSet;
use stevedore_tests::pods::{condition, is_ready};
use stevedore_tests::real_nodes::{
    distinct_copy, node_containerd, real_node_affinity, real_nodes, worker_toleration,
};
use stevedore_tests::scratch::ScratchDir;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

const NODES: usize = 3;
const REPLICAS: usize = 4;
const WAIT: Duration = Duration::from_secs(180);

fn cloneset(ctx: &TestContext) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {
            "name": "web",
            "annotations": {
                "apps.kruise.io/image-predownload-parallelism": "3",
                "apps.kruise.io/image-predownload-min-updated-ready-pods": "1",
            },
        },
        "spec": {
            "replicas": REPLICAS,
            "selector": { "matchLabels": { "app": "web" } },
            // One pod updates first; the other three wait behind the partition.
            "updateStrategy": { "type": "InPlaceIfPossible", "partition": REPLICAS - 1, "maxUnavailable": 1 },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": {
                    "affinity": real_node_affinity(),
                    "topologySpreadConstraints": [{
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": { "matchLabels": { "app": "web" } },
                    }],
                    "tolerations": worker_toleration(),
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{
                        "name": "web",
                        "image": ctx.cluster.image("web:v1"),
                        "readinessProbe": { "httpGet": { "path": "/", "port": 8080 }, "periodSeconds": 1 },
                    }],
                },
            },
        },
    })
}

/// web:v2 as an image of this test's own (its own name and image ID), so no node holds it
/// before the rollout and no other suite's web:v2 is reported under its name.
async fn fresh_v2(ctx: &TestContext, scratch: &ScratchDir) -> Result<String> {
    let image = ctx.cluster.image(&format!("{}-web:v2", ctx.namespace));
    let v2 = ctx.cluster.image("web:v2");
    distinct_copy(&v2, &image, &ctx.namespace, scratch.path()).await?;
    Ok(image)
}

fn image_of(pod: &Pod) -> String {
    (pod.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

fn node_of(pod: &Pod) -> String {
    (pod.spec.as_ref())
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

async fn pods(ctx: &TestContext) -> Result<Vec<Pod>> {
    let params = ListParams::default().labels("app=web");
    Ok(ctx.api::<Pod>().list(&params).await?.items)
}

fn holds(ctx: &TestContext, node: &str, image: &str) -> Result<bool> {
    let listed = node_containerd(ctx, node)?.ctr(&["images", "ls", "-q"])?;
    Ok(listed.lines().any(|line| line == image))
}

#[tokio::test]
async fn a_clonesets_new_image_reaches_the_real_nodes_of_its_waiting_pods_first() -> Result<()> {
    run_in_namespace("real-predownload", |ctx| async move {
        let nodes: BTreeSet<String> = (real_nodes(&ctx, NODES).await?.into_iter())
            .map(|n| n.name)
            .collect();
        let scratch = ScratchDir::new(&ctx.namespace)?;
        let v2 = fresh_v2(&ctx, &scratch).await?;
        let set: CloneSet = serde_json::from_value(cloneset(&ctx))?;
        ctx.api::<CloneSet>()
            .create(&PostParams::default(), &set)
            .await?;
        poll_until("four ready pods over every real node", WAIT, || async {
            let pods = pods(&ctx).await?;
            let on: BTreeSet<String> = pods.iter().map(node_of).collect();
            Ok((pods.len() == REPLICAS && on == nodes && pods.iter().all(is_ready)).then_some(()))
        })
        .await?;

        // A JSON patch of the image alone: a merge patch would replace the containers
        // list, probe included, and the change would no longer be in-place.
        let patch: json_patch::Patch = serde_json::from_value(json!([{
            "op": "replace", "path": "/spec/template/spec/containers/0/image", "value": v2
        }]))?;
        ctx.api::<CloneSet>()
            .patch("web", &PatchParams::default(), &Patch::Json::<()>(patch))
            .await?;

        let waiting = poll_until("the new image on the waiting pods' nodes", WAIT, || async {
            let pods = pods(&ctx).await?;
            let updated: Vec<String> = (pods.iter()).filter(|p| image_of(p) == v2).map(node_of).collect();
            ensure!(updated.len() <= 1, "the partition let {} pods update", updated.len());
            let waiting: Vec<&Pod> = pods.iter().filter(|p| image_of(p) != v2).collect();
            if updated.len() != 1 || waiting.len() != REPLICAS - 1 {
                return Ok(None);
            }
            let waiting_nodes: BTreeSet<String> = waiting.iter().map(|p| node_of(p)).collect();
            for node in &waiting_nodes {
                if !holds(&ctx, node, &v2)? {
                    return Ok(None);
                }
            }
            // Still waiting, and ready, once their nodes hold the image: pulled ahead.
            let still_ready = waiting.iter().all(|p| condition(p, "Ready").as_deref() == Some("True"));
            Ok(still_ready.then_some((waiting_nodes, updated[0].clone())))
        })
        .await?;
        let (waiting, updated) = waiting;
        let pulled_ahead: Vec<&String> = waiting.iter().filter(|n| **n != updated).collect();
        ensure!(
            pulled_ahead.len() >= 2,
            "the image reached only {pulled_ahead:?} ahead of their pods (waiting on {waiting:?}, updated on {updated})"
        );
        Ok(())
    })
    .await
}

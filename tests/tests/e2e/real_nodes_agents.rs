//! The agent on each of the cluster's three real kubelet nodes (`deploy/local/run.sh
//! --real-nodes 3`): every node runs the DaemonSet's agent, which answers for its own
//! node only; a token minted for one node's agent is refused by another's; and an
//! ImagePullJob over the real nodes pulls through each node's agent into that node's own
//! containerd, with byte progress from each; and the control plane keeps to the
//! control-plane node, never a worker.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::ResourceExt as _;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use stevedore_api::imagelist::{ImagePullPhase, ImageStatus};
use stevedore_api::{ImageList, ImagePullJob};
use stevedore_proto::stevedore::agent::v1::{
    GetNodeInfoRequest, node_service_client::NodeServiceClient,
};
use stevedore_tests::auth::{
    bind_cluster_role, node_info_once_allowed, token_for, unbind, with_token,
};
use stevedore_tests::kept_watch::{Kept, keep_watching};
use stevedore_tests::random_image;
use stevedore_tests::real_nodes::{
    RealNode, agent_channel, agent_pod, copy_to_registry, node_containerd, real_nodes,
};
use stevedore_tests::scratch::ScratchDir;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

const NODES: usize = 3;
const CONTROL_PLANE_ROLE: &str = "node-role.kubernetes.io/control-plane";
const WAIT: Duration = Duration::from_secs(180);

/// Every real node runs a Ready agent, reachable on the node's IP, whose certificate
/// names the node and which reports that node as its own.
#[tokio::test]
async fn every_real_node_runs_an_agent_that_answers_for_its_own_node() -> Result<()> {
    run_in_namespace("real-agents", |ctx| async move {
        let nodes = real_nodes(&ctx, NODES).await?;
        let binding = bind_cluster_role(&ctx, "stevedore:agent-client", "operator").await?;
        let result = async {
            for node in &nodes {
                agent_pod(&ctx, &node.name).await?;
                let token = token_for(&ctx, "operator", &node.name).await?;
                let channel = agent_channel(&ctx, node).await?;
                let info = node_info_once_allowed(channel, &token).await?;
                ensure!(
                    info.node_name == node.name,
                    "{} answered {info:?}",
                    node.name
                );
            }
            Ok(())
        }
        .await;
        unbind(&ctx, &binding).await;
        result
    })
    .await
}

/// A token bound to one node's agent is refused by every other node's agent (each agent
/// accepts only its own node's audience), and accepted by its own.
#[tokio::test]
async fn a_token_for_one_real_nodes_agent_is_refused_by_the_others() -> Result<()> {
    run_in_namespace("real-agent-audience", |ctx| async move {
        let nodes = real_nodes(&ctx, NODES).await?;
        let binding = bind_cluster_role(&ctx, "stevedore:agent-client", "operator").await?;
        let result = async {
            let owner = &nodes[1];
            let token = token_for(&ctx, "operator", &owner.name).await?;
            node_info_once_allowed(agent_channel(&ctx, owner).await?, &token).await?;
            for other in nodes.iter().filter(|n| n.name != owner.name) {
                refused(&ctx, other, &token, &owner.name).await?;
            }
            Ok(())
        }
        .await;
        unbind(&ctx, &binding).await;
        result
    })
    .await
}

async fn refused(ctx: &TestContext, node: &RealNode, token: &str, owner: &str) -> Result<()> {
    agent_pod(ctx, &node.name).await?;
    let mut client = NodeServiceClient::new(agent_channel(ctx, node).await?);
    let answer = client
        .get_node_info(with_token(GetNodeInfoRequest {}, token)?)
        .await;
    let status = answer
        .err()
        .with_context(|| format!("{}'s agent accepted a token for {owner}'s agent", node.name))?;
    ensure!(
        status.code() == tonic::Code::Unauthenticated,
        "{}'s agent answered {:?} ({}), expected Unauthenticated",
        node.name,
        status.code(),
        status.message()
    );
    Ok(())
}

/// Pushes a fresh image (random layers, so no node has it yet) to the local registry.
async fn push_fresh_image(ctx: &TestContext, scratch: &ScratchDir) -> Result<String> {
    let layout = random_image::write_layout(&scratch.path().join("layout"), "v1", 3, 512 << 10)?;
    let image = ctx.cluster.image(&format!("{}-pull:v1", ctx.namespace));
    copy_to_registry(&format!("oci:{}:v1", layout.display()), &image).await?;
    Ok(image)
}

/// An ImagePullJob over the three real nodes: each node's agent pulls the image into its
/// own node's containerd, reports its bytes (done = total > 0) in the node's ImageList,
/// and the job counts three successes.
#[tokio::test]
async fn an_imagepulljob_pulls_on_every_real_node_through_its_own_agent() -> Result<()> {
    run_in_namespace("real-ipj", |ctx| async move {
        let nodes = real_nodes(&ctx, NODES).await?;
        let scratch = ScratchDir::new(&ctx.namespace)?;
        let image = push_fresh_image(&ctx, &scratch).await?;
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        let job: ImagePullJob = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "ImagePullJob",
            "metadata": { "name": "everywhere" },
            "spec": { "image": image, "selector": { "names": names } },
        }))?;
        let seen = watch_pulls(&ctx, image.clone());
        ctx.api::<ImagePullJob>()
            .create(&PostParams::default(), &job)
            .await?;
        poll_until("the job's three pulls succeeded", WAIT, || async {
            let job = ctx.api::<ImagePullJob>().get("everywhere").await?;
            let status = job.status.unwrap_or_default();
            Ok((status.succeeded == NODES as i32).then_some(()))
        })
        .await?;
        for node in &nodes {
            let pulled = seen.lock()?.get(&node.name).cloned();
            let pulled = pulled.with_context(|| {
                format!("{}'s ImageList never had {image} Succeeded", node.name)
            })?;
            ensure!(
                pulled.bytes_total > 0 && pulled.bytes_done == pulled.bytes_total,
                "{}'s pull of {image}: {pulled:?}",
                node.name
            );
            let listed = node_containerd(&ctx, &node.name)?.ctr(&["images", "ls", "-q"])?;
            ensure!(
                listed.lines().any(|line| line == image),
                "{}'s containerd does not hold {image}: {listed}",
                node.name
            );
        }
        Ok(())
    })
    .await
}

/// Follows every ImageList and keeps, per node, the status of `image` once Succeeded
/// (the job's entries, and their status, go when the job completes).
fn watch_pulls(ctx: &TestContext, image: String) -> Kept<BTreeMap<String, ImageStatus>> {
    let lists: Api<ImageList> = Api::all(ctx.client.clone());
    keep_watching(lists, move |pulls: &mut BTreeMap<_, _>, list| {
        let status = list.status.as_ref().and_then(|s| s.images.get(&image));
        if let Some(status) = status.filter(|s| s.phase == ImagePullPhase::Succeeded) {
            pulls.insert(list.name_any(), status.clone());
        }
    })
}

/// With workers in the cluster, the control plane is required on control-plane nodes
/// (deploy/local/controlplane, as the chart's `placement: auto` on such a cluster): every
/// replica runs on a node labelled node-role.kubernetes.io/control-plane.
#[tokio::test]
async fn the_control_plane_runs_only_on_control_plane_nodes() -> Result<()> {
    run_in_namespace("real-cp-placement", |ctx| async move {
        real_nodes(&ctx, NODES).await?;
        let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), "kube-system");
        let deployment = deployments.get("stevedore-controlplane").await?;
        let required = (deployment.spec.and_then(|s| s.template.spec))
            .and_then(|s| {
                s.affinity?
                    .node_affinity?
                    .required_during_scheduling_ignored_during_execution
            })
            .context("the control plane has no required node affinity")?;
        let names_the_role = (required.node_selector_terms.iter()).all(|term| {
            (term.match_expressions.iter().flatten())
                .any(|e| e.key == CONTROL_PLANE_ROLE && e.operator == "Exists")
        });
        ensure!(
            names_the_role,
            "the required affinity does not name {CONTROL_PLANE_ROLE}: {required:?}"
        );

        let nodes: Api<Node> = Api::all(ctx.client.clone());
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), "kube-system");
        let params = ListParams::default().labels("app.kubernetes.io/name=stevedore-controlplane");
        for pod in pods.list(&params).await?.items {
            let Some(node) = pod.spec.and_then(|s| s.node_name) else {
                continue;
            };
            let labels = nodes.get(&node).await?.metadata.labels.unwrap_or_default();
            ensure!(
                labels.contains_key(CONTROL_PLANE_ROLE),
                "a control-plane replica runs on {node}, which is no control-plane node"
            );
        }
        Ok(())
    })
    .await
}

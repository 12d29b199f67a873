//! A real node that joins the cluster while workloads run: `cluster.sh node add` starts
//! one more worker (its own kubelet, containerd and kube-proxy, and the agent from the
//! DaemonSet), as a node joins a production cluster, and it leaves again afterwards.
//!
//! Runs alone: while it lasts the cluster has one more real node, which the suites that
//! count the real nodes (`real_nodes_workloads`, `real_nodes_agents`) would see.

use std::collections::BTreeSet;

use anyhow::Result;
use serde_json::json;
use stevedore_tests::real_node_jobs::{broadcast_job, create_job, wait_for_runs_on};
use stevedore_tests::real_nodes::{AddedNode, agent_pod, real_nodes};
use stevedore_tests::run_in_namespace;

/// Under completion policy Never, a BroadcastJob that has run on every real node gets a
/// pod on a real node added while it runs, and the new node's agent comes up with it.
#[tokio::test]
async fn a_never_completing_broadcastjob_reaches_a_real_node_added_while_it_runs() -> Result<()> {
    run_in_namespace("real-bcj-added", |ctx| async move {
        let before: BTreeSet<String> = (real_nodes(&ctx, 1).await?.into_iter())
            .map(|n| n.name)
            .collect();
        let before: Vec<String> = before.into_iter().collect();
        let spec = json!({ "completionPolicy": { "type": "Never" } });
        create_job(&ctx, broadcast_job(&ctx, "watcher", spec, None)).await?;
        wait_for_runs_on(&ctx, "watcher", &before).await?;

        let added = AddedNode::add()?;
        let mut all = before.clone();
        all.push(added.name.clone());
        wait_for_runs_on(&ctx, "watcher", &all).await?;
        agent_pod(&ctx, &added.name).await?;
        Ok(())
    })
    .await
}

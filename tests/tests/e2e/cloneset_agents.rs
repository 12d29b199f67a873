//! In-place updates through the agents of simulated nodes (one real agent process per
//! kwok node; a kwok stage plays the kubelet's restart): the control plane flips
//! `InPlaceUpdateReady` through each pod's own agent, and an agent that stops answering
//! makes the updates on its node wait — with a FailedUpdate condition and an
//! AgentUnreachable event, the pods untouched — until it is back.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::ResourceExt as _;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stevedore_api::CloneSet;
use stevedore_tests::pods::condition;
use stevedore_tests::sim::SimAgents;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use crate::cloneset_support;
use cloneset_support::{image_of, node_of, pods_of, sim_cloneset};

const V1: &str = "web:v1";
const V2: &str = "web:v2";

fn cloneset(ctx: &TestContext, prefix: &str, replicas: i32) -> Result<CloneSet> {
    // Two pods per node, so one node's agent can die while the other's works.
    let strategy = json!({ "type": "InPlaceIfPossible", "maxUnavailable": "100%" });
    Ok(serde_json::from_value(sim_cloneset(
        ctx, prefix, replicas, strategy,
    ))?)
}

/// Waits until `replicas` pods run `image`, updated, ready and `InPlaceUpdateReady`.
async fn all_on(ctx: &TestContext, image_name: &str, replicas: usize) -> Result<Vec<Pod>> {
    let want = ctx.cluster.image(image_name);
    poll_until(
        &format!("{replicas} pods on {image_name}, ready and InPlaceUpdateReady"),
        Duration::from_secs(90),
        || {
            let want = want.clone();
            async move {
                let pods = pods_of(ctx, "web").await?;
                let done = pods.len() == replicas
                    && pods.iter().all(|p| {
                        image_of(p) == want
                            && condition(p, "Ready").as_deref() == Some("True")
                            && condition(p, "InPlaceUpdateReady").as_deref() == Some("True")
                            && !cloneset_support::in_place_update_pending(p)
                    });
                Ok(done.then_some(pods))
            }
        },
    )
    .await
}

fn failed_update(cs: &CloneSet) -> Option<String> {
    cs.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "FailedUpdate" && c.status == "True")
        .map(|c| c.message.clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_agent_holds_its_nodes_updates_until_it_is_back() -> Result<()> {
    run_in_namespace("cs-agents", |ctx| async move {
        let prefix = format!("{}-n", ctx.namespace);
        let sim = SimAgents::up(ctx.cluster, &prefix, 2)?;
        let sets = ctx.api::<CloneSet>();
        sets.create(&PostParams::default(), &cloneset(&ctx, &prefix, 4)?)
            .await?;
        let before = all_on(&ctx, V1, 4).await?;
        let uids: BTreeMap<String, String> = before
            .iter()
            .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
            .collect();
        let on_dead: Vec<String> = before
            .iter()
            .filter(|p| node_of(p) == sim.node(1))
            .map(|p| p.name_any())
            .collect();
        ensure!(
            !on_dead.is_empty() && on_dead.len() < 4,
            "the pods should spread over both simulated nodes: {:?}",
            before.iter().map(|p| (p.name_any(), node_of(p).to_owned())).collect::<Vec<_>>()
        );

        sim.kill(1)?;
        let patch = json!([{ "op": "replace", "path": "/spec/template/spec/containers/0/image",
                              "value": ctx.cluster.image(V2) }]);
        sets.patch("web", &PatchParams::default(), &Patch::<()>::Json(serde_json::from_value(patch)?))
            .await?;

        // The live node's pods update in place; the dead node's wait, with a condition.
        let message = poll_until(
            "the live node's pods updated and FailedUpdate naming the dead agent",
            Duration::from_secs(90),
            || {
                let (sets, on_dead, dead_node) = (sets.clone(), on_dead.clone(), sim.node(1));
                let v2 = ctx.cluster.image(V2);
                let ctx = &ctx;
                async move {
                    let pods = pods_of(ctx, "web").await?;
                    let live_done = pods.iter().filter(|p| !on_dead.contains(&p.name_any())).all(|p| {
                        image_of(p) == v2 && condition(p, "InPlaceUpdateReady").as_deref() == Some("True")
                    });
                    let cs = sets.get("web").await?;
                    let message = failed_update(&cs).filter(|m| m.contains(&dead_node));
                    Ok(message.filter(|_| live_done))
                }
            },
        )
        .await?;
        ensure!(message.contains("agent"), "FailedUpdate should say the agent is the problem: {message}");
        for pod in pods_of(&ctx, "web").await? {
            if on_dead.contains(&pod.name_any()) {
                ensure!(
                    image_of(&pod) == ctx.cluster.image(V1),
                    "{} on the dead agent's node was patched although its agent never set InPlaceUpdateReady=False",
                    pod.name_any()
                );
            }
        }
        let events = ctx.api::<Event>().list(&ListParams::default()).await?.items;
        ensure!(
            events.iter().any(|e| e.reason.as_deref() == Some("AgentUnreachable")
                && e.involved_object.kind.as_deref() == Some("CloneSet")),
            "no AgentUnreachable event on the CloneSet: {:?}",
            events.iter().map(|e| (e.reason.clone(), e.message.clone())).collect::<Vec<_>>()
        );

        sim.restart()?;
        let after = all_on(&ctx, V2, 4).await?;
        for pod in &after {
            ensure!(
                uids.get(&pod.name_any()) == pod.uid().as_ref(),
                "{} was replaced, not updated in place",
                pod.name_any()
            );
        }
        poll_until("FailedUpdate to clear", Duration::from_secs(60), || {
            let sets = sets.clone();
            async move {
                let cs = sets.get("web").await?;
                let status = cs.status.clone().context("status")?;
                Ok((failed_update(&cs).is_none()
                    && status.updated_ready_replicas == 4
                    && status.current_revision == status.update_revision)
                    .then_some(()))
            }
        })
        .await?;
        sets.delete("web", &Default::default()).await?;
        drop(sim);
        Ok(())
    })
    .await
}

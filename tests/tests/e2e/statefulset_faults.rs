//! The Advanced StatefulSet of the deployed (in-cluster) control plane under faults, on
//! simulated nodes with real agents (`tests/src/sim.rs`): the leader killed in the middle
//! of two rollouts, a recreate one and an in-place one (no ordinal ever has two pods or
//! goes beyond the replicas, no claim is lost or replaced, both rollouts finish); and an
//! agent that stops answering holds only its own node's in-place updates until it is back.
//!
//! Runs alone: it kills the control plane's leader, which every other suite needs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use kube::ResourceExt as _;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::StatefulSet;
use stevedore_tests::controlplane::{kill_leader, leader, new_leader, wait_control_plane_ready};
use stevedore_tests::pods::condition;
use stevedore_tests::sim::SimAgents;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use crate::cloneset_support;
use cloneset_support::{Recorder, Seen, image_of, node_of};

const REPLICAS: i32 = 4;
const ROLLOUT: Duration = Duration::from_secs(180);

/// A Parallel StatefulSet of `web:v1` on the simulated nodes `prefix-*`, spread evenly,
/// with one claim per pod, updated by `policy` with `maxUnavailable`.
fn statefulset(
    ctx: &TestContext,
    name: &str,
    prefix: &str,
    policy: &str,
    max_unavailable: Value,
) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "StatefulSet",
        "metadata": { "name": name },
        "spec": {
            "replicas": REPLICAS,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": { "matchLabels": { "app": name } },
            "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": {
                "podUpdatePolicy": policy, "maxUnavailable": max_unavailable,
                "minReadySeconds": 2,
            } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "nodeSelector": { "stevedore.dev/simulated": prefix },
                    "topologySpreadConstraints": [{
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": { "matchLabels": { "app": name } }
                    }],
                    "tolerations": [
                        { "key": "kwok.x-k8s.io/node", "operator": "Exists" },
                        { "key": "stevedore.dev/simulated", "operator": "Exists" }
                    ],
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{ "name": "web", "image": ctx.cluster.image("web:v1") }]
                }
            },
            "volumeClaimTemplates": [{
                "metadata": { "name": "data" },
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": { "requests": { "storage": "1Mi" } },
                },
            }],
        }
    })
}

async fn create(ctx: &TestContext, object: Value) -> Result<()> {
    let set: StatefulSet = serde_json::from_value(object).context("a valid StatefulSet")?;
    ctx.api::<StatefulSet>()
        .create(&PostParams::default(), &set)
        .await?;
    Ok(())
}

async fn set_image(ctx: &TestContext, name: &str, tag: &str) -> Result<()> {
    let patch = json!([{ "op": "replace", "path": "/spec/template/spec/containers/0/image",
                          "value": ctx.cluster.image(tag) }]);
    ctx.api::<StatefulSet>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::<()>::Json(serde_json::from_value(patch)?),
        )
        .await?;
    Ok(())
}

/// The set's pods that are not terminating.
async fn live_pods(ctx: &TestContext, name: &str) -> Result<Vec<Pod>> {
    let params = ListParams::default().labels(&format!("app={name}"));
    Ok((ctx.api::<Pod>().list(&params).await?.items.into_iter())
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

/// Waits until every pod of the set runs `tag`, ready, and the status says the rollout is
/// done; returns the pods.
async fn wait_rolled_out(ctx: &TestContext, name: &str, tag: &str) -> Result<Vec<Pod>> {
    let want = ctx.cluster.image(tag);
    poll_until(&format!("{name} rolled out to {tag}"), ROLLOUT, || async {
        let pods = live_pods(ctx, name).await?;
        let set = ctx.api::<StatefulSet>().get(name).await?;
        let status = set.status.unwrap_or_default();
        let done = pods.len() == REPLICAS as usize
            && pods
                .iter()
                .all(|p| image_of(p) == want && condition(p, "Ready").as_deref() == Some("True"))
            && status.updated_ready_replicas == REPLICAS
            && status.current_revision == status.update_revision;
        Ok(done.then_some(pods))
    })
    .await
}

fn uids(pods: &[Pod]) -> BTreeMap<String, String> {
    pods.iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect()
}

/// Replays a pod history of set `name`: an error naming the first ordinal outside
/// `0..REPLICAS`, or a moment with more live pods than replicas.
fn check_ordinals(history: &[Seen<Pod>], name: &str) -> Result<()> {
    let allowed: BTreeSet<String> = (0..REPLICAS).map(|i| format!("{name}-{i}")).collect();
    let mut live: BTreeMap<String, String> = BTreeMap::new();
    for seen in history
        .iter()
        .filter(|s| s.object.labels().get("app").map(String::as_str) == Some(name))
    {
        let pod = seen.object.name_any();
        ensure!(
            allowed.contains(&pod),
            "pod {pod} is beyond the ordinals {allowed:?}"
        );
        if seen.deleted {
            live.remove(&pod);
        } else {
            live.insert(pod, seen.object.uid().unwrap_or_default());
        }
        ensure!(
            live.len() <= REPLICAS as usize,
            "{} pods at once: {live:?}",
            live.len()
        );
    }
    Ok(())
}

async fn claims(ctx: &TestContext) -> Result<BTreeMap<String, String>> {
    let list = ctx
        .api::<PersistentVolumeClaim>()
        .list(&ListParams::default())
        .await?;
    Ok(list
        .items
        .iter()
        .map(|c| (c.name_any(), c.uid().unwrap_or_default()))
        .collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn rollouts_survive_a_leader_kill() -> Result<()> {
    run_in_namespace("asts-leader-kill", |ctx| async move {
        wait_control_plane_ready(&ctx.client).await?;
        let prefix = format!("{}-n", ctx.namespace);
        let _sim = SimAgents::up(ctx.cluster, &prefix, 2)?;
        create(
            &ctx,
            statefulset(&ctx, "rec", &prefix, "ReCreate", json!(1)),
        )
        .await?;
        create(
            &ctx,
            statefulset(&ctx, "inp", &prefix, "InPlaceIfPossible", json!(1)),
        )
        .await?;
        let rec_before = uids(&wait_rolled_out(&ctx, "rec", "web:v1").await?);
        let inp_before = uids(&wait_rolled_out(&ctx, "inp", "web:v1").await?);
        let claims_before = claims(&ctx).await?;
        ensure!(
            claims_before.len() == 2 * REPLICAS as usize,
            "claims {claims_before:?}"
        );

        let pod_log = Recorder::<Pod>::start(&ctx).await?;
        let claim_log = Recorder::<PersistentVolumeClaim>::start(&ctx).await?;
        let old_leader = leader(&ctx.client).await?;
        set_image(&ctx, "rec", "web:v2").await?;
        set_image(&ctx, "inp", "web:v2").await?;
        let v2 = ctx.cluster.image("web:v2");
        poll_until("the first pod of each set on web:v2", ROLLOUT, || async {
            let rec = live_pods(&ctx, "rec").await?;
            let inp = live_pods(&ctx, "inp").await?;
            let started = |pods: &[Pod]| pods.iter().any(|p| image_of(p) == v2);
            Ok((started(&rec) && started(&inp)).then_some(()))
        })
        .await?;
        let how = kill_leader(&ctx.client, &old_leader).await?;
        let taken_by = new_leader(&ctx.client, &old_leader).await?;
        eprintln!("killed {old_leader} ({how}) mid-rollout; {taken_by} leads");
        let unfinished = |pods: Vec<Pod>| pods.iter().any(|p| image_of(p) != v2);
        let rec_mid = unfinished(live_pods(&ctx, "rec").await?);
        let inp_mid = unfinished(live_pods(&ctx, "inp").await?);

        let rec_after = uids(&wait_rolled_out(&ctx, "rec", "web:v2").await?);
        let inp_after = uids(&wait_rolled_out(&ctx, "inp", "web:v2").await?);
        ensure!(
            rec_mid || inp_mid,
            "both rollouts had finished before the kill"
        );
        ensure!(
            inp_after == inp_before,
            "in-place pods replaced: {inp_before:?} then {inp_after:?}"
        );
        ensure!(
            rec_after.keys().eq(rec_before.keys())
                && rec_after.iter().all(|(pod, uid)| rec_before[pod] != *uid),
            "recreate: every ordinal replaced once: {rec_before:?} then {rec_after:?}"
        );
        let history = pod_log.history();
        check_ordinals(&history, "rec")?;
        check_ordinals(&history, "inp")?;
        // Each recreated ordinal had exactly two pods: the old one and its replacement.
        let mut per_ordinal: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for seen in history
            .iter()
            .filter(|s| s.object.labels().get("app").map(String::as_str) == Some("rec"))
        {
            per_ordinal
                .entry(seen.object.name_any())
                .or_default()
                .insert(seen.object.uid().unwrap_or_default());
        }
        ensure!(
            per_ordinal.values().all(|u| u.len() == 2),
            "pods per ordinal: {per_ordinal:?}"
        );

        let claims_after = claims(&ctx).await?;
        ensure!(
            claims_after == claims_before,
            "claims changed: {claims_before:?} then {claims_after:?}"
        );
        let deleted: Vec<String> = (claim_log.history().iter())
            .filter(|s| s.deleted || s.object.metadata.deletion_timestamp.is_some())
            .map(|s| s.object.name_any())
            .collect();
        ensure!(deleted.is_empty(), "claims deleted: {deleted:?}");
        wait_control_plane_ready(&ctx.client).await?;
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_agent_holds_only_its_nodes_in_place_updates() -> Result<()> {
    run_in_namespace("asts-agents", |ctx| async move {
        let prefix = format!("{}-n", ctx.namespace);
        let sim = SimAgents::up(ctx.cluster, &prefix, 2)?;
        create(
            &ctx,
            statefulset(&ctx, "web", &prefix, "InPlaceIfPossible", json!("100%")),
        )
        .await?;
        let before = wait_rolled_out(&ctx, "web", "web:v1").await?;
        let on_dead: BTreeSet<String> = (before.iter())
            .filter(|p| node_of(p) == sim.node(1))
            .map(|p| p.name_any())
            .collect();
        ensure!(
            !on_dead.is_empty() && on_dead.len() < before.len(),
            "the pods should spread over both simulated nodes: {:?}",
            before
                .iter()
                .map(|p| (p.name_any(), node_of(p).to_owned()))
                .collect::<Vec<_>>()
        );

        sim.kill(1)?;
        set_image(&ctx, "web", "web:v2").await?;
        let v2 = ctx.cluster.image("web:v2");
        poll_until("the live node's pods updated in place", ROLLOUT, || async {
            let pods = live_pods(&ctx, "web").await?;
            let live_done = (pods.iter().filter(|p| !on_dead.contains(&p.name_any()))).all(|p| {
                image_of(p) == v2 && condition(p, "InPlaceUpdateReady").as_deref() == Some("True")
            });
            Ok(live_done.then_some(()))
        })
        .await?;
        // The event is written by the sync that tried the dead node's pods, which may run
        // after the live node's pods are done (a sync of its own, retries with backoff), so
        // wait for it rather than read the events once.
        let found = poll_until(
            "an AgentUnreachable event on the StatefulSet",
            ROLLOUT,
            || async {
                let events = ctx.api::<Event>().list(&ListParams::default()).await?.items;
                let unreachable = events.iter().any(|e| {
                    e.reason.as_deref() == Some("AgentUnreachable")
                        && e.involved_object.kind.as_deref() == Some("StatefulSet")
                });
                Ok(unreachable.then_some(()))
            },
        )
        .await;
        if let Err(err) = found {
            let events = ctx.api::<Event>().list(&ListParams::default()).await?.items;
            let seen: Vec<_> = events
                .iter()
                .map(|e| (e.reason.clone(), e.message.clone()))
                .collect();
            let set = ctx.api::<StatefulSet>().get("web").await?;
            let conditions = set.status.map(|s| s.conditions).unwrap_or_default();
            bail!("{err:#}; events {seen:?}; conditions {conditions:?}");
        }
        // The dead agent's pods were never patched (their agent never let them go).
        for pod in live_pods(&ctx, "web").await? {
            if on_dead.contains(&pod.name_any()) {
                ensure!(
                    image_of(&pod) == ctx.cluster.image("web:v1"),
                    "{} on the dead agent's node was updated",
                    pod.name_any()
                );
            }
        }

        sim.restart()?;
        let after = wait_rolled_out(&ctx, "web", "web:v2").await?;
        ensure!(
            uids(&after) == uids(&before),
            "pods were replaced, not updated in place"
        );
        drop(sim);
        Ok(())
    })
    .await
}

//! Faults on the image path, end to end: ImageList entries written by server-side apply
//! on simulated nodes whose agents are real processes, pushed by the in-cluster control
//! plane's distributor, pulled into the cluster's containerd. Images come through a TCP
//! proxy on 127.0.0.1 (the agents reach loopback registries over plain HTTP) that the
//! tests take down and throttle:
//! - a registry outage marks the entry Failed with the reason; it succeeds when the
//!   registry is back;
//! - an agent killed in the middle of a pull pulls again to Succeeded once restarted;
//! - a new control-plane leader re-pushes the lists without making the agent pull again;
//! - an unpullable reference fails its own entry and no other.
//!
//! The cases run one at a time (one simulated node each), as each takes a shared
//! component (an agent, the control plane's leader) away for a while.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use stevedore_api::imagelist::{ImagePullPhase, ImageStatus};
use stevedore_tests::proxy::Proxy;
use stevedore_tests::sim::SimAgents;
use stevedore_tests::{TestContext, poll_until, run_in_namespace, slow_image};

use crate::imagelist_support;

use imagelist_support::{
    apply, complete_in_containerd, containerd_images, image_status, in_containerd, list_exists,
    remove_from_containerd,
};

/// The field manager of every entry these tests write.
const MANAGER: &str = "stevedore-tests-faults";
const CONTROL_PLANE_NAMESPACE: &str = "kube-system";
const CONTROL_PLANE_LEASE: &str = "stevedore-controlplane";
/// Bytes per second the proxy lets through for a pull that must last a while.
const SLOW_RATE: u64 = 1 << 20;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One simulated node with its agent, named after the case and the test's namespace.
fn sim_node(ctx: &TestContext, case: &str) -> Result<SimAgents> {
    let run = ctx.namespace.rsplit('-').next().unwrap_or_default();
    SimAgents::up(ctx.cluster, &format!("faults-{case}-{run}"), 1)
}

/// Waits until `image`'s status on `node` passes `done`, describing it as `what`.
async fn wait_for(
    ctx: &TestContext,
    node: &str,
    image: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(&ImageStatus) -> bool,
) -> Result<ImageStatus> {
    poll_until(what, timeout, || async {
        let status = image_status(&ctx.client, node, image).await?;
        match status {
            Some(status) if done(&status) => Ok(Some(status)),
            // The last status seen goes into the timeout's error.
            Some(status) => bail!("{image} on {node}: {status:?}"),
            None => Ok(None),
        }
    })
    .await
}

fn succeeded(status: &ImageStatus) -> bool {
    status.phase == ImagePullPhase::Succeeded && !status.image_id.is_empty()
}

/// Removes from containerd every image record whose name starts with `prefix`.
fn remove_images_named(ctx: &TestContext, prefix: &str) -> Result<()> {
    let names: Vec<String> = containerd_images(ctx.cluster)?
        .into_iter()
        .filter(|name| name.starts_with(prefix))
        .collect();
    remove_from_containerd(ctx.cluster, &names)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_outage_fails_the_entry_and_it_succeeds_when_the_registry_is_back() -> Result<()>
{
    let _serial = SERIAL.lock().await;
    run_in_namespace("imagelist-faults-outage", |ctx| async move {
        let sim = sim_node(&ctx, "outage")?;
        let node = sim.node(0);
        let proxy = Proxy::start(&ctx.cluster.registry).await?;
        let image = format!("{}/stevedore/web:v1", proxy.host());
        // An earlier run may have left a record of that name: it must really be pulled.
        remove_images_named(&ctx, &proxy.host())?;
        list_exists(&ctx.client, &node).await?;

        proxy.down();
        apply(&ctx.client, &node, MANAGER, json!({ image.clone(): {} })).await?;
        let failed = wait_for(
            &ctx,
            &node,
            &image,
            "the entry Failed, saying the registry is unreachable",
            Duration::from_secs(180),
            |s| s.phase == ImagePullPhase::Failed && s.message.contains("registry unreachable"),
        )
        .await?;
        ensure!(
            failed.message.contains(&proxy.host()),
            "the message names the registry: {failed:?}"
        );
        ensure!(
            failed.image_id.is_empty() && failed.last_pull_time.is_none(),
            "nothing was pulled: {failed:?}"
        );

        proxy.up();
        let pulled = wait_for(
            &ctx,
            &node,
            &image,
            "the entry Succeeded once the registry is back",
            Duration::from_secs(300),
            succeeded,
        )
        .await?;
        let was_in_containerd = in_containerd(ctx.cluster, &image)?;
        // Records named after this run's proxy port are of no use to anyone later.
        remove_images_named(&ctx, &proxy.host())?;
        ensure!(
            pulled.attempts > failed.attempts,
            "pulled by a later retry: {pulled:?}"
        );
        ensure!(
            pulled.message.is_empty(),
            "the Succeeded entry still carries the failure's message (a control plane \
             whose status patches do not remove emptied fields): {pulled:?}"
        );
        ensure!(was_in_containerd, "{image} is not in containerd");
        drop(sim);
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_killed_mid_pull_pulls_the_entry_to_succeeded_once_restarted() -> Result<()> {
    let _serial = SERIAL.lock().await;
    run_in_namespace("imagelist-faults-kill", |ctx| async move {
        let sim = sim_node(&ctx, "kill")?;
        let node = sim.node(0);
        let slow = slow_image::ensure(&ctx.cluster.registry, "imagelist-faults").await?;
        let proxy = Proxy::start(&ctx.cluster.registry).await?;
        let image = format!("{}/{}", proxy.host(), slow.name);
        // No record of the image under any name, so none of its blobs either: the pull
        // has all of them to fetch.
        let names: Vec<String> = containerd_images(ctx.cluster)?
            .into_iter()
            .filter(|name| slow.is_record(name))
            .collect();
        remove_from_containerd(ctx.cluster, &names)?;
        list_exists(&ctx.client, &node).await?;

        proxy.throttle(Some(SLOW_RATE));
        apply(&ctx.client, &node, MANAGER, json!({ image.clone(): {} })).await?;
        let pulling = poll_until(
            "the entry Pulling with bytes done",
            Duration::from_secs(120),
            || async {
                let status = image_status(&ctx.client, &node, &image).await?;
                Ok(status.filter(|s| {
                    (s.phase == ImagePullPhase::Pulling && s.bytes_done > 0)
                        || s.phase == ImagePullPhase::Succeeded
                }))
            },
        )
        .await?;
        ensure!(
            pulling.phase == ImagePullPhase::Pulling && pulling.bytes_done < pulling.bytes_total,
            "the throttled pull should still be running: {pulling:?}"
        );

        sim.kill(0)?;
        proxy.throttle(None);
        sim.restart()?;
        let pulled = wait_for(
            &ctx,
            &node,
            &image,
            "the entry Succeeded after the agent came back",
            Duration::from_secs(300),
            succeeded,
        )
        .await?;
        let complete = complete_in_containerd(ctx.cluster, &image)?;
        remove_images_named(&ctx, &proxy.host())?;
        ensure!(
            pulled.bytes_total > 0 && pulled.bytes_done == pulled.bytes_total,
            "{pulled:?}"
        );
        ensure!(complete, "{image} is not complete in containerd");
        drop(sim);
        Ok(())
    })
    .await
}

/// The sum of the samples of the metric `series` (a name, or a name and labels prefix).
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .filter(|line| line.starts_with(series))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

const PUSHES: &str = "stevedore_agent_rpc_duration_seconds_count{method=\"/stevedore.agent.v1.ImageService/ApplyImageList\",code=\"Ok\"}";
const PULLS_SUCCEEDED: &str = "stevedore_agent_images_pulled_total{result=\"succeeded\"}";

/// The Lease holder, and the holder's pod when it exists and is Ready.
async fn leader(ctx: &TestContext) -> Result<(Option<String>, bool)> {
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), CONTROL_PLANE_NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), CONTROL_PLANE_NAMESPACE);
    let holder = leases
        .get(CONTROL_PLANE_LEASE)
        .await?
        .spec
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty());
    let ready = match &holder {
        Some(name) => pods
            .get_opt(name)
            .await?
            .is_some_and(|pod| stevedore_tests::pods::is_ready(&pod)),
        None => false,
    };
    Ok((holder, ready))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_control_plane_leader_re_pushes_the_list_without_a_new_pull() -> Result<()> {
    let _serial = SERIAL.lock().await;
    run_in_namespace("imagelist-faults-leader", |ctx| async move {
        let sim = sim_node(&ctx, "leader")?;
        let node = sim.node(0);
        let present = ctx.cluster.image("web:v1");
        // Pulled from the registry every time it is pulled, so a second pull would count.
        let always = ctx.cluster.image("web:v2");
        list_exists(&ctx.client, &node).await?;
        let entries = json!({
            present.clone(): {},
            always.clone(): { "alwaysPull": true, "pullInterval": "24h" },
        });
        apply(&ctx.client, &node, MANAGER, entries.clone()).await?;
        let mut before = Vec::new();
        for image in [&present, &always] {
            let what = format!("{image} Succeeded");
            let status = wait_for(
                &ctx,
                &node,
                image,
                &what,
                Duration::from_secs(180),
                succeeded,
            )
            .await?;
            before.push(status);
        }
        let metrics = sim.metrics(0).await?;
        let (pushes, pulls) = (metric(&metrics, PUSHES), metric(&metrics, PULLS_SUCCEEDED));
        ensure!(pulls >= 1.0, "the alwaysPull entry was pulled: {pulls}");

        let (old, _) = leader(&ctx).await?;
        let old = old.context("the control plane has no leader")?;
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), CONTROL_PLANE_NAMESPACE);
        pods.delete(&old, &DeleteParams::default()).await?;
        poll_until(
            "another control-plane replica leading, Ready",
            Duration::from_secs(300),
            || async {
                let (holder, ready) = leader(&ctx).await?;
                Ok((ready && holder.as_deref() != Some(old.as_str())).then_some(()))
            },
        )
        .await?;
        poll_until(
            "the new leader's push reaching the agent",
            Duration::from_secs(180),
            || async { Ok((metric(&sim.metrics(0).await?, PUSHES) > pushes).then_some(())) },
        )
        .await?;

        // A new entry goes through the same push and status stream: once its status is
        // in, whatever the re-push did to the others is in too.
        let marker = ctx.cluster.image("faults-marker:v1");
        let mut with_marker = entries.clone();
        with_marker[&marker] = Value::Object(Default::default());
        apply(&ctx.client, &node, MANAGER, with_marker).await?;
        wait_for(
            &ctx,
            &node,
            &marker,
            "the marker entry's status",
            Duration::from_secs(120),
            |s| s.message.contains("not found"),
        )
        .await?;
        for (image, before) in [&present, &always].into_iter().zip(&before) {
            let after = image_status(&ctx.client, &node, image)
                .await?
                .context("status gone")?;
            ensure!(
                after.phase == ImagePullPhase::Succeeded
                    && after.attempts == before.attempts
                    && after.last_pull_time == before.last_pull_time,
                "{image} was pulled again: before {before:?}, after {after:?}"
            );
        }
        let pulls_after = metric(&sim.metrics(0).await?, PULLS_SUCCEEDED);
        ensure!(
            pulls_after == pulls,
            "the agent pulled again: {pulls} successful pulls before, {pulls_after} after"
        );
        drop(sim);
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unpullable_reference_fails_its_own_entry_alone() -> Result<()> {
    let _serial = SERIAL.lock().await;
    run_in_namespace("imagelist-faults-missing", |ctx| async move {
        let sim = sim_node(&ctx, "missing")?;
        let node = sim.node(0);
        let missing = ctx.cluster.image("faults-does-not-exist:v1");
        let good = ctx.cluster.image("web:v1");
        list_exists(&ctx.client, &node).await?;
        apply(
            &ctx.client,
            &node,
            MANAGER,
            json!({ missing.clone(): {}, good.clone(): {} }),
        )
        .await?;
        let failed = wait_for(
            &ctx,
            &node,
            &missing,
            "the missing image's entry Failed",
            Duration::from_secs(180),
            |s| s.phase == ImagePullPhase::Failed,
        )
        .await?;
        ensure!(
            failed.message.contains("not found")
                && failed.message.contains("stevedore/faults-does-not-exist"),
            "the message names the reference and the registry's answer: {failed:?}"
        );
        let ok = wait_for(
            &ctx,
            &node,
            &good,
            "the good image's entry Succeeded",
            Duration::from_secs(180),
            succeeded,
        )
        .await?;
        ensure!(ok.message.is_empty(), "{ok:?}");
        drop(sim);
        Ok(())
    })
    .await
}

//! The ImageList distributor in the running control plane: each Ready node gets its
//! ImageList; a person's entry (seed 004's shape, with a local image) reaches the node's
//! agent, is pulled, and ends Succeeded with its image ID in status; an agent that does not
//! answer gets its unfinished entries marked, and they succeed once it is back.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use kube::api::Api;
use serde_json::json;
use stevedore_api::ImageList;
use stevedore_api::imagelist::ImagePullPhase;
use stevedore_tests::proxy::Proxy;
use stevedore_tests::sim::SimAgents;
use stevedore_tests::{poll_until, run_in_namespace};

use crate::imagelist_support;

use imagelist_support::{apply, image_status, in_containerd, list_exists, remove_from_containerd};

#[tokio::test(flavor = "multi_thread")]
async fn a_persons_entry_is_pulled_on_the_kubelet_node() -> Result<()> {
    run_in_namespace("imagelist-seed", |ctx| async move {
        let node = ctx.cluster.node_name.clone();
        // Through a proxy of the registry: a name no other suite uses, so removing the
        // record and pulling it again races no pod or pull of theirs (the hot-upgrade
        // suite runs `large:v1` on this node while this one runs).
        let proxy = Proxy::start(&ctx.cluster.registry).await?;
        let image = format!("{}/stevedore/large:v1", proxy.host());
        // One manager across runs, so a run that failed half-way is cleaned up by the next.
        let manager = "stevedore-tests-imagelist-seed";
        list_exists(&ctx.client, &node).await?;
        apply(&ctx.client, &node, manager, json!({})).await?;
        poll_until(
            "no old status of the image",
            Duration::from_secs(30),
            || {
                let (ctx, node, image) = (&ctx, &node, &image);
                async move {
                    Ok(image_status(&ctx.client, node, image)
                        .await?
                        .is_none()
                        .then_some(()))
                }
            },
        )
        .await?;
        remove_from_containerd(ctx.cluster, std::slice::from_ref(&image))?;
        // Whole seconds, as lastPullTime is written.
        let started = k8s_openapi::jiff::Timestamp::from_second(
            k8s_openapi::jiff::Timestamp::now().as_second(),
        )?;
        apply(
            &ctx.client,
            &node,
            manager,
            json!({ image.clone(): { "alwaysPull": false } }),
        )
        .await?;
        let status = poll_until(
            "the entry Succeeded with an image ID",
            Duration::from_secs(120),
            || {
                let (ctx, node, image, started) = (&ctx, &node, &image, started);
                async move {
                    let status = image_status(&ctx.client, node, image).await?;
                    // Pulled by this test, not an old status of the same image.
                    Ok(status.filter(|s| {
                        s.phase == ImagePullPhase::Succeeded
                            && !s.image_id.is_empty()
                            && s.last_pull_time.as_ref().is_some_and(|t| t.0 >= started)
                    }))
                }
            },
        )
        .await?;
        ensure!(
            status.bytes_total > 0 && status.bytes_done == status.bytes_total,
            "the image was really pulled, with byte progress: {status:?}"
        );
        ensure!(
            in_containerd(ctx.cluster, &image)?,
            "{image} is not in containerd"
        );
        let lists: Api<ImageList> = Api::all(ctx.client.clone());
        let list = lists.get(&node).await?;
        let counts = list.status.context("status")?;
        ensure!(counts.succeeded >= 1 && counts.desired >= 1, "{counts:?}");

        // Withdrawing the entry removes it from spec and status (the image stays).
        apply(&ctx.client, &node, manager, json!({})).await?;
        poll_until(
            "the entry gone from status",
            Duration::from_secs(30),
            || {
                let (ctx, node, image) = (&ctx, &node, &image);
                async move {
                    Ok(image_status(&ctx.client, node, image)
                        .await?
                        .is_none()
                        .then_some(()))
                }
            },
        )
        .await?;
        let kept = in_containerd(ctx.cluster, &image)?;
        // A record named after this run's proxy port is of no use to anyone later.
        remove_from_containerd(ctx.cluster, std::slice::from_ref(&image))?;
        ensure!(kept, "withdrawing an entry must not remove the image");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_silent_agent_is_reported_and_its_entries_succeed_when_it_is_back() -> Result<()> {
    run_in_namespace("imagelist-agent", |ctx| async move {
        let prefix = format!("{}-n", ctx.namespace);
        let sim = SimAgents::up(ctx.cluster, &prefix, 1)?;
        let node = sim.node(0);
        let image = ctx.cluster.image("web:v1");
        list_exists(&ctx.client, &node).await?;
        sim.kill(0)?;
        apply(&ctx.client, &node, "person", json!({ image.clone(): {} })).await?;
        let status = poll_until(
            "the entry to say the agent is not answering",
            Duration::from_secs(120),
            || {
                let (ctx, node, image) = (&ctx, &node, &image);
                async move {
                    let status = image_status(&ctx.client, node, image).await?;
                    Ok(status.filter(|s| s.message.contains("not answering")))
                }
            },
        )
        .await?;
        ensure!(
            status.message.contains(&node),
            "the message names the node: {status:?}"
        );
        sim.restart()?;
        poll_until(
            "the entry Succeeded after the agent is back",
            Duration::from_secs(120),
            || {
                let (ctx, node, image) = (&ctx, &node, &image);
                async move {
                    let status = image_status(&ctx.client, node, image).await?;
                    Ok(status
                        .filter(|s| s.phase == ImagePullPhase::Succeeded && !s.image_id.is_empty()))
                }
            },
        )
        .await?;
        drop(sim);
        Ok(())
    })
    .await
}

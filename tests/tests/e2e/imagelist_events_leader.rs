//! A pull failure already recorded as an Event is not recorded again when the control
//! plane's leader changes: the new leader's session replays the agent's status stream,
//! and the failure it replays is the one the node's ImageList already shows.
//!
//! Runs alone: it kills the control plane's leader, which every other suite needs.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use kube::api::Api;
use stevedore_api::ImageList;
use stevedore_api::imagelist::ImagePullPhase;
use stevedore_tests::controlplane::{kill_leader, leader, new_leader, wait_control_plane_ready};
use stevedore_tests::{poll_until, run_in_namespace};

use crate::imagelist_support;

use imagelist_support::{MissingImage, failure_events, image_status, repeated_failures};

const MANAGER: &str = "stevedore-tests-events-leader";

/// The generation of `node`'s ImageList spec and the one its status acknowledges.
async fn generations(client: &kube::Client, node: &str) -> Result<(i64, i64)> {
    let lists: Api<ImageList> = Api::all(client.clone());
    let list = lists.get(node).await?;
    let generation = list.metadata.generation.context("no generation")?;
    let observed = list.status.map_or(0, |s| s.observed_generation);
    Ok((generation, observed))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_leader_does_not_record_a_failure_again() -> Result<()> {
    run_in_namespace("imagelist-events-leader", |ctx| async move {
        wait_control_plane_ready(&ctx.client).await?;
        let pull = MissingImage::on_sim_node(&ctx, "evleader", MANAGER, 1).await?;
        let (node, missing) = (&pull.node, &pull.image);
        poll_until(
            "the pull to fail for good",
            Duration::from_secs(120),
            || async {
                let status = image_status(&ctx.client, node, missing).await?;
                Ok(status.filter(|s| s.phase == ImagePullPhase::Failed))
            },
        )
        .await?;
        poll_until(
            "the pull-failure Event",
            Duration::from_secs(60),
            || async {
                let events = failure_events(&ctx.client, node, missing).await?;
                Ok((!events.is_empty()).then_some(()))
            },
        )
        .await?;

        let old = leader(&ctx.client).await?;
        kill_leader(&ctx.client, &old).await?;
        new_leader(&ctx.client, &old).await?;
        // A spec change the new leader must push and acknowledge: once the status
        // acknowledges it, the new session has connected and taken the agent's replay.
        pull.ask(&ctx.client, 2).await?;
        let (generation, _) = generations(&ctx.client, node).await?;
        poll_until(
            "the new leader to acknowledge the changed list",
            Duration::from_secs(120),
            || async {
                let (_, observed) = generations(&ctx.client, node).await?;
                Ok((observed >= generation).then_some(()))
            },
        )
        .await?;
        // Time for an Event of the replay to land, were one recorded.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let events = failure_events(&ctx.client, node, missing).await?;
        let repeated = repeated_failures(&events);
        ensure!(
            !events.is_empty() && repeated.is_empty(),
            "the failure was recorded again across the leader change: {repeated:?} in {events:?}"
        );

        pull.remove(&ctx.client).await?;
        wait_control_plane_ready(&ctx.client).await?;
        Ok(())
    })
    .await
}

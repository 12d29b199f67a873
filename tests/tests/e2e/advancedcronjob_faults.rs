//! AdvancedCronJob under faults, with the deployed (in-cluster) control plane: finished
//! runs beyond the history limits are pruned (the newest kept); the leader killed while
//! its crons tick leaves exactly one run per minute, and a run that fell due while no
//! replica led is made once by the next leader; ticks missed while the control plane was
//! down run once on its return when `startingDeadlineSeconds` covers the outage, and
//! are reported skipped with an event when not. The crons tick every 2 s and the runs of
//! earlier minutes are made by the test (see `advancedcronjob_support`), so nothing
//! waits for a minute to pass; the planner's clock tests prove the same over minutes.
//!
//! Runs alone: it kills the control plane's leader and stops both replicas for a while,
//! which every other suite needs.

use crate::advancedcronjob_support;

use std::time::Duration;

use advancedcronjob_support::{
    Runs, check_one_run_per_minute, create_cron, cron_events, earlier_run, finished_as, minute_of,
    runs, set_paused, this_minute, wait_event, wait_finished, wait_scheduled_since,
};
use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt as _;
use serde_json::json;
use stevedore_tests::controlplane::{
    kill_leader, leader, new_leader, stop_control_plane, wait_control_plane_ready,
};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};
use tokio::sync::RwLock;

/// Tests that only delay the control plane (a leader kill) share it; stopping it
/// altogether needs it alone, or the other tests' ticks would be missed.
static CONTROL_PLANE: RwLock<()> = RwLock::const_new(());

/// Two finished runs of earlier minutes, made one after the other, then the cron's own:
/// with a history limit of one, each newer one leaves alone.
async fn keeps_the_newest(ctx: &TestContext, name: &str, runs_as: Runs, end: &str) -> Result<()> {
    let spec = json!({
        "paused": true, "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 1,
    });
    let cron = create_cron(ctx, name, runs_as, spec).await?;
    let minute = this_minute();
    let older = earlier_run(ctx, &cron, minute - 3, runs_as)
        .await?
        .name_any();
    wait_finished(ctx, &older, end).await?;
    let newer = earlier_run(ctx, &cron, minute - 2, runs_as)
        .await?
        .name_any();
    wait_finished(ctx, &newer, end).await?;
    // Paused, the cron still prunes its history.
    poll_until(
        &format!("{name} to keep only {newer}"),
        Duration::from_secs(30),
        || async { Ok(runs(ctx, name).await?.keys().eq([&newer]).then_some(())) },
    )
    .await?;
    set_paused(ctx, name, false).await?;
    let kept = poll_until(
        &format!("{name} to keep only its own finished run"),
        Duration::from_secs(60),
        || async {
            let now = runs(ctx, name).await?;
            let only_its_own = now.len() == 1 && !now.contains_key(&newer);
            Ok(
                (only_its_own && now.values().all(|j| finished_as(j) == Some(end)))
                    .then(|| now.into_keys().collect::<Vec<_>>()),
            )
        },
    )
    .await?;
    ensure!(
        kept.iter().all(|n| minute_of(n).is_ok_and(|m| m >= minute)),
        "{name} kept {kept:?}, not a run of its own"
    );
    Ok(())
}

#[tokio::test]
async fn history_limits_keep_only_the_newest_finished_runs() -> Result<()> {
    let _shared = CONTROL_PLANE.read().await;
    run_in_namespace("acj-history", |ctx| async move {
        tokio::try_join!(
            keeps_the_newest(&ctx, "ok", Runs::Succeed, "Complete"),
            keeps_the_newest(&ctx, "bad", Runs::Fail, "Failed"),
        )?;
        Ok(())
    })
    .await
}

/// Checks no Event about the cron says a create failed.
async fn no_failed_create(ctx: &TestContext, cron: &str) -> Result<()> {
    let events = cron_events(ctx, cron).await?;
    let failed: Vec<_> = events.iter().filter(|(r, _)| r == "FailedCreate").collect();
    ensure!(failed.is_empty(), "failed creates of {cron}: {failed:?}");
    Ok(())
}

#[tokio::test]
async fn a_leader_killed_at_a_scheduled_tick_creates_one_run_per_minute() -> Result<()> {
    let _shared = CONTROL_PLANE.read().await;
    run_in_namespace("acj-leader-kill", |ctx| async move {
        wait_control_plane_ready(&ctx.client).await?;
        create_cron(&ctx, "tick", Runs::StayActive, json!({})).await?;
        poll_until("the first run of tick", Duration::from_secs(30), || async {
            Ok((!runs(&ctx, "tick").await?.is_empty()).then_some(()))
        })
        .await?;
        let before = runs(&ctx, "tick").await?;
        let old_leader = leader(&ctx.client).await?;
        // With a tick every 2 s, the leader dies within 2 s of one.
        let how = kill_leader(&ctx.client, &old_leader).await?;
        // Due 2 s after its creation, while no replica leads: the next leader makes it.
        create_cron(&ctx, "during", Runs::StayActive, json!({})).await?;
        let taken_by = new_leader(&ctx.client, &old_leader).await?;
        let took_over = Timestamp::now();
        eprintln!("killed {old_leader} ({how}); {taken_by} leads from {took_over}");

        // Two ticks after the takeover handled for each cron.
        let settled = took_over + SignedDuration::from_secs(4);
        for cron in ["tick", "during"] {
            wait_scheduled_since(&ctx, cron, settled).await?;
            check_one_run_per_minute(&runs(&ctx, cron).await?)?;
            no_failed_create(&ctx, cron).await?;
        }
        let after = runs(&ctx, "tick").await?;
        for (name, job) in &before {
            let same = after.get(name).is_some_and(|j| j.uid() == job.uid());
            ensure!(
                same,
                "run {name} was replaced or deleted after the takeover"
            );
        }
        wait_control_plane_ready(&ctx.client).await?;
        Ok(())
    })
    .await
}

/// The scheduled time a MissSchedule event's message names.
fn skipped_time(message: &str) -> Result<Timestamp> {
    let time = (message.split("scheduled at ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .with_context(|| format!("no scheduled time in {message:?}"))?;
    Ok(time.parse()?)
}

#[tokio::test]
async fn a_tick_missed_while_down_runs_once_within_the_starting_deadline() -> Result<()> {
    // The lock is fair: queued first, the writer would keep the readers from running
    // side by side. They take it within moments of the start.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _alone = CONTROL_PLANE.write().await;
    run_in_namespace("acj-missed", |ctx| async move {
        wait_control_plane_ready(&ctx.client).await?;
        let stopped = stop_control_plane(&ctx.client, ctx.cluster).await?;
        // Created while no replica runs: their ticks pass unseen.
        let deadline = |seconds: i64| json!({ "startingDeadlineSeconds": seconds });
        let covered = create_cron(&ctx, "covered", Runs::StayActive, deadline(300)).await?;
        create_cron(&ctx, "late", Runs::StayActive, deadline(3)).await?;
        let created = covered
            .creation_timestamp()
            .context("no creationTimestamp")?
            .0;
        // Down long enough that some ticks are more than 3 s old on the return (the
        // return itself takes seconds more: a pod start and a leader election).
        tokio::time::sleep(Duration::from_secs(6)).await;
        stopped.start(&ctx.client).await?;
        let back = Timestamp::now();
        eprintln!("crons created at {created} while down, control plane back at {back}");

        // Both run once on the return; only late reports the ticks it skipped.
        let message = wait_event(&ctx, "late", "MissSchedule").await?;
        ensure!(
            message.contains("startingDeadlineSeconds"),
            "MissSchedule message {message:?}"
        );
        let skipped = skipped_time(&message)?;
        ensure!(
            created < skipped && skipped < back,
            "late skipped {skipped}, not a tick of the outage ({created} to {back})"
        );
        let settled = back + SignedDuration::from_secs(4);
        for cron in ["covered", "late"] {
            wait_scheduled_since(&ctx, cron, settled).await?;
            check_one_run_per_minute(&runs(&ctx, cron).await?)?;
        }
        let events = cron_events(&ctx, "covered").await?;
        if events.iter().any(|(reason, _)| reason == "MissSchedule") {
            bail!("covered skipped a tick within its deadline: {events:?}");
        }
        wait_control_plane_ready(&ctx.client).await?;
        Ok(())
    })
    .await
}

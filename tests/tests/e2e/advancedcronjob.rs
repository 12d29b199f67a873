//! The AdvancedCronJob controller of the running (in-cluster) control plane against the
//! real apiserver and the cluster's own Job controller: a cron ticking every 2 s creates
//! one Job per minute named `<name>-<scheduled unix minutes>`, Forbid holds a run while
//! one is active, Replace deletes the active run for the new one. The active run each
//! test starts from is one of an earlier minute that the test makes (see
//! `advancedcronjob_support`), so nothing waits for a minute to pass. The Jobs' pods
//! select a node that does not exist, so every run stays active as long as the test needs.

use crate::advancedcronjob_support;

use std::collections::BTreeSet;
use std::time::Duration;

use advancedcronjob_support::{
    Runs, check_named_by_minute, create_cron, cron_events, earlier_run, last_schedule, minute_of,
    runs, set_paused, this_minute, wait_event, wait_scheduled_since, wait_status_active,
};
use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt as _;
use kube::api::DeleteParams;
use serde_json::json;
use stevedore_api::AdvancedCronJob;
use stevedore_api::advancedcronjob::TemplateKind;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

/// A paused cron with `policy` and an active run of the previous minute it controls;
/// returns that run's name once the controller lists it in status.active.
async fn cron_with_an_active_earlier_run(
    ctx: &TestContext,
    name: &str,
    policy: &str,
) -> Result<String> {
    let spec = json!({ "paused": true, "concurrencyPolicy": policy });
    let cron = create_cron(ctx, name, Runs::StayActive, spec).await?;
    let earlier = earlier_run(ctx, &cron, this_minute() - 1, Runs::StayActive).await?;
    let earlier = earlier.name_any();
    wait_status_active(ctx, name, &[&earlier]).await?;
    Ok(earlier)
}

/// Waits for a run of the cron other than `earlier`; returns its name.
async fn new_run(ctx: &TestContext, cron: &str, earlier: &str) -> Result<String> {
    poll_until(
        &format!("a new run of {cron}"),
        Duration::from_secs(30),
        || async { Ok(runs(ctx, cron).await?.into_keys().find(|n| n != earlier)) },
    )
    .await
}

#[tokio::test]
async fn allow_creates_one_run_per_minute_named_by_its_minute() -> Result<()> {
    run_in_namespace("acj-allow", |ctx| async move {
        let earlier = cron_with_an_active_earlier_run(&ctx, "tick", "Allow").await?;
        set_paused(&ctx, "tick", false).await?;
        let first = new_run(&ctx, "tick", &earlier).await?;
        // Two more ticks handled after the first run: within its minute they make none.
        let two_ticks_on = Timestamp::now() + SignedDuration::from_secs(4);
        wait_scheduled_since(&ctx, "tick", two_ticks_on).await?;

        let last = last_schedule(&ctx, "tick")
            .await?
            .context("no lastScheduleTime")?;
        let all = runs(&ctx, "tick").await?;
        check_named_by_minute(&all)?;
        let made: BTreeSet<i64> = (all.keys().filter(|n| **n != earlier))
            .map(|n| minute_of(n))
            .collect::<Result<_>>()?;
        let first_minute = minute_of(&first)?;
        // One run for each minute from the first on; a later minute's run may have come
        // between reading lastScheduleTime and listing the runs.
        let last_minute = last.as_second().div_euclid(60);
        let expected: BTreeSet<i64> = (first_minute..=last_minute.max(first_minute)).collect();
        ensure!(
            made.iter()
                .copied()
                .eq(first_minute..=*made.last().unwrap_or(&0))
                && made.is_superset(&expected),
            "one run a minute from minute {first_minute} to {last_minute}: {made:?}"
        );
        ensure!(
            all.contains_key(&earlier),
            "Allow kept the earlier run: {all:?}"
        );

        let status = (ctx.api::<AdvancedCronJob>().get("tick").await?.status).unwrap_or_default();
        ensure!(status.type_ == Some(TemplateKind::Job), "status {status:?}");
        let active: BTreeSet<String> = status.active.into_iter().filter_map(|r| r.name).collect();
        ensure!(
            active.contains(&earlier) && active.contains(&first),
            "both runs active in status: {active:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn forbid_skips_a_run_while_one_is_active() -> Result<()> {
    run_in_namespace("acj-forbid", |ctx| async move {
        let earlier = cron_with_an_active_earlier_run(&ctx, "once", "Forbid").await?;
        set_paused(&ctx, "once", false).await?;
        let message = wait_event(&ctx, "once", "JobAlreadyActive").await?;
        ensure!(message.contains("Forbid"), "event message {message:?}");
        let now = runs(&ctx, "once").await?;
        ensure!(
            now.keys().eq([&earlier]),
            "only the earlier run, got {:?}",
            now.keys()
        );
        ensure!(
            last_schedule(&ctx, "once").await?.is_none(),
            "a skipped time does not count as run"
        );

        // Held, not dropped: with the active run gone, the next tick runs.
        ctx.api::<Job>()
            .delete(&earlier, &DeleteParams::background())
            .await?;
        let run = new_run(&ctx, "once", &earlier).await?;
        ensure!(minute_of(&run)? > minute_of(&earlier)?, "run {run}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn replace_deletes_the_active_run_for_the_new_one() -> Result<()> {
    run_in_namespace("acj-replace", |ctx| async move {
        let earlier = cron_with_an_active_earlier_run(&ctx, "swap", "Replace").await?;
        set_paused(&ctx, "swap", false).await?;
        let replaced = poll_until(
            "the earlier run replaced by a new one",
            Duration::from_secs(30),
            || async {
                let now = runs(&ctx, "swap").await?;
                Ok((now.len() == 1 && !now.contains_key(&earlier)).then_some(now))
            },
        )
        .await?;
        check_named_by_minute(&replaced)?;
        let gone = ctx.api::<Job>().get_opt(&earlier).await?;
        ensure!(
            gone.is_none_or(|j| j.metadata.deletion_timestamp.is_some()),
            "the earlier run {earlier} is still there"
        );
        poll_until(
            "a SuccessfulCreate event naming the new run",
            Duration::from_secs(30),
            || async {
                let events = cron_events(&ctx, "swap").await?;
                let named = events.iter().any(|(reason, message)| {
                    reason == "SuccessfulCreate" && replaced.keys().any(|n| message.contains(n))
                });
                Ok(named.then_some(()))
            },
        )
        .await?;
        Ok(())
    })
    .await
}

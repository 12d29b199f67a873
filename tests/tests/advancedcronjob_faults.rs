//! AdvancedCronJob under faults, with the deployed (in-cluster) control plane: finished
//! runs beyond the history limits are pruned (the newest kept); the leader killed at the
//! scheduled minute still yields exactly one run for that minute and one for the next;
//! a minute missed while the control plane was down runs once on its return when
//! `startingDeadlineSeconds` covers the outage, and is skipped with an event when not.
//! Runs are named `<name>-<unix minutes>`, so one run per minute is the fastest schedule.
//!
//! Runs alone: it kills the control plane's leader and stops both replicas for a while,
//! which every other suite needs.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};
use stevedore_controlplane::api::AdvancedCronJob;
use stevedore_tests::controlplane::{
    kill_leader, leader, new_leader, stop_control_plane, wait_control_plane_ready,
};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};
use tokio::sync::RwLock;

/// Tests that only delay the control plane (a leader kill) share it; stopping it
/// altogether needs it alone, or the other tests' minutes would be missed.
static CONTROL_PLANE: RwLock<()> = RwLock::const_new(());

/// How a run's Job ends.
#[derive(Clone, Copy)]
enum Runs {
    /// Its pod goes to a simulated node, where kwok completes a batch Job's pods.
    Succeed,
    /// Its pod cannot be scheduled and the Job's one-second deadline fails it.
    Fail,
    /// Its pod cannot be scheduled: the run stays active.
    StayActive,
}

fn job_spec(ctx: &TestContext, runs: Runs) -> Value {
    let image = ctx.cluster.image("web:v1");
    let unschedulable = json!({ "stevedore.dev/no-such-node": "true" });
    let mut pod = json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "nodeSelector": unschedulable,
        "containers": [{ "name": "run", "image": image }],
    });
    let mut spec = json!({ "backoffLimit": 0 });
    match runs {
        Runs::Succeed => {
            pod["nodeSelector"] = json!({ "type": "kwok" });
            pod["tolerations"] = json!([{
                "key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"
            }]);
        }
        Runs::Fail => spec["activeDeadlineSeconds"] = json!(1),
        Runs::StayActive => {}
    }
    spec["template"] = json!({ "spec": pod });
    spec
}

/// A cron every minute whose runs end as `runs`, with `extra` merged into its spec.
async fn create_cron(ctx: &TestContext, name: &str, runs: Runs, extra: Value) -> Result<()> {
    let mut spec = json!({
        "schedule": "*/1 * * * *",
        "concurrencyPolicy": "Allow",
        "template": { "jobTemplate": { "spec": job_spec(ctx, runs) } },
    });
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    let cron: AdvancedCronJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "AdvancedCronJob",
        "metadata": { "name": name },
        "spec": spec,
    }))?;
    ctx.api::<AdvancedCronJob>()
        .create(&PostParams::default(), &cron)
        .await?;
    Ok(())
}

/// The cron's Jobs that are not being deleted: name → UID.
async fn runs(ctx: &TestContext, cron: &str) -> Result<Vec<(String, String)>> {
    let prefix = format!("{cron}-");
    let mut found: Vec<(String, String)> = (ctx.api::<Job>().list(&ListParams::default()))
        .await?
        .items
        .into_iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .map(|j| (j.name_any(), j.uid().unwrap_or_default()))
        .filter(|(name, _)| name.starts_with(&prefix))
        .collect();
    found.sort();
    Ok(found)
}

async fn run_names(ctx: &TestContext, cron: &str) -> Result<BTreeSet<String>> {
    Ok(runs(ctx, cron).await?.into_iter().map(|(n, _)| n).collect())
}

fn run_name(cron: &str, minute: i64) -> String {
    format!("{cron}-{minute}")
}

fn names(cron: &str, minutes: &[i64]) -> BTreeSet<String> {
    minutes.iter().map(|m| run_name(cron, *m)).collect()
}

/// Waits for the cron's first run and returns its scheduled unix minute.
async fn first_run_minute(ctx: &TestContext, cron: &str) -> Result<i64> {
    let first = poll_until(
        &format!("the first run of {cron}"),
        Duration::from_secs(90),
        || async { Ok(run_names(ctx, cron).await?.into_iter().next()) },
    )
    .await?;
    let minute: i64 = first
        .rsplit('-')
        .next()
        .unwrap_or_default()
        .parse()
        .with_context(|| format!("run {first} is not named by its scheduled minute"))?;
    Ok(minute)
}

/// Sleeps until `seconds` past the start of unix minute `minute`.
async fn sleep_until(minute: i64, seconds: i64) {
    let at = minute * 60 + seconds;
    let wait_ms = at * 1000 - Timestamp::now().as_millisecond();
    if let Ok(wait_ms) = u64::try_from(wait_ms) {
        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    }
}

/// Waits until the cron's runs are exactly `expected`.
async fn wait_runs(ctx: &TestContext, cron: &str, expected: &BTreeSet<String>) -> Result<()> {
    poll_until(
        &format!("the runs of {cron} to be {expected:?}"),
        Duration::from_secs(40),
        || async {
            let now = run_names(ctx, cron).await?;
            if now == *expected {
                Ok(Some(()))
            } else {
                bail!("runs {now:?}")
            }
        },
    )
    .await
}

/// `(reason, message)` of the Events about the AdvancedCronJob `name`.
async fn cron_events(ctx: &TestContext, name: &str) -> Result<Vec<(String, String)>> {
    let lp = ListParams::default().fields(&format!(
        "involvedObject.kind=AdvancedCronJob,involvedObject.name={name}"
    ));
    Ok((ctx.api::<Event>().list(&lp).await?.items.into_iter())
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect())
}

#[tokio::test]
async fn history_limits_keep_only_the_newest_finished_runs() -> Result<()> {
    let _shared = CONTROL_PLANE.read().await;
    run_in_namespace("acj-history", |ctx| async move {
        let limits = json!({ "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 1 });
        create_cron(&ctx, "ok", Runs::Succeed, limits.clone()).await?;
        create_cron(&ctx, "bad", Runs::Fail, limits).await?;
        let first = first_run_minute(&ctx, "ok").await?;
        let first_bad = first_run_minute(&ctx, "bad").await?;
        ensure!(
            first_bad == first,
            "both crons should start in the same minute: {first} and {first_bad}"
        );
        // Three runs of each; after each, only the newest finished one stays.
        for minute in [first + 1, first + 2] {
            sleep_until(minute, 0).await;
            for cron in ["ok", "bad"] {
                wait_runs(&ctx, cron, &names(cron, &[minute])).await?;
            }
        }
        for (cron, condition) in [("ok", "Complete"), ("bad", "Failed")] {
            let job = ctx.api::<Job>().get(&run_name(cron, first + 2)).await?;
            let finished = (job.status.and_then(|s| s.conditions).unwrap_or_default())
                .iter()
                .any(|c| c.type_ == condition && c.status == "True");
            ensure!(finished, "the newest run of {cron} is not {condition}");
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_leader_killed_at_the_scheduled_minute_creates_one_run() -> Result<()> {
    let _shared = CONTROL_PLANE.read().await;
    run_in_namespace("acj-leader-kill", |ctx| async move {
        wait_control_plane_ready(&ctx.client).await?;
        create_cron(&ctx, "tick", Runs::StayActive, json!({})).await?;
        let first = first_run_minute(&ctx, "tick").await?;
        let old_leader = leader(&ctx.client).await?;
        // At the very second the leader is due to create the next run.
        sleep_until(first + 1, 0).await;
        let how = kill_leader(&ctx.client, &old_leader).await?;
        let killed_at = Timestamp::now();
        let taken_by = new_leader(&ctx.client, &old_leader).await?;
        eprintln!("killed {old_leader} ({how}) at {killed_at}; {taken_by} leads");
        wait_runs(&ctx, "tick", &names("tick", &[first, first + 1])).await?;
        let at_takeover = runs(&ctx, "tick").await?;

        sleep_until(first + 2, 20).await;
        let expected = names("tick", &[first, first + 1, first + 2]);
        wait_runs(&ctx, "tick", &expected).await?;
        let later = runs(&ctx, "tick").await?;
        ensure!(
            at_takeover.iter().all(|run| later.contains(run)),
            "a run was replaced after the takeover: {at_takeover:?} then {later:?}"
        );
        let events = cron_events(&ctx, "tick").await?;
        let failed: Vec<_> = events.iter().filter(|(r, _)| r == "FailedCreate").collect();
        ensure!(failed.is_empty(), "failed creates: {failed:?}");
        wait_control_plane_ready(&ctx.client).await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_minute_missed_while_down_runs_once_within_the_starting_deadline() -> Result<()> {
    // The lock is fair: queued first, the writer would keep the readers from running
    // side by side. They take it within moments of the start.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _alone = CONTROL_PLANE.write().await;
    run_in_namespace("acj-missed", |ctx| async move {
        wait_control_plane_ready(&ctx.client).await?;
        create_cron(
            &ctx,
            "covered",
            Runs::StayActive,
            json!({ "startingDeadlineSeconds": 300 }),
        )
        .await?;
        create_cron(
            &ctx,
            "late",
            Runs::StayActive,
            json!({ "startingDeadlineSeconds": 10 }),
        )
        .await?;
        let first = first_run_minute(&ctx, "covered").await?;
        ensure!(
            first_run_minute(&ctx, "late").await? == first,
            "different first minutes"
        );
        // Down from the middle of the first run's minute to 25 s past the next one: the
        // next minute is missed by more than 10 s and less than 300 s.
        sleep_until(first, 25).await;
        let stopped = stop_control_plane(&ctx.client, ctx.cluster).await?;
        ensure!(
            Timestamp::now().as_second() < (first + 1) * 60,
            "the control plane took until {} to stop: the minute was not missed",
            Timestamp::now()
        );
        sleep_until(first + 1, 25).await;
        stopped.start(&ctx.client).await?;
        let back = Timestamp::now();
        eprintln!(
            "control plane down over minute {}, back at {back}",
            first + 1
        );
        ensure!(
            back.as_second() < (first + 2) * 60,
            "the control plane took until {back} to come back, past the next minute too"
        );

        wait_runs(&ctx, "covered", &names("covered", &[first, first + 1])).await?;
        poll_until(
            "a MissSchedule event on late",
            Duration::from_secs(40),
            || async {
                let events = cron_events(&ctx, "late").await?;
                let missed = events.iter().any(|(reason, message)| {
                    reason == "MissSchedule" && message.contains("startingDeadlineSeconds")
                });
                if missed {
                    Ok(Some(()))
                } else {
                    bail!("events {events:?}")
                }
            },
        )
        .await?;
        ensure!(
            run_names(&ctx, "late").await? == names("late", &[first]),
            "late ran the missed minute"
        );

        // Both resume at the next minute, once.
        sleep_until(first + 2, 20).await;
        wait_runs(
            &ctx,
            "covered",
            &names("covered", &[first, first + 1, first + 2]),
        )
        .await?;
        wait_runs(&ctx, "late", &names("late", &[first, first + 2])).await?;
        wait_control_plane_ready(&ctx.client).await?;
        Ok(())
    })
    .await
}

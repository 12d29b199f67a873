//! The AdvancedCronJob controller of the running (in-cluster) control plane against the
//! real apiserver and the cluster's own Job controller: a `*/1 * * * *` cron creates one
//! Job per minute named `<name>-<scheduled unix minutes>`, Forbid skips a run while one is
//! active, Replace deletes the active run for the new one. The Jobs' pods select a node
//! that does not exist, so every run stays active as long as the test needs.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use stevedore_controlplane::api::AdvancedCronJob;
use stevedore_controlplane::api::advancedcronjob::TemplateKind;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

/// A cron every minute whose Jobs stay active (their pods cannot be scheduled).
async fn create_cron(ctx: &TestContext, name: &str, policy: &str) -> Result<AdvancedCronJob> {
    let cron: AdvancedCronJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "AdvancedCronJob",
        "metadata": { "name": name },
        "spec": {
            "schedule": "*/1 * * * *",
            "concurrencyPolicy": policy,
            "template": { "jobTemplate": { "spec": { "template": { "spec": {
                "restartPolicy": "Never",
                "nodeSelector": { "stevedore.dev/no-such-node": "true" },
                "containers": [{ "name": "run", "image": ctx.cluster.image("web:v1") }],
            } } } } },
        },
    }))?;
    Ok(ctx
        .api::<AdvancedCronJob>()
        .create(&PostParams::default(), &cron)
        .await?)
}

/// The names of the cron's Jobs that are not being deleted.
async fn runs(ctx: &TestContext, cron: &str) -> Result<BTreeSet<String>> {
    let jobs: Api<Job> = ctx.api();
    let prefix = format!("{cron}-");
    Ok(jobs
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .map(|j| j.name_any())
        .filter(|n| n.starts_with(&prefix))
        .collect())
}

/// Waits for the first run, then past the next minute, and returns the runs then.
async fn first_run_then_next_minute(
    ctx: &TestContext,
    cron: &str,
) -> Result<(String, BTreeSet<String>)> {
    let first = poll_until("the first run", Duration::from_secs(90), || async {
        Ok(runs(ctx, cron).await?.into_iter().next())
    })
    .await?;
    let minutes: i64 = first.rsplit('-').next().unwrap_or_default().parse()?;
    ensure!(
        minutes > 0,
        "run {first} is not named by its scheduled minute"
    );
    // The next run is due at (minutes + 1) * 60; give the controller 20 s past it.
    let next = (minutes + 1) * 60;
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let wait = u64::try_from(next + 20 - now).unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(wait)).await;
    Ok((first, runs(ctx, cron).await?))
}

#[tokio::test]
async fn allow_creates_one_run_per_minute_named_by_its_minute() -> Result<()> {
    run_in_namespace("acj-allow", |ctx| async move {
        create_cron(&ctx, "tick", "Allow").await?;
        let (first, after) = first_run_then_next_minute(&ctx, "tick").await?;
        ensure!(after.len() == 2, "two runs a minute apart, got {after:?}");
        ensure!(after.contains(&first), "{after:?}");
        let cron = ctx.api::<AdvancedCronJob>().get("tick").await?;
        let status = cron.status.unwrap_or_default();
        ensure!(status.type_ == Some(TemplateKind::Job), "status {status:?}");
        ensure!(
            status.active.len() == 2 && status.last_schedule_time.is_some(),
            "status {status:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn forbid_skips_a_run_while_one_is_active() -> Result<()> {
    run_in_namespace("acj-forbid", |ctx| async move {
        create_cron(&ctx, "once", "Forbid").await?;
        let (first, after) = first_run_then_next_minute(&ctx, "once").await?;
        ensure!(
            after == BTreeSet::from([first]),
            "only the first run, got {after:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn replace_deletes_the_active_run_for_the_new_one() -> Result<()> {
    run_in_namespace("acj-replace", |ctx| async move {
        create_cron(&ctx, "swap", "Replace").await?;
        let (first, after) = first_run_then_next_minute(&ctx, "swap").await?;
        ensure!(
            after.len() == 1 && !after.contains(&first),
            "the first run replaced, got {after:?}"
        );
        Ok(())
    })
    .await
}

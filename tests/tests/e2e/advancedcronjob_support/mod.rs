//! What the AdvancedCronJob suites share. Their crons run `@every 2s`, so a first run is
//! due within seconds; a run is named by its scheduled minute, so the later ticks of a
//! minute find its run and make none (the planner's clock tests prove the minute-by-minute
//! behaviour). What needs several runs (history limits, Forbid, Replace) starts from runs
//! of earlier minutes that the test makes itself, owned, named and annotated as the
//! controller makes its own, while the cron is paused; unpaused, the controller meets them
//! at its first tick instead of a minute later.

#![allow(dead_code)] // each suite uses its part

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::AdvancedCronJob;
use stevedore_controlplane::advancedcronjob::children::{SCHEDULED_AT_ANNOTATION, run_meta};
use stevedore_tests::{TestContext, poll_until};

/// Fast enough for a first run within seconds; still one run a minute.
pub const EVERY_TWO_SECONDS: &str = "@every 2s";

/// How a run's Job ends.
#[derive(Clone, Copy)]
pub enum Runs {
    /// Its pod goes to a simulated node, where kwok completes a batch Job's pods.
    Succeed,
    /// Its pod cannot be scheduled and the Job's one-second deadline fails it.
    Fail,
    /// Its pod cannot be scheduled: the run stays active.
    StayActive,
}

/// A Job spec whose run ends as `runs`.
pub fn job_spec(ctx: &TestContext, runs: Runs) -> Value {
    let mut pod = json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "nodeSelector": { "stevedore.dev/no-such-node": "true" },
        "containers": [{ "name": "run", "image": ctx.cluster.image("web:v1") }],
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

/// Creates the cron `name` on a 2 s schedule with Jobs that end as `runs`; `extra` is
/// merged into its spec (a policy, limits, `paused`).
pub async fn create_cron(
    ctx: &TestContext,
    name: &str,
    runs: Runs,
    extra: Value,
) -> Result<AdvancedCronJob> {
    let mut spec = json!({
        "schedule": EVERY_TWO_SECONDS,
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
    Ok(ctx
        .api::<AdvancedCronJob>()
        .create(&PostParams::default(), &cron)
        .await?)
}

pub async fn set_paused(ctx: &TestContext, name: &str, paused: bool) -> Result<()> {
    let patch = json!({ "spec": { "paused": paused } });
    ctx.api::<AdvancedCronJob>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// The unix minute of now.
pub fn this_minute() -> i64 {
    Timestamp::now().as_second().div_euclid(60)
}

pub fn run_name(cron: &str, minute: i64) -> String {
    format!("{cron}-{minute}")
}

/// The scheduled unix minute a run's name carries.
pub fn minute_of(run: &str) -> Result<i64> {
    (run.rsplit('-').next().unwrap_or_default().parse())
        .with_context(|| format!("run {run} is not named by its scheduled minute"))
}

/// Creates the run the controller would have made for `minute`, ending as `runs`: the
/// cron as its controller, the scheduled time annotated.
pub async fn earlier_run(
    ctx: &TestContext,
    cron: &AdvancedCronJob,
    minute: i64,
    runs: Runs,
) -> Result<Job> {
    let name = run_name(&cron.name_any(), minute);
    let scheduled = Timestamp::from_second(minute * 60)?;
    let metadata = run_meta(cron, None, &name, scheduled).context("the cron has no UID")?;
    let job = Job {
        metadata,
        spec: Some(serde_json::from_value(job_spec(ctx, runs))?),
        status: None,
    };
    Ok(ctx
        .api::<Job>()
        .create(&PostParams::default(), &job)
        .await?)
}

/// The cron's Jobs that are not being deleted, by name.
pub async fn runs(ctx: &TestContext, cron: &str) -> Result<BTreeMap<String, Job>> {
    let prefix = format!("{cron}-");
    Ok((ctx.api::<Job>().list(&ListParams::default()).await?.items)
        .into_iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .filter(|j| j.name_any().starts_with(&prefix))
        .map(|j| (j.name_any(), j))
        .collect())
}

/// `Complete` or `Failed` when the Job has that condition True.
pub fn finished_as(job: &Job) -> Option<&'static str> {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.as_ref());
    ["Complete", "Failed"].into_iter().find(|wanted| {
        (conditions.into_iter().flatten()).any(|c| c.type_ == *wanted && c.status == "True")
    })
}

/// Waits until the Job `name` has finished as `condition`.
pub async fn wait_finished(ctx: &TestContext, name: &str, condition: &str) -> Result<()> {
    poll_until(
        &format!("Job {name} to be {condition}"),
        Duration::from_secs(60),
        || async {
            let job = ctx.api::<Job>().get(name).await?;
            Ok((finished_as(&job) == Some(condition)).then_some(()))
        },
    )
    .await
}

/// Waits until the cron's `status.active` names exactly `active`: the controller has
/// seen those runs.
pub async fn wait_status_active(ctx: &TestContext, cron: &str, active: &[&str]) -> Result<()> {
    poll_until(
        &format!("the status of {cron} to list the active runs {active:?}"),
        Duration::from_secs(30),
        || async {
            let status = ctx.api::<AdvancedCronJob>().get(cron).await?.status;
            let listed: Vec<String> = (status.map(|s| s.active).unwrap_or_default())
                .into_iter()
                .filter_map(|r| r.name)
                .collect();
            if listed == active {
                Ok(Some(()))
            } else {
                bail!("status.active {listed:?}")
            }
        },
    )
    .await
}

/// The cron's `status.lastScheduleTime`.
pub async fn last_schedule(ctx: &TestContext, cron: &str) -> Result<Option<Timestamp>> {
    let status = ctx.api::<AdvancedCronJob>().get(cron).await?.status;
    Ok(status.and_then(|s| s.last_schedule_time).map(|t| t.0))
}

/// Waits until the cron's `lastScheduleTime` is at or after `at`: the controller has
/// handled its ticks up to then.
pub async fn wait_scheduled_since(ctx: &TestContext, cron: &str, at: Timestamp) -> Result<()> {
    poll_until(
        &format!("lastScheduleTime of {cron} to reach {at}"),
        Duration::from_secs(60),
        || async {
            Ok(last_schedule(ctx, cron)
                .await?
                .filter(|t| *t >= at)
                .map(|_| ()))
        },
    )
    .await
}

/// `(reason, message)` of the Events about the AdvancedCronJob `name`.
pub async fn cron_events(ctx: &TestContext, name: &str) -> Result<Vec<(String, String)>> {
    let lp = ListParams::default().fields(&format!(
        "involvedObject.kind=AdvancedCronJob,involvedObject.name={name}"
    ));
    Ok((ctx.api::<Event>().list(&lp).await?.items.into_iter())
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect())
}

/// Waits for an Event with `reason` about the cron; returns its message.
pub async fn wait_event(ctx: &TestContext, cron: &str, reason: &str) -> Result<String> {
    poll_until(
        &format!("a {reason} event on {cron}"),
        Duration::from_secs(30),
        || async {
            let events = cron_events(ctx, cron).await?;
            Ok((events.into_iter())
                .find(|(r, _)| r == reason)
                .map(|(_, message)| message))
        },
    )
    .await
}

/// Checks the runs are one per minute and named by it: each run's scheduled-time
/// annotation falls in the minute its name carries.
pub fn check_named_by_minute(runs: &BTreeMap<String, Job>) -> Result<()> {
    for (name, job) in runs {
        let annotations = job.metadata.annotations.clone().unwrap_or_default();
        let scheduled: Timestamp = (annotations.get(SCHEDULED_AT_ANNOTATION))
            .with_context(|| format!("run {name} has no {SCHEDULED_AT_ANNOTATION} annotation"))?
            .parse()?;
        let minute = minute_of(name)?;
        if scheduled.as_second().div_euclid(60) != minute {
            bail!("run {name} was scheduled at {scheduled}, outside the minute it is named by");
        }
    }
    Ok(())
}

/// Checks the runs are named by their minutes and there is one for each minute from the
/// first to the last: none skipped, none twice.
pub fn check_one_run_per_minute(runs: &BTreeMap<String, Job>) -> Result<()> {
    check_named_by_minute(runs)?;
    let minutes: Vec<i64> = runs.keys().map(|n| minute_of(n)).collect::<Result<_>>()?;
    let (Some(first), Some(last)) = (minutes.iter().min(), minutes.iter().max()) else {
        bail!("no runs");
    };
    if !minutes.iter().copied().eq(*first..=*last) {
        bail!("not one run a minute: {:?}", runs.keys());
    }
    Ok(())
}

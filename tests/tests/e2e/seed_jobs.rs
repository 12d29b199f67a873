//! Seed 002's five BroadcastJob / AdvancedCronJob examples on the real kubelet node (the
//! simulated nodes carry kwok's NoSchedule taint, so the jobs' pods run only there), each
//! behaving as the seed says. The manifests in `fixtures/seed-002/` are the seed's; the
//! test swaps only their images for the local test image (traffic stays on loopback), and
//! the perl command for a shell one, since that image has busybox and no perl. The
//! AdvancedCronJob example applies without the pod fields OpenKruise's webhook demanded.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt as _};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use stevedore_api::broadcastjob::BroadcastJobPhase;
use stevedore_api::{AdvancedCronJob, BroadcastJob};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

const TTL: &str = include_str!("../../fixtures/seed-002/broadcastjob-ttl.yaml");
const DEADLINE: &str = include_str!("../../fixtures/seed-002/broadcastjob-active-deadline.yaml");
const NEVER: &str = include_str!("../../fixtures/seed-002/broadcastjob-never-complete.yaml");
const FAIL_FAST: &str = include_str!("../../fixtures/seed-002/broadcastjob-restart-limit.yaml");
const CRON: &str = include_str!("../../fixtures/seed-002/advancedcronjob-broadcast.yaml");

/// Long enough for the node to pull the test image and run a short container.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// The seed manifest with every container's image swapped for the local test image (and
/// perl for an equivalent shell command).
fn localized(ctx: &TestContext, yaml: &str) -> Result<Value> {
    let mut object: Value = serde_saphyr::from_str(yaml)?;
    localize_containers(&mut object, &ctx.cluster.image("web:v1"));
    Ok(object)
}

fn localize_containers(value: &mut Value, image: &str) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(containers)) = map.get_mut("containers") {
                for container in containers {
                    container["image"] = json!(image);
                    if container["command"][0] == "perl" {
                        container["command"] = json!(["sh", "-c", "echo 3.14159"]);
                    }
                }
            }
            map.values_mut()
                .for_each(|child| localize_containers(child, image));
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|child| localize_containers(child, image)),
        _ => {}
    }
}

async fn apply<K>(ctx: &TestContext, object: &Value) -> Result<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + DeserializeOwned,
    K: serde::Serialize + std::fmt::Debug,
    K::DynamicType: Default,
{
    let name = object["metadata"]["name"].as_str().context("a name")?;
    let pp = PatchParams::apply("stevedore-tests").force();
    Ok(ctx
        .api::<K>()
        .patch(name, &pp, &Patch::Apply(object))
        .await?)
}

async fn wait_phase(
    ctx: &TestContext,
    name: &str,
    phase: BroadcastJobPhase,
) -> Result<BroadcastJob> {
    let jobs: Api<BroadcastJob> = ctx.api();
    poll_until(&format!("{name} {phase:?}"), RUN_TIMEOUT, || async {
        let job = jobs.get(name).await?;
        let reached = job.status.as_ref().is_some_and(|s| s.phase == phase);
        Ok(reached.then_some(job))
    })
    .await
}

/// Pods of the namespace not being deleted.
async fn live_pods(ctx: &TestContext) -> Result<Vec<Pod>> {
    let pods: Api<Pod> = ctx.api();
    Ok(pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

fn failed_reason(job: &BroadcastJob) -> Option<&str> {
    let status = job.status.as_ref()?;
    let failed = status.conditions.iter().find(|c| c.type_ == "Failed")?;
    (failed.status == "True").then_some(failed.reason.as_str())
}

#[tokio::test]
async fn ttl_example_completes_then_is_deleted_with_its_pods() -> Result<()> {
    run_in_namespace("seed-bcj-ttl", |ctx| async move {
        apply::<BroadcastJob>(&ctx, &localized(&ctx, TTL)?).await?;
        let job = wait_phase(&ctx, "broadcastjob-ttl", BroadcastJobPhase::Completed).await?;
        let status = job.status.context("a status")?;
        ensure!(
            status.desired >= 1 && status.succeeded == status.desired && status.failed == 0,
            "every node's pod succeeded: {status:?}"
        );
        ensure!(status.completion_time.is_some(), "{status:?}");
        let jobs: Api<BroadcastJob> = ctx.api();
        poll_until(
            "the job deleted 30 s after it finished",
            RUN_TIMEOUT,
            || async {
                let gone = jobs.get_opt("broadcastjob-ttl").await?.is_none();
                Ok((gone && live_pods(&ctx).await?.is_empty()).then_some(()))
            },
        )
        .await
    })
    .await
}

#[tokio::test]
async fn active_deadline_example_fails_after_ten_seconds_and_stops_its_pods() -> Result<()> {
    run_in_namespace("seed-bcj-deadline", |ctx| async move {
        apply::<BroadcastJob>(&ctx, &localized(&ctx, DEADLINE)?).await?;
        let name = "broadcastjob-active-deadline";
        let job = wait_phase(&ctx, name, BroadcastJobPhase::Failed).await?;
        ensure!(
            failed_reason(&job) == Some("DeadlineExceeded"),
            "Failed with DeadlineExceeded: {:?}",
            job.status
        );
        poll_until("the running pods deleted", RUN_TIMEOUT, || async {
            Ok(live_pods(&ctx).await?.is_empty().then_some(()))
        })
        .await
    })
    .await
}

#[tokio::test]
async fn never_example_keeps_running_after_every_pod_succeeded() -> Result<()> {
    run_in_namespace("seed-bcj-never", |ctx| async move {
        apply::<BroadcastJob>(&ctx, &localized(&ctx, NEVER)?).await?;
        let jobs: Api<BroadcastJob> = ctx.api();
        let name = "broadcastjob-never-complete";
        poll_until("every pod succeeded", RUN_TIMEOUT, || async {
            let status = jobs.get(name).await?.status.unwrap_or_default();
            Ok((status.desired >= 1 && status.succeeded == status.desired).then_some(()))
        })
        .await?;
        // Past a few more reconciles: a Never job does not finish.
        tokio::time::sleep(Duration::from_secs(10)).await;
        let status = jobs.get(name).await?.status.context("a status")?;
        ensure!(
            status.phase == BroadcastJobPhase::Running && status.completion_time.is_none(),
            "a Never job keeps running: {status:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn restart_limit_example_fails_fast_on_the_failed_pod() -> Result<()> {
    run_in_namespace("seed-bcj-failfast", |ctx| async move {
        apply::<BroadcastJob>(&ctx, &localized(&ctx, FAIL_FAST)?).await?;
        let job = wait_phase(
            &ctx,
            "broadcastjob-restart-limit",
            BroadcastJobPhase::Failed,
        )
        .await?;
        let status = job.status.as_ref().context("a status")?;
        ensure!(status.failed >= 1, "the failed pod is counted: {status:?}");
        ensure!(
            failed_reason(&job).is_some(),
            "a Failed condition: {status:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn cron_example_applies_unchanged_and_runs_a_broadcastjob_on_the_minute() -> Result<()> {
    run_in_namespace("seed-acj-broadcast", |ctx| async move {
        apply::<AdvancedCronJob>(&ctx, &localized(&ctx, CRON)?).await?;
        let jobs: Api<BroadcastJob> = ctx.api();
        let child = poll_until("the first run", Duration::from_secs(90), || async {
            let runs = jobs.list(&ListParams::default()).await?.items;
            Ok(runs
                .into_iter()
                .find(|j| j.name_any().starts_with("acj-test-")))
        })
        .await?;
        let minutes: i64 = child.name_any()["acj-test-".len()..].parse()?;
        ensure!(
            minutes > 0,
            "named after its scheduled minute: {}",
            child.name_any()
        );
        let crons: Api<AdvancedCronJob> = ctx.api();
        poll_until(
            "status names the run's kind and time",
            RUN_TIMEOUT,
            || async {
                let status = crons.get("acj-test").await?.status.unwrap_or_default();
                let typed = serde_json::to_value(status.type_)? == json!("BroadcastJob");
                Ok((typed && status.last_schedule_time.is_some()).then_some(()))
            },
        )
        .await?;
        wait_phase(&ctx, &child.name_any(), BroadcastJobPhase::Completed).await?;
        Ok(())
    })
    .await
}

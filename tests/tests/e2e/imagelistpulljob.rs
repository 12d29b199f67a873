//! ImageListPullJob over simulated nodes with real agents (`deploy/local/sim-agents.sh`):
//! two images on three nodes, through a throttled proxy so the pulls last a while. The
//! job creates one ImagePullJob per image; its progress moves while bytes flow (not stuck
//! at 0%, kruise #1656), never goes back, and reaches 100% with the job completed; an
//! edited `pullPolicy.timeoutSeconds` reaches the ImagePullJobs and the nodes' ImageList
//! entries while the pulls run (kruise #2221).
//!
//! Runs against the controllers `imagelistpulljob,imagepulljob` of the worktree (see the
//! development notes); the deployed control plane's distributor pushes the ImageLists.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stevedore_api::{ImageList, ImageListPullJob, ImagePullJob};
use stevedore_tests::proxy::Proxy;
use stevedore_tests::sim::SimAgents;
use stevedore_tests::slow_image::SlowImage;
use stevedore_tests::{TestContext, poll_until, run_in_namespace, slow_image};

use crate::imagelist_support;

use imagelist_support::{containerd_images, list_exists, remove_from_containerd};

/// Bytes per second the proxy lets through while the progress is watched.
const SLOW_RATE: u64 = 2 << 20;
const NODES: usize = 3;
const JOB: &str = "warm";

/// Removes from containerd every record of the test's images, so the pulls move bytes.
fn forget_images(ctx: &TestContext, proxy: &Proxy, slow: &SlowImage) -> Result<()> {
    let names: Vec<String> = containerd_images(ctx.cluster)?
        .into_iter()
        .filter(|n| n.starts_with(&proxy.host()) || slow.is_record(n))
        .collect();
    remove_from_containerd(ctx.cluster, &names)
}

fn percent(job: &ImageListPullJob) -> i32 {
    job.status
        .as_ref()
        .and_then(|s| s.progress.as_ref())
        .map_or(0, |p| p.percent)
}

/// The entry timeouts of `image` on the simulated nodes that have its entry.
async fn entry_timeouts(ctx: &TestContext, sim: &SimAgents, image: &str) -> Result<Vec<i32>> {
    let lists: Api<ImageList> = Api::all(ctx.client.clone());
    let mut timeouts = Vec::new();
    for i in 0..NODES {
        let list = lists.get(&sim.node(i)).await?;
        if let Some(entry) = list.spec.images.get(image) {
            timeouts.push(entry.timeout_seconds.unwrap_or_default());
        }
    }
    Ok(timeouts)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_images_on_three_nodes_progress_monotonically_to_completion() -> Result<()> {
    run_in_namespace("imagelistpulljob", |ctx| async move {
        let run = ctx
            .namespace
            .rsplit('-')
            .next()
            .unwrap_or_default()
            .to_owned();
        let sim = SimAgents::up(ctx.cluster, &format!("ilpj-{run}"), NODES)?;
        let slow = slow_image::ensure(&ctx.cluster.registry, "imagelistpulljob").await?;
        let proxy = Proxy::start(&ctx.cluster.registry).await?;
        let images = [
            format!("{}/{}", proxy.host(), slow.name),
            format!("{}/stevedore/web:v1", proxy.host()),
        ];
        forget_images(&ctx, &proxy, &slow)?;
        for i in 0..NODES {
            list_exists(&ctx.client, &sim.node(i)).await?;
        }
        proxy.throttle(Some(SLOW_RATE));
        let result = watch_the_job(&ctx, &sim, &proxy, &images).await;
        let jobs: Api<ImageListPullJob> = ctx.api();
        let _ = jobs.delete(JOB, &DeleteParams::foreground()).await;
        let _ = poll_until(
            "the ImagePullJobs gone",
            Duration::from_secs(60),
            || async {
                let children = ctx.api::<ImagePullJob>().list(&Default::default()).await?;
                Ok(children.items.is_empty().then_some(()))
            },
        )
        .await;
        forget_images(&ctx, &proxy, &slow)?;
        result
    })
    .await
}

async fn watch_the_job(
    ctx: &TestContext,
    sim: &SimAgents,
    proxy: &Proxy,
    images: &[String; 2],
) -> Result<()> {
    let jobs: Api<ImageListPullJob> = ctx.api();
    let names: Vec<String> = (0..NODES).map(|i| sim.node(i)).collect();
    let job: ImageListPullJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "ImageListPullJob",
        "metadata": { "name": JOB },
        "spec": {
            "images": images,
            "selector": { "names": names },
            "parallelism": NODES,
            "pullPolicy": { "timeoutSeconds": 300, "backoffLimit": 3 },
            "completionPolicy": { "type": "Always", "activeDeadlineSeconds": 900 },
        },
    }))?;
    jobs.create(&PostParams::default(), &job).await?;

    let started = tokio::time::Instant::now();
    let (mut last, mut seen_between, mut edited) = (0, Vec::new(), false);
    loop {
        ensure!(
            started.elapsed() < Duration::from_secs(420),
            "the job did not complete in 7 minutes; last progress {last}%"
        );
        let job = jobs.get(JOB).await?;
        let now = percent(&job);
        ensure!(now >= last, "progress went back from {last}% to {now}%");
        last = now;
        if (1..100).contains(&now) {
            seen_between.push(now);
        }
        let status = job.status.clone().unwrap_or_default();
        if !edited && status.active > 0 {
            edit_the_timeout(ctx, sim, images).await?;
            edited = true;
        }
        if !seen_between.is_empty() && edited {
            // Seen moving: the rest may go at full speed.
            proxy.throttle(None);
        }
        if status.completion_time.is_some() {
            ensure!(
                (status.desired, status.completed, status.succeeded) == (2, 2, 2),
                "the job completed with {status:?}"
            );
            ensure!(now == 100, "completed at {now}%");
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    ensure!(edited, "the job completed before it was seen pulling");
    ensure!(
        !seen_between.is_empty(),
        "progress never showed a value between 0% and 100% while the pulls ran"
    );
    let children = ctx.api::<ImagePullJob>().list(&Default::default()).await?;
    ensure!(
        children.items.len() == 2,
        "{} ImagePullJobs",
        children.items.len()
    );
    Ok(())
}

/// Edits the job's timeout while its pulls run; the ImagePullJobs and the entries on the
/// nodes follow.
async fn edit_the_timeout(ctx: &TestContext, sim: &SimAgents, images: &[String; 2]) -> Result<()> {
    let jobs: Api<ImageListPullJob> = ctx.api();
    let patch = json!({ "spec": { "pullPolicy": { "timeoutSeconds": 240 } } });
    jobs.patch(JOB, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .context("editing pullPolicy.timeoutSeconds")?;
    poll_until(
        "the ImagePullJobs and the nodes' entries at timeoutSeconds 240",
        Duration::from_secs(60),
        || async {
            let children = ctx.api::<ImagePullJob>().list(&Default::default()).await?;
            let timeouts: Vec<i32> = (children.items.iter())
                .map(|c| {
                    c.spec
                        .pull_policy
                        .as_ref()
                        .and_then(|p| p.timeout_seconds)
                        .unwrap_or(0)
                })
                .collect();
            if timeouts != [240, 240] {
                bail!("ImagePullJob timeouts {timeouts:?}");
            }
            for image in images {
                let on_nodes = entry_timeouts(ctx, sim, image).await?;
                if on_nodes.iter().any(|t| *t != 240) {
                    bail!("{image}: entry timeouts {on_nodes:?}");
                }
            }
            Ok(Some(()))
        },
    )
    .await
}

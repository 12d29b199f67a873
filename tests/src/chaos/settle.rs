//! After the last fault: everything the run started must finish by one deadline — every
//! rollout, the last BroadcastJob and ImagePullJob, a cron run made after the last fault,
//! every ContainerRecreateRequest, and every agent pull. What has not is reported stuck.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::jiff::Timestamp;

use super::workloads::{self, Workload};
use super::{cron, jobs, pulls, recreate};
use crate::TestContext;

/// What the runners left unfinished when the faults ended.
pub struct Leftovers {
    pub broadcast_job: Option<String>,
    pub pull_job: Option<String>,
    /// When the last fault ended (wall clock, as the apiserver stamps objects).
    pub faults_ended: Timestamp,
}

/// Polls `problems` every second until it finds none or `deadline` passes; the last
/// problems found (an error counts as one).
pub async fn wait_for<F, Fut>(deadline: Instant, mut problems: F) -> Vec<String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Vec<String>>>,
{
    loop {
        let found = match problems().await {
            Ok(found) => found,
            Err(err) => vec![format!(
                "could not check: {}",
                super::faults::in_words(&err)
            )],
        };
        if found.is_empty() || Instant::now() >= deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Everything still unfinished at `deadline`, in words.
pub async fn settle(
    ctx: &TestContext,
    sets: &[Workload],
    nodes: &[String],
    leftovers: &Leftovers,
    deadline: Instant,
) -> Vec<String> {
    let mut stuck = wait_for(deadline, || not_rolled_out(ctx, sets)).await;
    if let Some(job) = &leftovers.broadcast_job {
        stuck.extend(
            wait_for(deadline, || async {
                let done = jobs::completed(ctx, job).await?;
                Ok(unless(done, format!("BroadcastJob {job} never completed")))
            })
            .await,
        );
    }
    if let Some(job) = &leftovers.pull_job {
        stuck.extend(
            wait_for(deadline, || async {
                let done = pulls::finished(ctx, job).await?;
                Ok(unless(done, format!("ImagePullJob {job} never finished")))
            })
            .await,
        );
    }
    stuck.extend(
        wait_for(deadline, || async {
            let kept = cron::runs_after(&cron::runs(ctx).await?, leftovers.faults_ended);
            let words = "AdvancedCronJob cron completed no run made after the last fault";
            Ok(unless(kept, words.to_owned()))
        })
        .await,
    );
    stuck.extend(wait_for(deadline, || async { Ok(recreate::check_all(ctx).await?.0) }).await);
    let pulling = wait_for(deadline, || pulls::in_progress(ctx, nodes)).await;
    stuck.extend(
        pulling
            .into_iter()
            .map(|p| format!("agent pull still in progress on {p}")),
    );
    stuck
}

fn unless(done: bool, problem: String) -> Vec<String> {
    if done { Vec::new() } else { vec![problem] }
}

/// The workloads not rolled out, with their status.
pub async fn not_rolled_out(ctx: &TestContext, sets: &[Workload]) -> Result<Vec<String>> {
    let mut pending = Vec::new();
    for workload in sets {
        if matches!(
            workloads::rolled_out_generation(ctx, workload).await,
            Ok(Some(_))
        ) {
            continue;
        }
        let status = workload
            .api(ctx)
            .get(workload.name())
            .await
            .map(|o| o.data["status"].to_string())
            .unwrap_or_else(|err| format!("unreadable: {err}"));
        pending.push(format!(
            "{} not rolled out: status {status}",
            workload.name()
        ));
    }
    Ok(pending)
}

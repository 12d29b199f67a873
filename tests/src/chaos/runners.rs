//! What runs beside the faults until they end: the roller (a new rollout of each workload
//! as soon as its last one finished), BroadcastJobs and ImagePullJobs one after another,
//! ContainerRecreateRequests every few seconds, and the control plane's memory sampler.
//! Each counts what it finished; each returning a name returns what had not finished when
//! told to stop.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::faults::{self, lock};
use super::invariants::{Checker, SetKind, SetRule};
use super::memory::{self, Peak};
use super::pool::Placement;
use super::workloads::{self, Workload};
use super::{jobs, pulls, recreate};
use crate::TestContext;

/// What the runners finished.
#[derive(Debug, Default)]
pub struct Counters {
    pub rollouts: AtomicUsize,
    pub broadcast_jobs: AtomicUsize,
    pub pull_jobs: AtomicUsize,
    pub recreate_requests: AtomicUsize,
    /// Why the last ContainerRecreateRequest the apiserver refused was refused: a run
    /// that made none says why.
    pub recreate_refused: Mutex<Option<String>>,
}

impl Counters {
    pub fn get(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::Relaxed)
    }
}

fn bump(counter: &AtomicUsize) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Sleeps `pause` unless `stop` comes first; whether it came.
async fn stopped_within(stop: &CancellationToken, pause: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => true,
        () = tokio::time::sleep(pause) => false,
    }
}

/// Starts a new rollout of each workload whenever its last one finished, counting the
/// finished ones (the first state seen, the initial creation, is not a rollout).
pub async fn roll(
    ctx: TestContext,
    sets: Vec<Workload>,
    images: [String; 2],
    stop: CancellationToken,
    counters: Arc<Counters>,
) {
    let mut last: Vec<Option<i64>> = vec![None; sets.len()];
    while !stop.is_cancelled() {
        for (i, workload) in sets.iter().enumerate() {
            let Ok(Some(generation)) = workloads::rolled_out_generation(&ctx, workload).await
            else {
                continue;
            };
            if last[i] == Some(generation) {
                continue;
            }
            if last[i].is_some() {
                bump(&counters.rollouts);
            }
            last[i] = Some(generation);
            if let Ok(now) = workloads::current_image(&ctx, workload).await {
                let next = faults::other_image([&images[0], &images[1]], &now);
                let _ = workloads::set_image(&ctx, workload, next).await;
            }
        }
        stopped_within(&stop, Duration::from_millis(500)).await;
    }
}

/// Runs BroadcastJobs one after another until `stop`; returns the last one's name if it
/// had not completed by then.
pub async fn run_jobs(
    ctx: TestContext,
    placement: Placement,
    checker: Arc<Mutex<Checker>>,
    image: String,
    nodes: usize,
    stop: CancellationToken,
    counters: Arc<Counters>,
) -> Option<String> {
    for n in 0.. {
        let name = jobs::name(n);
        if let Ok(mut checker) = lock(&checker) {
            checker.add_rule(SetRule {
                kind: SetKind::BroadcastJob,
                name: name.clone(),
                replicas: i32::try_from(nodes).unwrap_or(i32::MAX),
                max_unavailable: 1,
            });
        }
        while jobs::launch(&ctx, &placement, &name, &image).await.is_err() {
            if stopped_within(&stop, Duration::from_secs(1)).await {
                return None;
            }
        }
        while !matches!(jobs::completed(&ctx, &name).await, Ok(true)) {
            if stopped_within(&stop, Duration::from_millis(500)).await {
                return Some(name);
            }
        }
        bump(&counters.broadcast_jobs);
        if stop.is_cancelled() {
            return None;
        }
    }
    None
}

/// Runs ImagePullJobs over the run's nodes one after another, the images taking turns,
/// until `stop`; returns the last one's name if it had not finished by then.
pub async fn run_pulls(
    ctx: TestContext,
    placement: Placement,
    images: [String; 2],
    stop: CancellationToken,
    counters: Arc<Counters>,
) -> Option<String> {
    for n in 0.. {
        let name = pulls::name(n);
        let image = &images[n % 2];
        while pulls::launch(&ctx, &placement, &name, image).await.is_err() {
            if stopped_within(&stop, Duration::from_secs(1)).await {
                return None;
            }
        }
        while !matches!(pulls::finished(&ctx, &name).await, Ok(true)) {
            if stopped_within(&stop, Duration::from_millis(500)).await {
                return Some(name);
            }
        }
        bump(&counters.pull_jobs);
        if stop.is_cancelled() {
            return None;
        }
    }
    None
}

/// Asks for a container of a live pod of `app` to be recreated every `every`, until
/// `stop`; counts the requests made.
pub async fn run_recreates(
    ctx: TestContext,
    app: String,
    every: Duration,
    stop: CancellationToken,
    counters: Arc<Counters>,
) {
    let mut n = 0;
    while !stopped_within(&stop, every).await {
        match recreate::launch(&ctx, &app, n).await {
            Ok(true) => {
                bump(&counters.recreate_requests);
                n += 1;
            }
            Ok(false) => {}
            Err(err) => {
                if let Ok(mut last) = lock(&counters.recreate_refused) {
                    *last = Some(faults::in_words(&err));
                }
            }
        }
    }
}

/// Samples the leader's memory every few seconds until `stop`; the highest sample.
pub async fn sample_memory(
    ctx: TestContext,
    started: Instant,
    stop: CancellationToken,
) -> Option<Peak> {
    let mut peak: Option<Peak> = None;
    loop {
        if let Some((pod, kib)) = memory::sample(&ctx).await
            && peak.as_ref().is_none_or(|p| kib > p.kib)
        {
            let at = started.elapsed();
            peak = Some(Peak { kib, pod, at });
        }
        if stopped_within(&stop, Duration::from_secs(2)).await {
            return peak;
        }
    }
}

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

/// A rollout the roller started and had not seen finish when it stopped: the workload's
/// index and the generation it had rolled out before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InFlight {
    pub set: usize,
    pub rolled_out: i64,
}

/// Starts a new rollout of each workload whenever its last one finished, counting the
/// finished ones (the first state seen, the initial creation, is not a rollout). Returns
/// the rollouts still in flight when told to stop: they went through the faults as much as
/// the finished ones, and count once they finish in the settle (`finished_in_flight`).
pub async fn roll(
    ctx: TestContext,
    sets: Vec<Workload>,
    images: [String; 2],
    stop: CancellationToken,
    counters: Arc<Counters>,
) -> Vec<InFlight> {
    let mut last: Vec<Option<i64>> = vec![None; sets.len()];
    let mut started = vec![false; sets.len()];
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
            started[i] = false;
            if let Ok(now) = workloads::current_image(&ctx, workload).await {
                let next = faults::other_image([&images[0], &images[1]], &now);
                started[i] = workloads::set_image(&ctx, workload, next).await.is_ok();
            }
        }
        stopped_within(&stop, Duration::from_millis(500)).await;
    }
    in_flight(&last, &started)
}

/// The rollouts started after the generation last seen rolled out. Pure.
fn in_flight(last: &[Option<i64>], started: &[bool]) -> Vec<InFlight> {
    (last.iter().zip(started).enumerate())
        .filter_map(|(set, (last, started))| {
            let rolled_out = (*last).filter(|_| *started)?;
            Some(InFlight { set, rolled_out })
        })
        .collect()
}

/// How many of the rollouts left in flight have finished since: their workload has rolled
/// out a later generation.
pub async fn finished_in_flight(ctx: &TestContext, sets: &[Workload], left: &[InFlight]) -> usize {
    let mut finished = 0;
    for rollout in left {
        let Some(workload) = sets.get(rollout.set) else {
            continue;
        };
        let now = workloads::rolled_out_generation(ctx, workload).await;
        if matches!(now, Ok(Some(generation)) if generation > rollout.rolled_out) {
            finished += 1;
        }
    }
    finished
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollout_is_in_flight_when_it_was_started_after_a_rolled_out_generation() {
        // (generation last seen rolled out, a new rollout started since; in flight)
        let cases = [
            (None, false, None),
            (None, true, None),
            (Some(3), false, None),
            (Some(3), true, Some(3)),
        ];
        for (last, started, want) in cases {
            let got = in_flight(&[last], &[started]);
            let want: Vec<InFlight> = (want.into_iter())
                .map(|rolled_out| InFlight { set: 0, rolled_out })
                .collect();
            assert_eq!(got, want, "{last:?} {started}");
        }
        let got = in_flight(&[Some(1), None, Some(5)], &[true, true, true]);
        assert_eq!(got.iter().map(|r| r.set).collect::<Vec<_>>(), [0, 2]);
    }
}

//! One chaos run: the run's simulated nodes with agents and its workloads, a watch feeding
//! the checkers, the runners ([`super::runners`]) rolling the workloads and making jobs,
//! pulls and recreate requests, the schedule's faults, then one deadline for everything
//! to finish ([`super::settle`]).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::faults::{self, Targets, lock};
use super::invariants::{Checker, Violation};
use super::memory::{self, Peak};
use super::plan::{FaultKind, Shape, plan};
use super::pool::Pool;
use super::runners::{self, Counters, InFlight};
use super::settle::{self, Leftovers};
use super::throttle::Throttled;
use super::throttle::proxy::Throttle;
use super::throttle::routing;
use super::watch::watch_pods;
use super::workloads::{self, Workload};
use super::{cron, kubelet, recreate};
use crate::TestContext;

/// How long a pod must have been unavailable before the checkers count it (the
/// controller's watch may be this far behind the harness's).
const GRACE: Duration = Duration::from_secs(2);
/// How long a single fault may take before the run goes on without it.
const FAULT_TIMEOUT: Duration = Duration::from_secs(60);
const NODES: usize = 3;
/// The CloneSet whose pods get ContainerRecreateRequests, and how often.
const RECREATED: &str = workloads::REAL;
const RECREATE_EVERY: Duration = Duration::from_secs(4);

#[derive(Clone, Debug)]
pub struct Options {
    pub seed: u64,
    pub faults: usize,
    pub mean_gap: Duration,
    /// How long everything may take to finish after the last fault.
    pub settle: Duration,
    pub kinds: Vec<FaultKind>,
}

#[derive(Debug)]
pub struct Report {
    pub options: Options,
    pub faults: usize,
    /// Rollouts started during the faults that finished, during them or in the settle.
    pub rollouts: usize,
    /// Of those, the ones that finished in the settle.
    pub rollouts_after_faults: usize,
    pub broadcast_jobs: usize,
    pub pull_jobs: usize,
    pub cron_runs: usize,
    /// ContainerRecreateRequests made, and how many of them ended properly.
    pub recreate_requests: usize,
    pub recreates_ended: usize,
    /// Why the apiserver refused the last request it refused, if it did.
    pub recreate_refused: Option<String>,
    /// The control plane leader's highest resident set seen.
    pub memory: Option<Peak>,
    /// Distinct pods the checkers watched.
    pub pods_seen: usize,
    pub violations: Vec<Violation>,
    /// What had not finished `settle` after the last fault.
    pub stuck: Vec<String>,
    pub history: Vec<String>,
    pub took: Duration,
}

impl Report {
    pub fn kept_every_promise(&self) -> bool {
        self.violations.is_empty() && self.stuck.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.options;
        let memory = self.memory.as_ref().map_or("not sampled".to_owned(), |p| {
            format!("peak {} MiB ({})", p.kib / 1024, p.pod)
        });
        writeln!(
            f,
            "chaos seed {}: {} faults; completed {} rollouts ({} of them after the last \
             fault), {} BroadcastJobs, {} ImagePullJobs, {} cron runs, {} of {} ContainerRecreateRequests; {} pods \
             watched; control plane memory {memory}; {} violations, {} stuck, in {:.0?}",
            o.seed,
            self.faults,
            self.rollouts,
            self.rollouts_after_faults,
            self.broadcast_jobs,
            self.pull_jobs,
            self.cron_runs,
            self.recreates_ended,
            self.recreate_requests,
            self.pods_seen,
            self.violations.len(),
            self.stuck.len(),
            self.took
        )?;
        if let Some(why) = &self.recreate_refused {
            writeln!(f, "last ContainerRecreateRequest refused: {why}")?;
        }
        for line in &self.history {
            writeln!(f, "  {line}")?;
        }
        for v in &self.violations {
            writeln!(f, "VIOLATION at {:.1?} [{}] {}", v.at, v.rule, v.detail)?;
            if !v.history.is_empty() {
                writeln!(
                    f,
                    "  the set's last pod transitions, as the run's watch saw them:"
                )?;
            }
            for line in &v.history {
                writeln!(f, "    {line}")?;
            }
        }
        for s in &self.stuck {
            writeln!(f, "STUCK {s}")?;
        }
        let kinds: Vec<String> = o.kinds.iter().map(|k| k.flag()).collect();
        write!(
            f,
            "replay: cargo run -p stevedore-tests --bin chaos -- --seed {} --faults {} \
             --gap-ms {} --settle-secs {} --kinds {}",
            o.seed,
            o.faults,
            o.mean_gap.as_millis(),
            o.settle.as_secs(),
            kinds.join(",")
        )
    }
}

pub async fn run(ctx: &TestContext, options: &Options) -> Result<Report> {
    let started = Instant::now();
    // Before anything else: a crashed earlier run may have left the control plane
    // routed through its proxy, which died with it.
    let mut preface: Vec<String> = routing::restore_stale(ctx).await?.into_iter().collect();
    let throttled = if options.kinds.contains(&FaultKind::ThrottleApiserver) {
        let throttled = Throttled::start(ctx).await?;
        preface.push(format!(
            "the control plane reaches the apiserver through the harness's proxy on {}",
            throttled.address()
        ));
        Some(throttled)
    } else {
        None
    };
    // The control plane rolls out through the proxy while the nodes come up.
    let pool = tokio::task::block_in_place(|| Pool::up(ctx, NODES))?;
    if let Some(throttled) = &throttled {
        throttled.wait_routed(ctx).await?;
    }
    let throttle = throttled.as_ref().map(Throttled::throttle);
    let report = run_on(ctx, options, &pool, throttle, started).await;
    let restored = match throttled {
        Some(throttled) => throttled.stop(ctx).await,
        None => Ok(()),
    };
    let mut report = report?;
    restored.context("routing the control plane back to the apiserver")?;
    report.history.splice(0..0, preface);
    Ok(report)
}

/// The run's objects, made before the first fault; Err when they never came up.
async fn set_up(ctx: &TestContext, pool: &Pool, images: &[String; 2]) -> Result<Vec<Workload>> {
    let sets = workloads::workloads(i32::try_from(NODES)?);
    workloads::create_budget(ctx, &workloads::budget()).await?;
    for workload in &sets {
        workloads::create(ctx, &pool.placement, workload, &images[0]).await?;
    }
    cron::create(ctx, &pool.placement, &images[0]).await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let stuck = settle::wait_for(deadline, || settle::not_rolled_out(ctx, &sets)).await;
    if !stuck.is_empty() {
        bail!("the workloads never came up: {stuck:?}");
    }
    Ok(sets)
}

/// The tasks running beside the faults.
struct Running {
    stop: CancellationToken,
    counters: Arc<Counters>,
    broadcast: JoinHandle<Option<String>>,
    pulls: JoinHandle<Option<String>>,
    roller: JoinHandle<Vec<InFlight>>,
    others: Vec<JoinHandle<()>>,
}

fn start_runners(
    ctx: &TestContext,
    pool: &Pool,
    sets: &[Workload],
    checker: &Arc<Mutex<Checker>>,
    images: &[String; 2],
) -> Running {
    let stop = CancellationToken::new();
    let counters = Arc::new(Counters::default());
    let placement = &pool.placement;
    let broadcast = tokio::spawn(runners::run_jobs(
        ctx.clone(),
        placement.clone(),
        checker.clone(),
        images[0].clone(),
        NODES,
        stop.clone(),
        counters.clone(),
    ));
    let pulls = tokio::spawn(runners::run_pulls(
        ctx.clone(),
        placement.clone(),
        images.clone(),
        stop.clone(),
        counters.clone(),
    ));
    let roller = runners::roll(
        ctx.clone(),
        sets.to_vec(),
        images.clone(),
        stop.clone(),
        counters.clone(),
    );
    let recreates = runners::run_recreates(
        ctx.clone(),
        RECREATED.to_owned(),
        RECREATE_EVERY,
        stop.clone(),
        counters.clone(),
    );
    Running {
        stop,
        counters,
        broadcast,
        pulls,
        roller: tokio::spawn(roller),
        others: vec![tokio::spawn(recreates)],
    }
}

impl Running {
    /// Stops the runners; what they left unfinished, and the rollouts in flight.
    async fn stop(self, faults_ended: Timestamp) -> (Leftovers, Vec<InFlight>, Arc<Counters>) {
        self.stop.cancel();
        for runner in self.others {
            let _ = runner.await;
        }
        let leftovers = Leftovers {
            broadcast_job: self.broadcast.await.ok().flatten(),
            pull_job: self.pulls.await.ok().flatten(),
            faults_ended,
        };
        let in_flight = self.roller.await.unwrap_or_default();
        (leftovers, in_flight, self.counters)
    }
}

/// The checkers, fed by a watch of the namespace's pods.
struct Watching {
    checker: Arc<Mutex<Checker>>,
    violations: Arc<Mutex<Vec<Violation>>>,
    watch: JoinHandle<()>,
}

fn start_watch(ctx: &TestContext, sets: &[Workload], started: Instant) -> Watching {
    let mut rules: Vec<_> = sets.iter().map(|w| w.rule.clone()).collect();
    rules.push(cron::rule());
    let mut checker = Checker::new(rules, GRACE);
    checker.add_budget(workloads::budget());
    let checker = Arc::new(Mutex::new(checker));
    let violations = Arc::new(Mutex::new(Vec::new()));
    let watch = tokio::spawn(watch_pods(
        ctx.api::<Pod>(),
        checker.clone(),
        violations.clone(),
        started,
    ));
    Watching {
        checker,
        violations,
        watch,
    }
}

async fn run_on(
    ctx: &TestContext,
    options: &Options,
    pool: &Pool,
    throttle: Option<&Throttle>,
    started: Instant,
) -> Result<Report> {
    let images = [ctx.cluster.image("web:v1"), ctx.cluster.image("web:v2")];
    let sets = set_up(ctx, pool, &images).await?;
    let watching = start_watch(ctx, &sets, started);
    // Stops the memory sampler and the kubelet stand-in once everything has settled.
    let background_stop = CancellationToken::new();
    let sampler = tokio::spawn(runners::sample_memory(
        ctx.clone(),
        started,
        background_stop.clone(),
    ));
    let running = start_runners(ctx, pool, &sets, &watching.checker, &images);
    let nodes = pool.nodes();
    let kubelet = tokio::spawn(kubelet::stand_in(
        ctx.clone(),
        nodes.clone(),
        background_stop.clone(),
    ));
    let targets = Targets {
        ctx,
        as_user: ctx.cluster.client_without_retries().await?,
        workloads: &sets,
        nodes: &nodes,
        pool,
        checker: &watching.checker,
        images: [&images[0], &images[1]],
        throttle,
    };
    let history = inject_all(&targets, options, started).await;
    let deadline = Instant::now() + options.settle;
    let (leftovers, in_flight, counters) = running.stop(Timestamp::now()).await;
    let stuck = settle::settle(ctx, &sets, &nodes, &leftovers, deadline).await;
    let rollouts_after_faults = runners::finished_in_flight(ctx, &sets, &in_flight).await;
    tokio::time::sleep(GRACE).await; // the watch's last events
    watching.watch.abort();
    background_stop.cancel();
    let _ = kubelet.await;
    let peak = sampler.await.ok().flatten();
    let mut violations = lock(&watching.violations)?.clone();
    violations.extend(
        peak.as_ref()
            .and_then(|p| memory::over_bound(p, memory::BOUND_KIB)),
    );
    let (_, recreates_ended) = recreate::check_all(ctx).await.unwrap_or_default();
    let cron_runs = cron::runs(ctx).await.map_or(0, |r| cron::completed(&r));
    let pods_seen = lock(&watching.checker)?.pods_seen();
    Ok(Report {
        options: options.clone(),
        faults: history.len(),
        rollouts: Counters::get(&counters.rollouts) + rollouts_after_faults,
        rollouts_after_faults,
        broadcast_jobs: Counters::get(&counters.broadcast_jobs),
        pull_jobs: Counters::get(&counters.pull_jobs),
        cron_runs,
        recreate_requests: Counters::get(&counters.recreate_requests),
        recreates_ended,
        recreate_refused: lock(&counters.recreate_refused)?.clone(),
        memory: peak,
        pods_seen,
        violations,
        stuck,
        history,
        took: started.elapsed(),
    })
}

async fn inject_all(targets: &Targets<'_>, options: &Options, started: Instant) -> Vec<String> {
    let shape = Shape {
        faults: options.faults,
        mean_gap: options.mean_gap,
        sets: targets.workloads.len(),
        nodes: targets.nodes.len(),
        kinds: options.kinds.clone(),
    };
    let mut history = Vec::new();
    for (i, step) in plan(options.seed, &shape).into_iter().enumerate() {
        tokio::time::sleep(step.after).await;
        let at = started.elapsed();
        let outcome =
            match tokio::time::timeout(FAULT_TIMEOUT, faults::inject(targets, &step.fault)).await {
                Ok(Ok(done)) => done,
                Ok(Err(err)) => format!("failed: {}", faults::in_words(&err)),
                Err(_) => format!("gave up after {FAULT_TIMEOUT:?}"),
            };
        history.push(format!("{at:>7.1?} #{i} {}: {outcome}", step.fault));
    }
    history
}

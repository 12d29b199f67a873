//! One chaos run: the run's nodes and workloads, a watch feeding the checkers, a roller
//! that starts a new rollout of each workload as soon as its last one finished, the
//! schedule's faults, then a bounded wait for every workload to finish its rollout.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use tokio_util::sync::CancellationToken;

use super::faults::{self, Targets, lock};
use super::invariants::{Checker, PodView, SetKind, SetRule, Violation};
use super::jobs;
use super::plan::{FaultKind, Shape, plan};
use super::workloads::{self, Workload};
use crate::TestContext;
use crate::test_nodes::{self, TestNode};

/// How long a pod must have been unavailable before the checkers count it (the
/// controller's watch may be this far behind the harness's).
const GRACE: Duration = Duration::from_secs(2);
/// How long a single fault may take before the run goes on without it.
const FAULT_TIMEOUT: Duration = Duration::from_secs(60);
const NODES: usize = 3;

#[derive(Clone, Debug)]
pub struct Options {
    pub seed: u64,
    pub faults: usize,
    pub mean_gap: Duration,
    /// How long the workloads may take to finish their rollouts after the last fault.
    pub settle: Duration,
    pub kinds: Vec<FaultKind>,
}

#[derive(Debug)]
pub struct Report {
    pub options: Options,
    pub faults: usize,
    pub rollouts: usize,
    /// BroadcastJobs that completed.
    pub jobs: usize,
    /// Distinct pods the checkers watched.
    pub pods_seen: usize,
    pub violations: Vec<Violation>,
    /// The workloads that had not finished their rollout `settle` after the last fault.
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
        writeln!(
            f,
            "chaos seed {}: {} faults, {} rollouts and {} BroadcastJobs completed, {} pods \
             watched, {} violations, {} stuck, in {:.0?}",
            o.seed,
            self.faults,
            self.rollouts,
            self.jobs,
            self.pods_seen,
            self.violations.len(),
            self.stuck.len(),
            self.took
        )?;
        for line in &self.history {
            writeln!(f, "  {line}")?;
        }
        for v in &self.violations {
            writeln!(f, "VIOLATION at {:.1?} [{}] {}", v.at, v.rule, v.detail)?;
        }
        for s in &self.stuck {
            writeln!(f, "STUCK {s}")?;
        }
        write!(
            f,
            "replay: cargo run -p stevedore-tests --bin chaos -- --seed {} --faults {} --gap-ms {}",
            o.seed,
            o.faults,
            o.mean_gap.as_millis()
        )
    }
}

pub async fn run(ctx: &TestContext, options: &Options) -> Result<Report> {
    let started = Instant::now();
    let mut nodes = Vec::new();
    for i in 0..NODES {
        let name = format!("{}-n{i}", ctx.namespace);
        test_nodes::create(ctx, &name, TestNode::default()).await?;
        nodes.push(name);
    }
    let outcome = run_on(ctx, options, &nodes, started).await;
    test_nodes::delete(ctx, &nodes).await;
    outcome
}

async fn run_on(
    ctx: &TestContext,
    options: &Options,
    nodes: &[String],
    started: Instant,
) -> Result<Report> {
    let images = [ctx.cluster.image("web:v1"), ctx.cluster.image("web:v2")];
    let sets = workloads::workloads(i32::try_from(nodes.len())?);
    for workload in &sets {
        workloads::create(ctx, workload, &images[0]).await?;
    }
    let stuck = wait_rolled_out(ctx, &sets, Duration::from_secs(120)).await?;
    if !stuck.is_empty() {
        bail!("the workloads never came up: {stuck:?}");
    }
    let rules = sets.iter().map(|w| w.rule.clone()).collect();
    let checker = Arc::new(Mutex::new(Checker::new(rules, GRACE)));
    let violations = Arc::new(Mutex::new(Vec::new()));
    let watch = tokio::spawn(watch_pods(
        ctx.api::<Pod>(),
        checker.clone(),
        violations.clone(),
        started,
    ));
    let stop = CancellationToken::new();
    let rollouts = Arc::new(AtomicUsize::new(0));
    let jobs_done = Arc::new(AtomicUsize::new(0));
    let job_runner = tokio::spawn(run_jobs(
        ctx.clone(),
        checker.clone(),
        images[0].clone(),
        nodes.len(),
        stop.clone(),
        jobs_done.clone(),
    ));
    let roller = tokio::spawn(roll(
        ctx.clone(),
        sets.clone(),
        images.clone(),
        stop.clone(),
        rollouts.clone(),
    ));

    let targets = Targets {
        ctx,
        workloads: &sets,
        nodes,
        checker: &checker,
        images: [&images[0], &images[1]],
    };
    let history = inject_all(&targets, options, started).await;
    stop.cancel();
    let _ = roller.await;
    let last_job = job_runner.await.ok().flatten();
    let mut stuck = wait_rolled_out(ctx, &sets, options.settle).await?;
    if let Some(job) = last_job {
        stuck.extend(wait_job(ctx, &job, options.settle).await);
    }
    tokio::time::sleep(GRACE).await; // the watch's last events
    watch.abort();
    let violations = lock(&violations)?.clone();
    let pods_seen = lock(&checker)?.pods_seen();
    Ok(Report {
        options: options.clone(),
        faults: history.len(),
        rollouts: rollouts.load(Ordering::Relaxed),
        jobs: jobs_done.load(Ordering::Relaxed),
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

/// Starts a new rollout of each workload whenever its last one finished, counting the
/// finished ones (the first state seen, the initial creation, is not a rollout).
async fn roll(
    ctx: TestContext,
    sets: Vec<Workload>,
    images: [String; 2],
    stop: CancellationToken,
    rollouts: Arc<AtomicUsize>,
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
                rollouts.fetch_add(1, Ordering::Relaxed);
            }
            last[i] = Some(generation);
            if let Ok(now) = workloads::current_image(&ctx, workload).await {
                let next = faults::other_image([&images[0], &images[1]], &now);
                let _ = workloads::set_image(&ctx, workload, next).await;
            }
        }
        tokio::select! {
            () = stop.cancelled() => {}
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

/// Runs BroadcastJobs one after another until `stop`; returns the last one's name if it
/// had not completed by then.
async fn run_jobs(
    ctx: TestContext,
    checker: Arc<Mutex<Checker>>,
    image: String,
    nodes: usize,
    stop: CancellationToken,
    done: Arc<AtomicUsize>,
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
        while jobs::launch(&ctx, &name, &image).await.is_err() {
            if stop.is_cancelled() {
                return None;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        while !matches!(jobs::completed(&ctx, &name).await, Ok(true)) {
            if stop.is_cancelled() {
                return Some(name);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        done.fetch_add(1, Ordering::Relaxed);
        if stop.is_cancelled() {
            return None;
        }
    }
    None
}

/// Waits up to `timeout` for BroadcastJob `name` to complete; what it said if it did not.
async fn wait_job(ctx: &TestContext, name: &str, timeout: Duration) -> Option<String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if matches!(jobs::completed(ctx, name).await, Ok(true)) {
            return None;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Some(format!("BroadcastJob {name} never completed"))
}

/// Waits up to `timeout` for every workload to be rolled out; the ones that are not, with
/// their status.
async fn wait_rolled_out(
    ctx: &TestContext,
    sets: &[Workload],
    timeout: Duration,
) -> Result<Vec<String>> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut pending = Vec::new();
        for workload in sets {
            if !matches!(
                workloads::rolled_out_generation(ctx, workload).await,
                Ok(Some(_))
            ) {
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
        }
        if pending.is_empty() || Instant::now() >= deadline {
            return Ok(pending);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn watch_pods(
    api: Api<Pod>,
    checker: Arc<Mutex<Checker>>,
    violations: Arc<Mutex<Vec<Violation>>>,
    started: Instant,
) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut relisted: Option<BTreeSet<String>> = None;
    while let Some(event) = stream.next().await {
        let Ok(event) = event else { continue };
        let at = started.elapsed();
        let Ok(mut checker) = lock(&checker) else {
            return;
        };
        let found = match event {
            Event::Apply(pod) => checker.observe(at, view_of(&pod)),
            Event::Delete(pod) => checker.forget(at, &pod.uid().unwrap_or_default()),
            Event::Init => {
                relisted = Some(BTreeSet::new());
                Vec::new()
            }
            Event::InitApply(pod) => {
                if let Some(seen) = relisted.as_mut() {
                    seen.insert(pod.uid().unwrap_or_default());
                }
                checker.observe(at, view_of(&pod))
            }
            Event::InitDone => match relisted.take() {
                Some(seen) => checker.forget_all_but(at, &seen),
                None => Vec::new(),
            },
        };
        drop(checker);
        if let Ok(mut all) = lock(&violations) {
            all.extend(found);
        }
    }
}

/// What the checkers read of a pod.
pub fn view_of(pod: &Pod) -> PodView {
    let labels = pod.labels();
    let conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let has = |type_: &str, status: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == status)
    };
    PodView {
        uid: pod.uid().unwrap_or_default(),
        name: pod.name_any(),
        app: labels.get("app").cloned(),
        owner_kind: pod
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .map(|o| o.kind.clone()),
        instance_id: labels.get("apps.kruise.io/cloneset-instance-id").cloned(),
        ordinal: labels.get("apps.kubernetes.io/pod-index").cloned(),
        terminating: pod.metadata.deletion_timestamp.is_some(),
        ready: has("Ready", "True"),
        in_place_pending: has("InPlaceUpdateReady", "False"),
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        finished: pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed"),
    }
}

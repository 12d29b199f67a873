//! Leader election with one replica's clock wrong by more than a lease duration, against
//! the real apiserver: two electors in-process (two clients, one Lease per test, different
//! identities), the clock of one shifted ahead or behind. Whichever side is skewed, at
//! every observation at most one leads, the standby does not take a Lease the leader keeps
//! renewing, and when the leader dies without releasing, the standby takes over within a
//! bounded number of its own rounds. Everything is counted in election rounds and asserted
//! on observed leadership, never on elapsed time.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::SignedDuration;
use stevedore_controlplane::runtime::clock::{Clock, SkewedClock, SystemClock};
use stevedore_controlplane::runtime::elector::Elector;
use stevedore_controlplane::runtime::leader::Timings;
use stevedore_tests::{TestContext, run_in_namespace};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

fn timings() -> Timings {
    Timings {
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_millis(500),
    }
}

/// Far more than the lease duration, so a rule that compares `renewTime` with the local
/// clock gets every answer wrong.
const SKEW: SignedDuration = SignedDuration::from_secs(60);

/// Standby rounds watched while the leader renews: 2.5 lease durations at the retry period.
const WATCHED_ROUNDS: u64 = 20;

/// Standby rounds allowed for a takeover once the leader is gone: one lease duration at the
/// retry period, plus the same again as slack.
const TAKEOVER_ROUNDS: u64 = 16;

/// One in-process replica.
struct Replica {
    identity: &'static str,
    leading: watch::Receiver<bool>,
    rounds: watch::Receiver<u64>,
    task: JoinHandle<()>,
    stop: CancellationToken,
}

fn replica(
    client: kube::Client,
    ctx: &TestContext,
    lease: &str,
    identity: &'static str,
    clock: Arc<dyn Clock>,
) -> Replica {
    let elector =
        Elector::new(client, &ctx.namespace, lease, identity, timings()).with_clock(clock);
    let leading = elector.leadership();
    let rounds = elector.rounds();
    let stop = CancellationToken::new();
    let task = tokio::spawn(elector.run(stop.clone()));
    Replica {
        identity,
        leading,
        rounds,
        task,
        stop,
    }
}

async fn holder(ctx: &TestContext, lease: &str) -> Result<Option<String>> {
    let lease = ctx.api::<Lease>().get(lease).await?;
    Ok(lease
        .spec
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty()))
}

/// Waits up to `rounds` of `replica`'s election rounds for it to lead.
async fn leads_within(replica: &mut Replica, rounds: u64) -> Result<bool> {
    for _ in 0..rounds {
        if *replica.leading.borrow() {
            return Ok(true);
        }
        replica
            .rounds
            .changed()
            .await
            .context("the elector ended")?;
    }
    Ok(*replica.leading.borrow())
}

/// Which replica's clock is wrong, and which way.
#[derive(Debug, Clone, Copy)]
enum Skewed {
    Leader(i8),
    Standby(i8),
}

fn clock(direction: i8) -> Arc<dyn Clock> {
    let offset = if direction < 0 { -SKEW } else { SKEW };
    Arc::new(SkewedClock { offset })
}

async fn one_leader_despite(ctx: TestContext, lease: &str, skewed: Skewed) -> Result<()> {
    let (leader_clock, standby_clock): (Arc<dyn Clock>, Arc<dyn Clock>) = match skewed {
        Skewed::Leader(direction) => (clock(direction), Arc::new(SystemClock)),
        Skewed::Standby(direction) => (Arc::new(SystemClock), clock(direction)),
    };
    let mut leader = replica(ctx.client.clone(), &ctx, lease, "replica-a", leader_clock);
    ensure!(
        leads_within(&mut leader, TAKEOVER_ROUNDS).await?,
        "the first replica never led an absent Lease"
    );
    let second_client = ctx.cluster.client().await?;
    let mut standby = replica(second_client, &ctx, lease, "replica-b", standby_clock);

    // Every standby round is an observation point; the leader keeps renewing throughout.
    for round in 0..WATCHED_ROUNDS {
        standby
            .rounds
            .changed()
            .await
            .context("the standby ended")?;
        let (a, b) = (*leader.leading.borrow(), *standby.leading.borrow());
        ensure!(!(a && b), "two leaders at standby round {round}");
        ensure!(
            !b,
            "{skewed:?}: the standby took the Lease its holder keeps renewing (round {round})"
        );
        ensure!(
            a,
            "{skewed:?}: the leader lost a Lease nobody took (round {round})"
        );
    }
    ensure!(holder(&ctx, lease).await?.as_deref() == Some(leader.identity));

    // The leader dies without releasing: the Lease stops changing and expires on the
    // standby's own clock, whichever way either clock is wrong.
    leader.task.abort();
    let _ = leader.task.await;
    ensure!(
        leads_within(&mut standby, TAKEOVER_ROUNDS).await?,
        "{skewed:?}: the standby did not take over an abandoned Lease within {TAKEOVER_ROUNDS} rounds"
    );
    ensure!(holder(&ctx, lease).await?.as_deref() == Some(standby.identity));
    standby.stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), standby.task)
        .await
        .context("the standby did not stop")??;
    if holder(&ctx, lease).await?.is_some() {
        bail!("the standby did not release the Lease on shutdown");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_clock_ahead_does_not_take_a_renewed_lease() -> Result<()> {
    run_in_namespace("fencing-standby-ahead", |ctx| async move {
        one_leader_despite(ctx, "fencing-standby-ahead", Skewed::Standby(1)).await
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_clock_behind_does_not_take_a_renewed_lease() -> Result<()> {
    run_in_namespace("fencing-standby-behind", |ctx| async move {
        one_leader_despite(ctx, "fencing-standby-behind", Skewed::Standby(-1)).await
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_clock_ahead_keeps_its_lease_and_loses_it_when_dead() -> Result<()> {
    run_in_namespace("fencing-leader-ahead", |ctx| async move {
        one_leader_despite(ctx, "fencing-leader-ahead", Skewed::Leader(1)).await
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_clock_behind_keeps_its_lease() -> Result<()> {
    run_in_namespace("fencing-leader-behind", |ctx| async move {
        one_leader_despite(ctx, "fencing-leader-behind", Skewed::Leader(-1)).await
    })
    .await
}

//! Runs alone: it kills the control plane's leader and standby, pauses etcd and restarts
//! the apiserver, which every other suite relies on.
//!
//! A short seeded run of the chaos harness (`tests/src/chaos/`, issue 33): rollouts of two
//! CloneSets (recreate, and in place under a PodUnavailableBudget), an Advanced
//! StatefulSet and an Advanced DaemonSet, with BroadcastJobs, an AdvancedCronJob,
//! ImagePullJobs, on three simulated nodes with agents, and a CloneSet on the real nodes
//! whose containers ContainerRecreateRequests recreate, while faults of every kind but the
//! apiserver throttle are injected (a real node's agent among them); no checker may
//! report a broken promise and everything finishes after the last fault. `CHAOS_SEED`
//! replays another seed.

use std::time::Duration;

use anyhow::{Result, ensure};
use stevedore_tests::chaos::plan::FaultKind;
use stevedore_tests::chaos::run::{Options, run};
use stevedore_tests::run_in_namespace;

// Multi-threaded: the harness starts and kills the simulated agents in place (blocking).
#[tokio::test(flavor = "multi_thread")]
async fn rollouts_keep_their_promises_through_a_seeded_run_of_faults() -> Result<()> {
    let seed = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_128);
    let options = Options {
        seed,
        faults: 8,
        mean_gap: Duration::from_secs(2),
        settle: Duration::from_secs(180),
        // Every kind but the throttle: routing the control plane through the proxy costs
        // two rollouts of it (about a minute), which CI's time budget leaves to the
        // chaos command's longer runs.
        kinds: (FaultKind::ALL.into_iter())
            .filter(|k| *k != FaultKind::ThrottleApiserver)
            .collect(),
    };
    run_in_namespace("chaos-short", |ctx| async move {
        let report = run(&ctx, &options).await?;
        eprintln!("{report}");
        ensure!(report.kept_every_promise(), "a promise broke:\n{report}");
        ensure!(
            report.faults == options.faults,
            "not every fault ran:\n{report}"
        );
        ensure!(
            report.rollouts >= 3,
            "too few rollouts finished to say anything:\n{report}"
        );
        Ok(())
    })
    .await
}

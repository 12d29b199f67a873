//! The chaos harness (`tests/src/chaos/`): rollouts of two CloneSets (recreate and in
//! place), an Advanced StatefulSet and an Advanced DaemonSet, BroadcastJobs, an
//! AdvancedCronJob, ImagePullJobs and ContainerRecreateRequests on simulated nodes with
//! agents of the local cluster while a seeded schedule injects faults, with the checkers
//! reading the watch stream. Exits 1
//! when a promise broke, printing the seed and the fault history; the same arguments
//! replay the same schedule.
//!
//!   chaos [--seed N] [--faults N] [--gap-ms MS] [--settle-secs S] [--kinds a,b,...]

use std::io::Write as _;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Parser;
use stevedore_tests::chaos::plan::FaultKind;
use stevedore_tests::chaos::run::{Options, run};
use stevedore_tests::run_in_namespace;

#[derive(Parser)]
struct Args {
    /// The schedule's seed (default: drawn from the clock, and printed).
    #[arg(long)]
    seed: Option<u64>,
    #[arg(long, default_value_t = 20)]
    faults: usize,
    /// The mean wait between two faults.
    #[arg(long, default_value_t = 3_000)]
    gap_ms: u64,
    /// How long the rollouts may take to finish after the last fault.
    #[arg(long, default_value_t = 180)]
    settle_secs: u64,
    /// Fault kinds to inject (default: all), e.g. `delete-pod,kill-leader`.
    #[arg(long, value_delimiter = ',', value_parser = parse_kind)]
    kinds: Vec<FaultKind>,
}

fn parse_kind(name: &str) -> Result<FaultKind, String> {
    FaultKind::from_flag(name).ok_or_else(|| {
        let known: Vec<String> = FaultKind::ALL.iter().map(|k| k.flag()).collect();
        format!("unknown fault kind '{name}'; known: {}", known.join(", "))
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(1)
    });
    let kinds = if args.kinds.is_empty() {
        FaultKind::ALL.to_vec()
    } else {
        args.kinds
    };
    let options = Options {
        seed,
        faults: args.faults,
        mean_gap: Duration::from_millis(args.gap_ms),
        settle: Duration::from_secs(args.settle_secs),
        kinds,
    };
    run_in_namespace("chaos", |ctx| async move {
        let report = run(&ctx, &options).await?;
        writeln!(std::io::stdout(), "{report}")?;
        if !report.kept_every_promise() {
            bail!("chaos seed {}: a promise broke (above)", options.seed);
        }
        Ok(())
    })
    .await
}

use clap::Parser as _;
use stevedore_controlplane::{app, config::Args, telemetry};

/// mimalloc, not glibc's malloc: a sync builds and drops a few small values per pod, and
/// with glibc most of a 3,500-pod CloneSet's plan went to malloc, free and their
/// consolidation (44-49 ms against 10-11 ms with mimalloc; `examples/plan_cost.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Parses the CLI, sets up logging and hands over to the wiring, which runs until
/// SIGTERM/SIGINT and then releases the leader Lease.
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    telemetry::init(args.log_format)?;
    app::run(args).await?;
    Ok(())
}

use clap::Parser as _;
use stevedore_controlplane::{config::Args, runtime, telemetry};

/// Parses the CLI, sets up logging and hands over to the runtime, which runs until
/// SIGTERM/SIGINT and then releases the leader Lease.
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    telemetry::init(args.log_format)?;
    runtime::run(args).await?;
    Ok(())
}

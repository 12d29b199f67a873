use clap::Parser as _;
use stevedore_controlplane::{app, config::Args, telemetry};

/// Parses the CLI, sets up logging and hands over to the wiring, which runs until
/// SIGTERM/SIGINT and then releases the leader Lease.
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    telemetry::init(args.log_format)?;
    app::run(args).await?;
    Ok(())
}

use anyhow::Context as _;
use clap::Parser as _;
use stevedore_controlplane::{config::Args, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    telemetry::init(args.log_format)?;

    let client = kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API")?;
    let version = client
        .apiserver_version()
        .await
        .context("reading the apiserver version")?;
    tracing::info!(
        version = %version.git_version,
        platform = %version.platform,
        namespace = %args.namespace,
        identity = %args.identity(),
        "connected to the Kubernetes API"
    );
    anyhow::bail!("no reconcilers are implemented yet")
}

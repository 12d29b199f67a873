use anyhow::Context as _;
use clap::Parser as _;
use stevedore_agent::{apiserver, config::Args, server, shutdown, telemetry};
use tokio_util::sync::CancellationToken;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.worker_threads.get())
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    telemetry::init(args.log_format)?;
    let kube = apiserver::client()?;
    let tls = server::tls_material(&args).await?;
    let listeners = server::Listeners::bind(&args).await?;
    let shutdown = CancellationToken::new();
    shutdown::cancel_on_signal(shutdown.clone()).context("installing signal handlers")?;
    tracing::info!(node = %args.node_name, grpc = %args.grpc_addr, unix = %args.unix_socket.display(), health = %args.health_addr, metrics = %args.metrics_addr, "serving");
    server::run(&args, listeners, tls, kube, shutdown).await?;
    tracing::info!("stopped");
    Ok(())
}

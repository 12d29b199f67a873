use anyhow::Context as _;
use clap::Parser as _;
use stevedore_agent::{config::Args, images::AgentImageService, server, shutdown, telemetry};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    telemetry::init(args.log_format)?;

    let tls = match args.tls_files() {
        Some((cert, key)) => Some(server::load_tls(cert, key).await?),
        None => None,
    };
    let listener = TcpListener::bind(args.grpc_addr)
        .await
        .with_context(|| format!("binding the gRPC address {}", args.grpc_addr))?;
    let shutdown = CancellationToken::new();
    shutdown::cancel_on_signal(shutdown.clone()).context("installing signal handlers")?;

    let images = AgentImageService::connect(&args, shutdown.clone())
        .await
        .context("starting the image service")?;
    let services = server::Services {
        images: Some(images),
    };

    tracing::info!(node = %args.node_name, addr = %args.grpc_addr, tls = tls.is_some(), "serving gRPC");
    tracing::warn!(
        "agent services (containers, pods, node), token authentication, the Unix socket and \
         the admin endpoint are not implemented yet"
    );
    server::serve(listener, tls, services, shutdown).await?;
    tracing::info!("stopped");
    Ok(())
}

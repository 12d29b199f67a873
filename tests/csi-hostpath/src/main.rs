//! `stevedore-csi-hostpath`: the local cluster's CSI driver, run as a host process beside
//! the kubelet (deploy/local/lib/csi.sh).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;
use stevedore_csi_hostpath::controller::ControllerService;
use stevedore_csi_hostpath::csi::controller_server::ControllerServer;
use stevedore_csi_hostpath::csi::identity_server::IdentityServer;
use stevedore_csi_hostpath::csi::node_server::NodeServer;
use stevedore_csi_hostpath::identity::IdentityService;
use stevedore_csi_hostpath::layout::Layout;
use stevedore_csi_hostpath::mounts::SystemMounter;
use stevedore_csi_hostpath::node::NodeService;
use stevedore_csi_hostpath::pluginregistration::registration_server::RegistrationServer;
use stevedore_csi_hostpath::registration::RegistrationService;
use stevedore_csi_hostpath::{DRIVER_NAME, serve};
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;

#[derive(Debug, Parser)]
#[command(about = "A CSI host-path driver: volumes are directories, capacity is recorded")]
struct Args {
    /// The CSI socket (Identity, Controller and Node) the sidecars and the kubelet dial.
    #[arg(long, env = "CSI_ENDPOINT")]
    csi_socket: PathBuf,
    /// The kubelet's plugins_registry directory: the registration socket goes there.
    /// Without it the kubelet never learns of the driver (controller-only use).
    #[arg(long, env = "CSI_REGISTRATION_DIR")]
    registration_dir: Option<PathBuf>,
    /// Where volume directories and their records live.
    #[arg(long, env = "CSI_STATE_DIR")]
    state_dir: PathBuf,
    /// The node's name, as the kubelet registers it (NodeGetInfo's node_id).
    #[arg(long, env = "NODE_NAME")]
    node_name: String,
    #[arg(long, env = "CSI_DRIVER_NAME", default_value = DRIVER_NAME)]
    driver_name: String,
}

#[tokio::main]
async fn main() -> Result<()> {
    // Logs go to a file (deploy/local/lib/csi.sh): no colour codes.
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));

    let layout = Layout::new(&args.state_dir);
    std::fs::create_dir_all(layout.volumes_dir())
        .with_context(|| format!("creating {}", layout.volumes_dir().display()))?;
    let csi = csi_router(&args, layout)?;
    let csi_listener = serve::bind(&args.csi_socket)?;
    let mut servers = vec![tokio::spawn(serve::serve(
        csi,
        csi_listener,
        args.csi_socket.clone(),
        shutdown.clone(),
    ))];
    if let Some(dir) = &args.registration_dir {
        let socket = dir.join(format!("{}-reg.sock", args.driver_name));
        let registration =
            Server::builder().add_service(RegistrationServer::new(RegistrationService {
                driver_name: args.driver_name.clone(),
                csi_endpoint: args.csi_socket.display().to_string(),
            }));
        let listener = serve::bind(&socket)?;
        servers.push(tokio::spawn(serve::serve_rewriting_authority(
            registration,
            listener,
            socket,
            shutdown.clone(),
        )));
    }
    tracing::info!(driver = args.driver_name, socket = %args.csi_socket.display(), "serving");
    for server in servers {
        server.await.context("a server task panicked")??;
    }
    Ok(())
}

fn csi_router(args: &Args, layout: Layout) -> Result<tonic::transport::server::Router> {
    let controller = ControllerService::open(layout.clone())?;
    let node = NodeService {
        node_name: args.node_name.clone(),
        layout,
        mounter: Arc::new(SystemMounter),
    };
    let identity = IdentityService {
        driver_name: args.driver_name.clone(),
    };
    Ok(Server::builder()
        .add_service(IdentityServer::new(identity))
        .add_service(ControllerServer::new(controller))
        .add_service(NodeServer::new(node)))
}

/// SIGTERM (`cluster.sh down`) or Ctrl-C stops both servers and removes their sockets.
async fn stop_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGTERM; stopping on Ctrl-C only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    shutdown.cancel();
}

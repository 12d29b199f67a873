//! Wiring: the same agent services on the TCP listener (TLS, token auth per service)
//! and on the root-only Unix socket (no token), plus health, reflection and the admin
//! HTTP endpoint, all stopped by one shutdown token.

use std::io;
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::path::Path;

use stevedore_proto::stevedore::agent::v1::{
    container_service_server::{self, ContainerServiceServer},
    image_service_server::{self, ImageServiceServer},
    node_service_server::{self, NodeServiceServer},
    pod_service_server::{self, PodServiceServer},
    probe_service_server::{self, ProbeServiceServer},
};
use tokio::net::{TcpListener, UnixListener};
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tonic::transport::Server;
use tonic_health::{ServingStatus, pb::health_server};
use tonic_reflection::pb::{v1, v1alpha};

use crate::admin::{self, AdminListeners, CachedReadiness, LiveChecks, READINESS_TTL};
use crate::auth::{AuthLayer, Gate, KubeReviewer, tls::TlsError, tls::TlsMaterial};
use crate::config::Args;
use crate::containers::{ContainerGrpc, Containerd, Restarts, RuntimeError};
use crate::images::{AgentImageService, ConnectError};
use crate::metrics::{Metrics, RpcMetricsLayer};
use crate::node::NodeGrpc;
use crate::pods::{KubePods, NodePods, PodGrpc};
use crate::probes::{ProbeGrpc, ProbeRunner, handlers::http_client};
use crate::serving::{self, CertError, ServingCert, certified_key, tls_incoming};

/// The services served, and so the ones reflection advertises.
const SERVED: [&str; 8] = [
    health_server::SERVICE_NAME,
    v1::server_reflection_server::SERVICE_NAME,
    v1alpha::server_reflection_server::SERVICE_NAME,
    image_service_server::SERVICE_NAME,
    container_service_server::SERVICE_NAME,
    pod_service_server::SERVICE_NAME,
    node_service_server::SERVICE_NAME,
    probe_service_server::SERVICE_NAME,
];

/// Why the agent could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("binding {what} {addr}")]
    Bind {
        what: &'static str,
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("the serving certificate: {0}")]
    Serving(#[from] CertError),
    #[error("containerd client")]
    Runtime(#[from] RuntimeError),
    #[error("starting the image service")]
    Images(#[from] ConnectError),
    #[error("building the probes' HTTP client")]
    ProbeClient(#[from] reqwest::Error),
    #[error("building the reflection service")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("gRPC transport")]
    Transport(#[from] tonic::transport::Error),
    #[error("admin endpoint")]
    Admin(#[source] io::Error),
}

/// The agent's listening sockets, bound before anything is served.
pub struct Listeners {
    pub grpc: TcpListener,
    pub unix: UnixListener,
    pub admin: AdminListeners,
}

impl Listeners {
    pub async fn bind(args: &Args) -> Result<Self, ServeError> {
        let tcp = |what: &'static str, addr: std::net::SocketAddr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|source| ServeError::Bind {
                    what,
                    addr: addr.to_string(),
                    source,
                })
        };
        Ok(Self {
            grpc: tcp("the gRPC address", args.grpc_addr).await?,
            unix: bind_unix(&args.unix_socket)?,
            admin: if args.health_addr == args.metrics_addr {
                AdminListeners::Shared(tcp("the health address", args.health_addr).await?)
            } else {
                AdminListeners::Split {
                    health: tcp("the health address", args.health_addr).await?,
                    metrics: tcp("the metrics address", args.metrics_addr).await?,
                }
            },
        })
    }
}

/// Binds a Unix socket only its owner (root) can use, creating its directory and
/// replacing a stale socket left by an earlier run.
pub fn bind_unix(path: &Path) -> Result<UnixListener, ServeError> {
    let err = |source| ServeError::Bind {
        what: "the Unix socket",
        addr: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path).map_err(err)?,
        Ok(_) => {
            return Err(err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "exists and is not a socket",
            )));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let listener = UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    Ok(listener)
}

/// The TLS identity from the flags, or a self-signed one for the node's names.
pub async fn tls_material(args: &Args) -> Result<TlsMaterial, ServeError> {
    match args.tls_files() {
        Some((cert, key)) => Ok(TlsMaterial::load(cert, key).await?),
        None => {
            let mut names = vec![args.node_name.clone(), "localhost".to_owned()];
            names.push(args.grpc_addr.ip().to_string());
            names.extend(args.node_ips.iter().map(ToString::to_string));
            names.push("127.0.0.1".to_owned());
            names.dedup();
            tracing::info!(
                ?names,
                "no TLS certificate given; generated a self-signed one"
            );
            Ok(TlsMaterial::self_signed(names)?)
        }
    }
}

/// Builds the set of services once per listener; `wrap` adds authentication on TCP.
async fn routes(
    services: &Services,
    auth: Option<&AuthLayer<KubeReviewer>>,
) -> Result<Routes, ServeError> {
    let reflection = || {
        SERVED.into_iter().fold(
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(stevedore_proto::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET),
            |builder, name| builder.with_service_name(name),
        )
    };
    let routes = Routes::default()
        .add_service(services.health.clone())
        .add_service(reflection().build_v1()?)
        .add_service(reflection().build_v1alpha()?);
    let routes = match auth {
        Some(auth) => {
            use tower::Layer as _;
            routes
                .add_service(auth.layer(services.images.clone()))
                .add_service(auth.layer(services.containers.clone()))
                .add_service(auth.layer(services.pods.clone()))
                .add_service(auth.layer(services.node.clone()))
                .add_service(auth.layer(services.probes.clone()))
        }
        None => routes
            .add_service(services.images.clone())
            .add_service(services.containers.clone())
            .add_service(services.pods.clone())
            .add_service(services.node.clone())
            .add_service(services.probes.clone()),
    };
    Ok(routes)
}

struct Services {
    health: health_server::HealthServer<tonic_health::server::HealthService>,
    images: ImageServiceServer<AgentImageService>,
    containers: ContainerServiceServer<ContainerGrpc<Containerd, KubePods>>,
    pods: PodServiceServer<PodGrpc<KubePods>>,
    node: NodeServiceServer<NodeGrpc>,
    probes: ProbeServiceServer<ProbeGrpc<Containerd>>,
}

/// The gRPC services the agent serves (the same on both listeners), with the restart
/// queue and the image service they own.
async fn services(
    args: &Args,
    containerd: &Containerd,
    kube: &kube::Client,
    metrics: &Metrics,
    shutdown: &CancellationToken,
) -> Result<Services, ServeError> {
    let pods = NodePods::new(KubePods::new(kube.clone()), &args.node_name);
    let restarts = Restarts::new(
        containerd.clone(),
        pods.clone(),
        metrics.clone(),
        args.max_concurrent_restarts.get(),
        shutdown.clone(),
    );
    let images = AgentImageService::connect(args, shutdown.clone()).await?;
    images.report_to(metrics.clone());
    let health = tonic_health::server::HealthReporter::new();
    // The empty name is the server's overall health in the gRPC health protocol.
    health.set_service_status("", ServingStatus::Serving).await;
    let saturating = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let probes = ProbeRunner::new(containerd.clone(), http_client()?, shutdown.clone());
    Ok(Services {
        health: health_server::HealthServer::new(
            tonic_health::server::HealthService::from_health_reporter(health),
        ),
        images: ImageServiceServer::new(images),
        containers: ContainerServiceServer::new(ContainerGrpc::new(restarts)),
        pods: PodServiceServer::new(PodGrpc::new(pods)),
        probes: ProbeServiceServer::new(ProbeGrpc::new(args.node_name.clone(), probes)),
        node: NodeServiceServer::new(NodeGrpc {
            node_name: args.node_name.clone(),
            containerd: containerd.clone(),
            snapshotter: args.snapshotter.clone(),
            max_concurrent_pulls: saturating(args.max_concurrent_pulls.get()),
            max_concurrent_restarts: saturating(args.max_concurrent_restarts.get()),
        }),
    })
}

/// Serves everything until `shutdown` is cancelled, then lets in-flight calls finish.
/// `tls` is the certificate served first; it is replaced without a restart as the flags
/// say (`serving::keep_current`: CSR renewals or changed files).
#[tracing::instrument(skip_all, fields(node = %args.node_name))]
pub async fn run(
    args: &Args,
    listeners: Listeners,
    tls: TlsMaterial,
    kube: kube::Client,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let metrics = Metrics::new();
    let containerd =
        Containerd::connect_lazy(args.containerd_socket.clone(), &args.containerd_namespace)?;
    let services = services(args, &containerd, &kube, &metrics, &shutdown).await?;
    let auth = AuthLayer::new(Gate::new(KubeReviewer::new(
        kube.clone(),
        args.node_audience(),
        args.node_name.clone(),
    )));

    let serving = ServingCert::new(certified_key(&tls.cert_pem, &tls.key_pem)?);
    let tcp = Server::builder()
        .layer(RpcMetricsLayer::new(metrics.clone()))
        .add_routes(routes(&services, Some(&auth)).await?)
        .serve_with_incoming_shutdown(
            tls_incoming(listeners.grpc, serving.server_config()?, shutdown.clone()),
            shutdown.clone().cancelled_owned(),
        );
    let certificates = serving::keep_current(args, kube.clone(), serving, shutdown.clone());
    let unix = Server::builder()
        .layer(RpcMetricsLayer::new(metrics.clone()))
        .add_routes(routes(&services, None).await?)
        .serve_with_incoming_shutdown(
            UnixListenerStream::new(listeners.unix),
            shutdown.clone().cancelled_owned(),
        );
    let readiness = std::sync::Arc::new(CachedReadiness::new(
        LiveChecks { containerd, kube },
        READINESS_TTL,
    ));
    let admin = admin::serve(listeners.admin, readiness, metrics, shutdown.clone());

    // If one part fails, stop the others too.
    let stop_all = |result: Result<(), ServeError>| {
        if result.is_err() {
            shutdown.cancel();
        }
        result
    };
    let (tcp, unix, admin, ()) = tokio::join!(
        async { stop_all(tcp.await.map_err(ServeError::from)) },
        async { stop_all(unix.await.map_err(ServeError::from)) },
        async { stop_all(admin.await.map_err(ServeError::Admin)) },
        certificates,
    );
    tcp.and(unix).and(admin)
}

//! The agent's gRPC server: `grpc.health.v1`, server reflection (v1 and v1alpha) and
//! the agent services given in [`Services`]; reflection advertises exactly those served.

use std::{
    io,
    path::{Path, PathBuf},
};

use stevedore_proto::stevedore::agent::v1::image_service_server::{self, ImageServiceServer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Identity, Server, ServerTlsConfig, server::TcpIncoming};
use tonic_health::{ServingStatus, pb::health_server};
use tonic_reflection::pb::{v1, v1alpha};

use crate::images::AgentImageService;

/// Services always served. The agent API's descriptors are all registered, so its
/// types can be described even for services not (yet) served.
const ALWAYS_SERVED: [&str; 3] = [
    health_server::SERVICE_NAME,
    v1::server_reflection_server::SERVICE_NAME,
    v1alpha::server_reflection_server::SERVICE_NAME,
];

/// Why the gRPC server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("reading TLS file {path}")]
    ReadTls {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("building the reflection service")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("gRPC transport")]
    Transport(#[from] tonic::transport::Error),
}

/// Loads a TLS server identity from a PEM certificate (chain) and key.
pub async fn load_tls(cert: &Path, key: &Path) -> Result<ServerTlsConfig, ServeError> {
    let identity = Identity::from_pem(read(cert).await?, read(key).await?);
    Ok(ServerTlsConfig::new().identity(identity))
}

async fn read(path: &Path) -> Result<Vec<u8>, ServeError> {
    tokio::fs::read(path)
        .await
        .map_err(|source| ServeError::ReadTls {
            path: path.to_owned(),
            source,
        })
}

/// The agent services to serve; absent ones are neither served nor advertised.
#[derive(Default)]
pub struct Services {
    pub images: Option<AgentImageService>,
}

impl Services {
    fn served_names(&self) -> Vec<&'static str> {
        let mut names = ALWAYS_SERVED.to_vec();
        if self.images.is_some() {
            names.push(image_service_server::SERVICE_NAME);
        }
        names
    }
}

/// Serves health, reflection and `services` on `listener` until `shutdown` is
/// cancelled, then lets in-flight calls finish.
pub async fn serve(
    listener: TcpListener,
    tls: Option<ServerTlsConfig>,
    services: Services,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    // The empty name is the server's overall health in the gRPC health protocol.
    health.set_service_status("", ServingStatus::Serving).await;

    let served = services.served_names();
    let reflection = || {
        served.iter().fold(
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(stevedore_proto::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET),
            |builder, name| builder.with_service_name(*name),
        )
    };
    let reflection_v1 = reflection().build_v1()?;
    let reflection_v1alpha = reflection().build_v1alpha()?;

    let mut builder = Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls)?;
    }
    builder
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_optional_service(services.images.map(ImageServiceServer::new))
        .serve_with_incoming_shutdown(TcpIncoming::from(listener), shutdown.cancelled_owned())
        .await?;
    Ok(())
}

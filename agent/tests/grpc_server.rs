//! The agent's gRPC server over real TCP on loopback: health, reflection, shutdown.

#![allow(
    clippy::unwrap_used,
    reason = "helpers of tests, where a panic is the failure"
)]

use std::{
    collections::BTreeSet,
    net::SocketAddr,
    path::PathBuf,
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use clap::Parser as _;
use stevedore_agent::{admin::AdminListeners, auth::tls::TlsMaterial, config::Args, server};
use tokio::{net::TcpListener, task::JoinHandle};
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};
use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus, health_client};
use tonic_reflection::pb::{v1, v1alpha};

struct Running {
    addr: SocketAddr,
    ca: String,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), server::ServeError>>,
    _dir: TempDir,
}

/// A directory removed on drop, for the Unix socket.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts the whole agent on loopback, with a Kubernetes API and containerd that are
/// never reached (health and reflection need neither).
async fn start() -> Running {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "stevedore-grpc-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let socket = dir.join("sub/agent.sock");
    let args = Args::try_parse_from([
        "agent",
        "--node-name",
        "test-node",
        "--unix-socket",
        socket.to_str().unwrap(),
        "--containerd-socket",
        dir.join("no-containerd.sock").to_str().unwrap(),
    ])
    .unwrap();
    let listeners = server::Listeners {
        grpc: TcpListener::bind("127.0.0.1:0").await.unwrap(),
        unix: server::bind_unix(&socket).unwrap(),
        admin: AdminListeners::Shared(TcpListener::bind("127.0.0.1:0").await.unwrap()),
    };
    let addr = listeners.grpc.local_addr().unwrap();
    let tls = TlsMaterial::self_signed(vec!["localhost".into()]).unwrap();
    let ca = tls.cert_pem.clone();
    let kube =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let task = tokio::spawn(async move { server::run(&args, listeners, tls, kube, token).await });
    Running {
        addr,
        ca,
        shutdown,
        task,
        _dir: TempDir(dir),
    }
}

async fn channel(running: &Running) -> Channel {
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&running.ca))
        .domain_name("localhost");
    Channel::from_shared(format!("https://{}", running.addr))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn request(message: v1::server_reflection_request::MessageRequest) -> v1::ServerReflectionRequest {
    v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(message),
    }
}

async fn reflect_v1(
    channel: Channel,
    message: v1::server_reflection_request::MessageRequest,
) -> v1::server_reflection_response::MessageResponse {
    let mut client = v1::server_reflection_client::ServerReflectionClient::new(channel);
    let mut responses = client
        .server_reflection_info(futures::stream::iter([request(message)]))
        .await
        .unwrap();
    let response = responses
        .get_mut()
        .message()
        .await
        .unwrap()
        .expect("one response");
    response.message_response.expect("a message response")
}

#[tokio::test]
async fn overall_health_is_serving() {
    let running = start().await;
    let mut client = health_client::HealthClient::new(channel(&running).await);

    let response = client
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap();
    assert_eq!(response.into_inner().status(), ServingStatus::Serving);
}

#[tokio::test]
async fn reflection_v1_advertises_the_served_services() {
    use v1::{
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };

    let running = start().await;
    let response = reflect_v1(
        channel(&running).await,
        MessageRequest::ListServices(String::new()),
    );

    let MessageResponse::ListServicesResponse(list) = response.await else {
        panic!("expected a service list");
    };
    let names: BTreeSet<_> = list.service.into_iter().map(|s| s.name).collect();
    let expected: BTreeSet<_> = [
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
        "stevedore.agent.v1.ContainerService",
        "stevedore.agent.v1.ImageService",
        "stevedore.agent.v1.NodeService",
        "stevedore.agent.v1.PodService",
        "stevedore.agent.v1.ProbeService",
    ]
    .map(String::from)
    .into();
    assert_eq!(names, expected);
}

#[tokio::test]
async fn reflection_v1_describes_the_agent_api() {
    use v1::{
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };

    let running = start().await;
    let symbol = MessageRequest::FileContainingSymbol("stevedore.agent.v1.ImageService".into());
    let response = reflect_v1(channel(&running).await, symbol).await;

    let MessageResponse::FileDescriptorResponse(files) = response else {
        panic!("expected file descriptors, got {response:?}");
    };
    assert!(!files.file_descriptor_proto.is_empty());
}

#[tokio::test]
async fn reflection_v1alpha_is_served() {
    use v1alpha::{
        ServerReflectionRequest, server_reflection_request::MessageRequest,
        server_reflection_response::MessageResponse,
    };

    let running = start().await;
    let mut client =
        v1alpha::server_reflection_client::ServerReflectionClient::new(channel(&running).await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = client
        .server_reflection_info(futures::stream::iter([request]))
        .await
        .unwrap();
    let response = responses
        .get_mut()
        .message()
        .await
        .unwrap()
        .expect("one response");

    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("expected a service list");
    };
    assert!(
        list.service
            .iter()
            .any(|s| s.name == "grpc.health.v1.Health")
    );
}

#[tokio::test]
async fn cancelling_the_token_stops_the_server_cleanly() {
    let running = start().await;
    // Make sure the server is up before asking it to stop.
    let mut client = health_client::HealthClient::new(channel(&running).await);
    client.check(HealthCheckRequest::default()).await.unwrap();

    running.shutdown.cancel();
    // An idle client connection must not hold the server open; the timeout only turns
    // a hang into a failure.
    let stopped = tokio::time::timeout(Duration::from_secs(30), running.task).await;
    stopped.expect("server did not stop").unwrap().unwrap();
}

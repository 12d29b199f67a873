//! The pool against in-process PodService servers speaking TLS on 127.0.0.1 with a
//! certificate from a test CA, as a real agent does with the cluster CA.

use std::{
    collections::VecDeque,
    net::SocketAddr,
    num::NonZeroUsize,
    path::PathBuf,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeStatus};
use kube::api::ObjectMeta;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use stevedore_proto::stevedore::agent::v1::{
    ConditionStatus, SetPodConditionRequest, SetPodConditionResponse,
    pod_service_server::{PodService, PodServiceServer},
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::{
    Code, Request, Response, Status,
    transport::{Identity, Server, ServerTlsConfig, server::TcpIncoming},
};

use super::*;
use crate::runtime::metrics::Metrics;

/// A CA and a serving certificate for 127.0.0.1 signed by it, in PEM.
struct Pki {
    ca_pem: String,
    server: Identity,
}

fn pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().expect("CA key");
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);

    let server_params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("params");
    let server_key = KeyPair::generate().expect("server key");
    let server_cert = server_params
        .signed_by(&server_key, &issuer)
        .expect("server certificate");
    Pki {
        ca_pem: ca_cert.pem(),
        server: Identity::from_pem(server_cert.pem(), server_key.serialize_pem()),
    }
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "stevedore-agents-{}-{test}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }

    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write temp file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How the fake agent answers.
#[derive(Clone, Copy)]
enum Pace {
    /// At once.
    Prompt,
    /// After this long, so concurrent calls overlap.
    Slow(Duration),
    /// Never.
    Hang,
}

/// What the fake agent saw, and the failures it still has to return.
#[derive(Default)]
struct Seen {
    calls: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    authorizations: Mutex<Vec<Option<String>>>,
    requests: Mutex<Vec<SetPodConditionRequest>>,
    failures: Mutex<VecDeque<Code>>,
}

impl Seen {
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

struct FakeAgent {
    seen: Arc<Seen>,
    pace: Pace,
}

/// Counts a call as in flight until dropped, also when the client gives up on it.
struct InFlight<'a>(&'a Seen);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tonic::async_trait]
impl PodService for FakeAgent {
    async fn set_pod_condition(
        &self,
        request: Request<SetPodConditionRequest>,
    ) -> Result<Response<SetPodConditionResponse>, Status> {
        let seen = &self.seen;
        seen.calls.fetch_add(1, Ordering::SeqCst);
        let now = seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        let _in_flight = InFlight(seen);
        seen.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let authorization = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        seen.authorizations
            .lock()
            .expect("lock")
            .push(authorization);
        seen.requests
            .lock()
            .expect("lock")
            .push(request.into_inner());
        match self.pace {
            Pace::Prompt => {}
            Pace::Slow(delay) => tokio::time::sleep(delay).await,
            Pace::Hang => std::future::pending::<()>().await,
        }
        let failure = seen.failures.lock().expect("lock").pop_front();
        match failure {
            Some(code) => Err(Status::new(code, "scripted failure")),
            None => Ok(Response::new(SetPodConditionResponse {})),
        }
    }
}

/// A fake agent serving TLS on 127.0.0.1, stopped on drop.
struct Running {
    addr: SocketAddr,
    seen: Arc<Seen>,
    shutdown: CancellationToken,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn start_agent(pki: &Pki, pace: Pace, failures: &[Code]) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local address");
    let seen = Arc::new(Seen {
        failures: Mutex::new(failures.iter().copied().collect()),
        ..Seen::default()
    });
    let shutdown = CancellationToken::new();
    let server = Server::builder()
        .tls_config(ServerTlsConfig::new().identity(pki.server.clone()))
        .expect("server TLS")
        .add_service(PodServiceServer::new(FakeAgent {
            seen: seen.clone(),
            pace,
        }))
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener),
            shutdown.clone().cancelled_owned(),
        );
    tokio::spawn(server);
    Running {
        addr,
        seen,
        shutdown,
    }
}

/// A Node whose agent listens on `addr`: the IP as InternalIP, the port in the
/// per-node annotation (the default port of the test pools is never used).
fn node(addr: SocketAddr) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("node-a".into()),
            annotations: Some([(AGENT_PORT_ANNOTATION.to_owned(), addr.port().to_string())].into()),
            ..ObjectMeta::default()
        },
        status: Some(NodeStatus {
            addresses: Some(vec![NodeAddress {
                type_: "InternalIP".into(),
                address: addr.ip().to_string(),
            }]),
            ..NodeStatus::default()
        }),
        ..Node::default()
    }
}

fn config(ca_file: PathBuf, max_concurrent_rpcs: usize) -> AgentPoolConfig {
    AgentPoolConfig {
        default_port: 1,
        ca_file,
        signer_ca: None,
        token: TokenSource::Static("test-token".into()),
        connect_timeout: Duration::from_secs(5),
        rpc_timeout: Duration::from_secs(10),
        max_concurrent_rpcs: NonZeroUsize::new(max_concurrent_rpcs).expect("non-zero"),
        retry: RetryPolicy {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
        },
    }
}

fn pod() -> PodRef {
    PodRef {
        namespace: "default".into(),
        name: "web-0".into(),
        uid: "uid-1".into(),
    }
}

async fn set_ready(pool: &AgentPool, node: &Node) -> Result<(), AgentError> {
    pool.set_pod_condition(
        node,
        pod(),
        "InPlaceUpdateReady",
        true,
        "Test",
        "set by test",
    )
    .await
}

/// A pool trusting `pki`'s CA, and its metrics.
fn pool(dir: &TempDir, pki: &Pki, max_concurrent_rpcs: usize) -> (AgentPool, Metrics) {
    let ca = dir.write("ca.crt", &pki.ca_pem);
    let metrics = Metrics::new();
    let pool = AgentPool::new(config(ca, max_concurrent_rpcs), metrics.clone()).expect("pool");
    (pool, metrics)
}

fn has_line(metrics: &Metrics, line: &str) -> bool {
    let text = metrics.encode().expect("encodes");
    text.lines().any(|l| l == line)
}

#[tokio::test]
async fn request_arrives_over_tls_with_the_bearer_token() {
    let (dir, pki) = (TempDir::new("token"), pki());
    let agent = start_agent(&pki, Pace::Prompt, &[]).await;
    let (pool, metrics) = pool(&dir, &pki, 4);

    set_ready(&pool, &node(agent.addr))
        .await
        .expect("call succeeds");

    assert_eq!(
        *agent.seen.authorizations.lock().expect("lock"),
        [Some("Bearer test-token".to_owned())]
    );
    let requests = agent.seen.requests.lock().expect("lock").clone();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].pod, Some(pod()));
    assert_eq!(requests[0].condition_type, "InPlaceUpdateReady");
    assert_eq!(requests[0].status, i32::from(ConditionStatus::True));
    assert_eq!(requests[0].reason, "Test");
    assert!(has_line(
        &metrics,
        "stevedore_controlplane_agent_rpcs_total{method=\"SetPodCondition\",code=\"Ok\"} 1"
    ));
}

#[tokio::test]
async fn accessor_clients_carry_the_bearer_token() {
    let (dir, pki) = (TempDir::new("accessor"), pki());
    let agent = start_agent(&pki, Pace::Prompt, &[]).await;
    let (pool, _) = pool(&dir, &pki, 4);

    let mut client = pool.pods(&node(agent.addr)).await.expect("client");
    client
        .set_pod_condition(SetPodConditionRequest {
            pod: Some(pod()),
            condition_type: "KruisePodReady".into(),
            status: ConditionStatus::False.into(),
            reason: String::new(),
            message: String::new(),
        })
        .await
        .expect("call succeeds");

    assert_eq!(
        *agent.seen.authorizations.lock().expect("lock"),
        [Some("Bearer test-token".to_owned())]
    );
}

#[tokio::test]
async fn unavailable_twice_then_ok_is_retried_until_it_succeeds() {
    let (dir, pki) = (TempDir::new("retry"), pki());
    let failures = [Code::Unavailable, Code::Unavailable];
    let agent = start_agent(&pki, Pace::Prompt, &failures).await;
    let (pool, metrics) = pool(&dir, &pki, 4);

    set_ready(&pool, &node(agent.addr))
        .await
        .expect("third try succeeds");

    assert_eq!(agent.seen.calls(), 3);
    for line in [
        "stevedore_controlplane_agent_rpcs_total{method=\"SetPodCondition\",code=\"Unavailable\"} 2",
        "stevedore_controlplane_agent_rpcs_total{method=\"SetPodCondition\",code=\"Ok\"} 1",
        "stevedore_controlplane_agent_rpc_duration_seconds_count{method=\"SetPodCondition\"} 3",
    ] {
        assert!(has_line(&metrics, line), "missing {line:?}");
    }
}

#[tokio::test]
async fn retries_stop_after_the_last_attempt() {
    let (dir, pki) = (TempDir::new("exhaust"), pki());
    let agent = start_agent(&pki, Pace::Prompt, &[Code::Unavailable; 10]).await;
    let (pool, _) = pool(&dir, &pki, 4);

    let err = set_ready(&pool, &node(agent.addr))
        .await
        .expect_err("fails");

    assert_eq!(agent.seen.calls(), 4, "max_attempts tries, no more");
    assert_eq!(err.code(), Some(Code::Unavailable));
    assert!(err.is_unreachable(), "{err}");
}

#[tokio::test]
async fn rejections_are_not_retried() {
    for code in [
        Code::PermissionDenied,
        Code::Unauthenticated,
        Code::InvalidArgument,
        Code::NotFound,
        Code::FailedPrecondition,
    ] {
        let (dir, pki) = (TempDir::new("denied"), pki());
        let agent = start_agent(&pki, Pace::Prompt, &[code]).await;
        let (pool, _) = pool(&dir, &pki, 4);

        let err = set_ready(&pool, &node(agent.addr))
            .await
            .expect_err("rejected");

        assert_eq!(agent.seen.calls(), 1, "{code:?} was retried");
        assert_eq!(err.code(), Some(code));
        assert!(!err.is_unreachable(), "{code:?}");
        let text = err.to_string();
        assert!(
            text.contains("node-a") && text.contains(&agent.addr.to_string()),
            "{text}"
        );
    }
}

#[tokio::test]
async fn concurrency_cap_bounds_calls_in_flight_at_the_agent() {
    let (dir, pki) = (TempDir::new("cap"), pki());
    let agent = start_agent(&pki, Pace::Slow(Duration::from_millis(50)), &[]).await;
    let (pool, _) = pool(&dir, &pki, 2);
    let node = node(agent.addr);

    let calls: Vec<_> = (0..5)
        .map(|_| {
            let (pool, node) = (pool.clone(), node.clone());
            tokio::spawn(async move { set_ready(&pool, &node).await })
        })
        .collect();
    for call in calls {
        call.await.expect("task").expect("call succeeds");
    }

    assert_eq!(agent.seen.calls(), 5);
    // Exactly 2: never more (the cap), and the calls did overlap (the cap was reached),
    // so the test would notice a pool that serialised calls instead.
    assert_eq!(agent.seen.max_in_flight.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn hung_agent_hits_the_deadline_and_is_unreachable() {
    let (dir, pki) = (TempDir::new("deadline"), pki());
    let agent = start_agent(&pki, Pace::Hang, &[]).await;
    let ca = dir.write("ca.crt", &pki.ca_pem);
    let config = AgentPoolConfig {
        rpc_timeout: Duration::from_millis(100),
        retry: RetryPolicy {
            max_attempts: 2,
            ..config(ca.clone(), 4).retry
        },
        ..config(ca, 4)
    };
    let pool = AgentPool::new(config, Metrics::new()).expect("pool");

    let err = set_ready(&pool, &node(agent.addr))
        .await
        .expect_err("times out");

    assert_eq!(err.code(), Some(Code::DeadlineExceeded));
    assert!(err.is_unreachable());
    assert_eq!(agent.seen.calls(), 2, "a deadline is retried");
}

#[tokio::test]
async fn dead_address_is_unreachable() {
    let (dir, pki) = (TempDir::new("dead"), pki());
    let addr = {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        listener.local_addr().expect("local address")
    };
    let (pool, metrics) = pool(&dir, &pki, 4);

    let err = set_ready(&pool, &node(addr))
        .await
        .expect_err("nobody listens");

    assert!(err.is_unreachable(), "{err:?}");
    assert_eq!(err.code(), Some(Code::Unavailable));
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
    assert!(
        has_line(
            &metrics,
            "stevedore_controlplane_agent_rpcs_total{method=\"SetPodCondition\",code=\"Unavailable\"} 4"
        ),
        "each connect attempt is retried and counted"
    );
}

#[tokio::test]
async fn agent_with_a_certificate_from_another_ca_is_not_trusted() {
    let (dir, pki, other) = (TempDir::new("untrusted"), pki(), pki());
    let agent = start_agent(&other, Pace::Prompt, &[]).await;
    let (pool, _) = pool(&dir, &pki, 4);

    let err = set_ready(&pool, &node(agent.addr))
        .await
        .expect_err("untrusted");

    assert_eq!(err.code(), Some(Code::Unavailable), "{err:?}");
    assert_eq!(agent.seen.calls(), 0, "no request reached the impostor");
}

#[tokio::test]
async fn changed_node_address_opens_a_new_channel() {
    let (dir, pki) = (TempDir::new("moved"), pki());
    let before = start_agent(&pki, Pace::Prompt, &[]).await;
    let after = start_agent(&pki, Pace::Prompt, &[]).await;
    let (pool, _) = pool(&dir, &pki, 4);

    set_ready(&pool, &node(before.addr))
        .await
        .expect("first address");
    set_ready(&pool, &node(after.addr))
        .await
        .expect("second address");

    assert_eq!((before.seen.calls(), after.seen.calls()), (1, 1));
}

#[tokio::test]
async fn unusable_ca_file_is_an_error_naming_the_path() {
    let dir = TempDir::new("ca");
    let garbage = dir.write("garbage.crt", "not a certificate\n");
    let missing = dir.0.join("missing.crt");
    for path in [garbage, missing] {
        let err = AgentPool::new(config(path.clone(), 1), Metrics::new()).expect_err("bad CA");
        assert!(matches!(err, AgentError::Ca { .. }), "{err:?}");
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
    }
}

/// Answers every request with a token that is the audience itself.
struct AudienceEcho;

impl TokenIssuer for AudienceEcho {
    fn issue<'a>(&'a self, audience: &'a str) -> IssueFuture<'a> {
        Box::pin(async move {
            Ok(IssuedToken {
                token: audience.to_owned(),
                valid_for: TOKEN_LIFETIME,
            })
        })
    }
}

#[tokio::test]
async fn each_agent_receives_the_token_for_its_own_node() {
    let (dir, pki) = (TempDir::new("per-node"), pki());
    let (agent_a, agent_b) = (
        start_agent(&pki, Pace::Prompt, &[]).await,
        start_agent(&pki, Pace::Prompt, &[]).await,
    );
    let ca = dir.write("ca.crt", &pki.ca_pem);
    let config = AgentPoolConfig {
        token: TokenSource::PerNode {
            audience_prefix: "stevedore-agent".into(),
            issuer: Arc::new(AudienceEcho),
        },
        ..config(ca, 4)
    };
    let pool = AgentPool::new(config, Metrics::new()).expect("pool");
    let named = |addr, name: &str| {
        let mut node = node(addr);
        node.metadata.name = Some(name.to_owned());
        node
    };

    set_ready(&pool, &named(agent_a.addr, "node-a"))
        .await
        .expect("call to A succeeds");
    set_ready(&pool, &named(agent_b.addr, "node-b"))
        .await
        .expect("call to B succeeds");

    let seen = |agent: &Running| agent.seen.authorizations.lock().expect("lock").clone();
    assert_eq!(
        seen(&agent_a),
        [Some("Bearer stevedore-agent:node-a".to_owned())]
    );
    assert_eq!(
        seen(&agent_b),
        [Some("Bearer stevedore-agent:node-b".to_owned())]
    );
}

#[tokio::test]
async fn an_agent_certified_by_the_signer_ca_is_trusted_beside_the_file() {
    let (dir, file_pki, signer_pki) = (TempDir::new("signer-ca"), pki(), pki());
    let agent = start_agent(&signer_pki, Pace::Prompt, &[]).await;
    let ca_file = dir.write("ca.crt", &file_pki.ca_pem);
    let without = AgentPool::new(config(ca_file.clone(), 4), Metrics::new()).expect("pool");
    let err = set_ready(&without, &node(agent.addr))
        .await
        .expect_err("the file's CA alone does not trust it");
    assert_eq!(err.code(), Some(Code::Unavailable), "{err:?}");

    let with = AgentPool::new(
        AgentPoolConfig {
            signer_ca: Some(signer_pki.ca_pem.clone()),
            ..config(ca_file, 4)
        },
        Metrics::new(),
    )
    .expect("pool");
    set_ready(&with, &node(agent.addr))
        .await
        .expect("trusted through the signer CA");
}

#[tokio::test]
async fn a_rotated_ca_file_is_trusted_after_a_reload_without_a_new_pool() {
    let (dir, old, rotated) = (TempDir::new("ca-reload"), pki(), pki());
    let agent = start_agent(&rotated, Pace::Prompt, &[]).await;
    let (pool, _) = pool(&dir, &old, 4);
    set_ready(&pool, &node(agent.addr))
        .await
        .expect_err("not trusted before the rotation");
    assert!(!pool.reload_ca().expect("reads"), "nothing changed yet");

    dir.write("ca.crt", &rotated.ca_pem);
    assert!(pool.reload_ca().expect("reads"), "the bundle changed");

    set_ready(&pool, &node(agent.addr))
        .await
        .expect("trusted after the reload");
}

#[tokio::test]
async fn a_broken_ca_file_keeps_the_current_bundle() {
    let (dir, pki) = (TempDir::new("ca-broken"), pki());
    let agent = start_agent(&pki, Pace::Prompt, &[]).await;
    let (pool, _) = pool(&dir, &pki, 4);
    dir.write("ca.crt", "not a certificate");
    pool.reload_ca().expect_err("unusable bundle");
    set_ready(&pool, &node(agent.addr))
        .await
        .expect("still trusted with the bundle read before");
}

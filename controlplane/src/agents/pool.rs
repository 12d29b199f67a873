//! The pool of gRPC channels to node agents, and the one path every unary call takes:
//! address → channel → token → concurrency permit → deadline → metrics → retry.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Node;
use stevedore_proto::stevedore::agent::v1::{
    ConditionStatus, PodRef, SetPodConditionRequest,
    container_service_client::ContainerServiceClient, image_service_client::ImageServiceClient,
    node_service_client::NodeServiceClient, pod_service_client::PodServiceClient,
    probe_service_client::ProbeServiceClient,
};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tonic::{
    Code, Status,
    service::interceptor::InterceptedService,
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint},
};
use tracing::Instrument;

use super::{
    AgentError, AgentPoolConfig, BearerAuth, CaSource, RetryPolicy, node_agent_address,
    retry::next_retry, token::Tokens,
};
use crate::runtime::metrics::Metrics;

/// A channel to one agent that adds the bearer token to every request.
pub type AgentChannel = InterceptedService<Channel, BearerAuth>;

/// Clients for every node's agent. Cheap to clone; clones share channels, the per-node
/// tokens and the concurrency cap.
///
/// One HTTP/2 connection per node, opened on first use and re-opened by tonic after it
/// breaks; kept until the node's address changes or [`AgentPool::forget`] drops it.
#[derive(Clone)]
pub struct AgentPool {
    inner: Arc<Inner>,
}

struct Inner {
    default_port: u16,
    ca_source: CaSource,
    /// The PEM bundle new channels trust; swapped (and the channels dropped) under the
    /// `channels` lock when the bundle changes.
    ca: Mutex<Vec<u8>>,
    connect_timeout: Duration,
    rpc_timeout: Duration,
    retry: RetryPolicy,
    tokens: Tokens,
    permits: Semaphore,
    channels: Mutex<HashMap<String, (SocketAddr, Channel)>>,
    metrics: Metrics,
}

impl std::fmt::Debug for AgentPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentPool")
            .field("default_port", &self.inner.default_port)
            .field("rpc_timeout", &self.inner.rpc_timeout)
            .finish_non_exhaustive()
    }
}

impl AgentPool {
    /// A pool with no connections yet. Reads the CA bundle now, so a missing or empty
    /// one stops the control plane at start instead of failing every call later.
    pub fn new(config: AgentPoolConfig, metrics: Metrics) -> Result<Self, AgentError> {
        let ca_source = CaSource {
            file: config.ca_file,
            signer_ca: config.signer_ca,
        };
        let ca = ca_source.read()?;
        Ok(Self {
            inner: Arc::new(Inner {
                default_port: config.default_port,
                ca_source,
                ca: Mutex::new(ca),
                connect_timeout: config.connect_timeout,
                rpc_timeout: config.rpc_timeout,
                retry: config.retry,
                tokens: Tokens::new(config.token),
                permits: Semaphore::new(config.max_concurrent_rpcs.get()),
                channels: Mutex::new(HashMap::new()),
                metrics,
            }),
        })
    }

    /// Sets one condition on one pod through the agent of the pod's node. Idempotent on
    /// the agent side, so it is retried on transient failures.
    pub async fn set_pod_condition(
        &self,
        node: &Node,
        pod: PodRef,
        condition_type: &str,
        status: bool,
        reason: &str,
        message: &str,
    ) -> Result<(), AgentError> {
        let status = if status {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        };
        let request = SetPodConditionRequest {
            pod: Some(pod),
            condition_type: condition_type.to_owned(),
            status: status.into(),
            reason: reason.to_owned(),
            message: message.to_owned(),
        };
        self.call(node, "SetPodCondition", move |channel| {
            let request = request.clone();
            async move {
                PodServiceClient::new(channel)
                    .set_pod_condition(request)
                    .await
            }
        })
        .await
        .map(drop)
    }

    /// Sends a unary call to `node`'s agent the way every pool call goes: under the
    /// concurrency cap, with the per-attempt deadline, counted in the metrics, inside a
    /// span naming the node and `method`, and retried with backoff on transient
    /// failures. `send` makes one attempt on the channel it is given, so it must be
    /// safe to repeat (idempotent).
    pub async fn call<T, F, Fut>(
        &self,
        node: &Node,
        method: &'static str,
        mut send: F,
    ) -> Result<T, AgentError>
    where
        F: FnMut(AgentChannel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let name = node_name(node);
        let addr = node_agent_address(node, self.inner.default_port)?;
        let span = tracing::info_span!("agent_rpc", node = %name, %addr, method);
        async {
            let mut attempt = 1;
            loop {
                let status = match self.attempt(&name, addr, method, &mut send).await? {
                    Ok(response) => return Ok(response),
                    Err(status) => status,
                };
                let Some(delay) =
                    next_retry(&self.inner.retry, status.code(), attempt, fastrand::f64())
                else {
                    return Err(AgentError::Rpc {
                        node: name,
                        addr,
                        method,
                        status,
                    });
                };
                tracing::debug!(
                    attempt,
                    code = ?status.code(),
                    message = status.message(),
                    delay_ms = delay.as_millis(),
                    "agent call failed; retrying"
                );
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
        }
        .instrument(span)
        .await
    }

    /// One try: the permit is held only while the call is in flight, so calls waiting
    /// out a backoff leave room for others.
    async fn attempt<T, F, Fut>(
        &self,
        name: &str,
        addr: SocketAddr,
        method: &'static str,
        send: &mut F,
    ) -> Result<Result<T, Status>, AgentError>
    where
        F: FnMut(AgentChannel) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let channel = self.authenticated(name, addr).await?;
        let Ok(_permit) = self.inner.permits.acquire().await else {
            // The semaphore is never closed; answer as for any unavailable agent.
            return Ok(Err(Status::unavailable("agent call limiter closed")));
        };
        let started = Instant::now();
        let result = match tokio::time::timeout(self.inner.rpc_timeout, send(channel)).await {
            Ok(result) => result.map(tonic::Response::into_inner),
            // Enforced here rather than with a `grpc-timeout` header, because tonic
            // reports its own expiry of that header as CANCELLED, which is not retryable.
            Err(_) => Err(Status::deadline_exceeded(format!(
                "no answer within {:?}",
                self.inner.rpc_timeout
            ))),
        };
        let code = result.as_ref().map_or_else(Status::code, |_| Code::Ok);
        self.inner
            .metrics
            .observe_agent_rpc(method, code, started.elapsed().as_secs_f64());
        Ok(result)
    }

    /// An authenticated ImageService client for `node`'s agent, for streaming calls
    /// (`PullImage`, `WatchImageList`) and others the pool has no method for. Such calls
    /// are outside the concurrency cap, deadline, retries and metrics; the token is the
    /// one current now, so get a new client for each operation rather than keeping one.
    pub async fn images(
        &self,
        node: &Node,
    ) -> Result<ImageServiceClient<AgentChannel>, AgentError> {
        Ok(ImageServiceClient::new(self.channel_for(node).await?))
    }

    /// An authenticated ContainerService client for `node`'s agent; see [`Self::images`].
    pub async fn containers(
        &self,
        node: &Node,
    ) -> Result<ContainerServiceClient<AgentChannel>, AgentError> {
        Ok(ContainerServiceClient::new(self.channel_for(node).await?))
    }

    /// An authenticated PodService client for `node`'s agent; see [`Self::images`].
    pub async fn pods(&self, node: &Node) -> Result<PodServiceClient<AgentChannel>, AgentError> {
        Ok(PodServiceClient::new(self.channel_for(node).await?))
    }

    /// An authenticated NodeService client for `node`'s agent; see [`Self::images`].
    pub async fn node(&self, node: &Node) -> Result<NodeServiceClient<AgentChannel>, AgentError> {
        Ok(NodeServiceClient::new(self.channel_for(node).await?))
    }

    /// An authenticated ProbeService client for `node`'s agent; see [`Self::images`].
    pub async fn probes(
        &self,
        node: &Node,
    ) -> Result<ProbeServiceClient<AgentChannel>, AgentError> {
        Ok(ProbeServiceClient::new(self.channel_for(node).await?))
    }

    /// Drops the channel to a node, e.g. once the Node is deleted, so the pool does not
    /// keep connections to nodes that are gone.
    pub fn forget(&self, node_name: &str) {
        self.lock_channels().remove(node_name);
        self.inner.tokens.forget(node_name);
    }

    /// Reads the CA bundle again; if it changed, trusts the new one and drops every
    /// channel, so the next call to each agent connects verifying against it. Returns
    /// whether it changed; on an error the current bundle stays in use.
    pub fn reload_ca(&self) -> Result<bool, AgentError> {
        let bundle = self.inner.ca_source.read()?;
        let mut channels = self.lock_channels();
        let mut ca = lock(&self.inner.ca);
        if *ca == bundle {
            return Ok(false);
        }
        *ca = bundle;
        channels.clear();
        Ok(true)
    }

    /// Calls [`Self::reload_ca`] every `period` until `shutdown`.
    pub async fn reload_ca_every(self, period: Duration, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(period) => {}
            }
            match self.reload_ca() {
                Ok(true) => tracing::info!("agent CA bundle changed; reconnecting to agents"),
                Ok(false) => {}
                Err(err) => tracing::warn!(error = %err, "agent CA bundle not reloaded"),
            }
        }
    }

    async fn channel_for(&self, node: &Node) -> Result<AgentChannel, AgentError> {
        let addr = node_agent_address(node, self.inner.default_port)?;
        self.authenticated(&node_name(node), addr).await
    }

    async fn authenticated(
        &self,
        name: &str,
        addr: SocketAddr,
    ) -> Result<AgentChannel, AgentError> {
        let auth = self.inner.tokens.for_node(name).await?;
        Ok(InterceptedService::new(self.channel(name, addr)?, auth))
    }

    /// The node's channel, created on first use or when the node's address changed.
    fn channel(&self, name: &str, addr: SocketAddr) -> Result<Channel, AgentError> {
        let mut channels = self.lock_channels();
        if let Some((known, channel)) = channels.get(name)
            && *known == addr
        {
            return Ok(channel.clone());
        }
        let channel = self.endpoint(name, addr)?.connect_lazy();
        channels.insert(name.to_owned(), (addr, channel.clone()));
        Ok(channel)
    }

    fn endpoint(&self, name: &str, addr: SocketAddr) -> Result<Endpoint, AgentError> {
        let endpoint_error = |source| AgentError::Endpoint {
            node: name.to_owned(),
            addr,
            source,
        };
        // The agent's certificate names the node IP; verify against it explicitly so
        // IPv6 addresses (bracketed in the URI) match their SAN too.
        let ca = Certificate::from_pem(lock(&self.inner.ca).as_slice());
        let tls = ClientTlsConfig::new()
            .ca_certificate(ca)
            .domain_name(addr.ip().to_string());
        Ok(Endpoint::from_shared(format!("https://{addr}"))
            .map_err(endpoint_error)?
            .tls_config(tls)
            .map_err(endpoint_error)?
            .connect_timeout(self.inner.connect_timeout)
            // Notice a node that vanished without closing the connection, so the next
            // call reconnects instead of waiting out its deadline on a dead socket.
            .http2_keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(10)))
    }

    fn lock_channels(&self) -> std::sync::MutexGuard<'_, HashMap<String, (SocketAddr, Channel)>> {
        lock(&self.inner.channels)
    }
}

/// Locks a mutex whose contents are replaced whole, so a poisoned one is still consistent.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn node_name(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

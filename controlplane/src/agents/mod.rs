//! The control plane's clients for the node agents' gRPC API.
//!
//! Every node runs an agent serving TLS on `<InternalIP>:<agent port>` (a certificate
//! from the cluster CA with the node IP as SAN) and demanding a bearer token with the
//! `stevedore-agent` audience. [`AgentPool`] keeps one lazily opened channel per node and
//! sends unary calls under a global concurrency cap, with a per-attempt deadline and
//! retries of transient failures; its errors tell reconcilers whether the agent was
//! unreachable (wait and retry) or refused the call (report it).
//!
//! Per-node port override: a Node annotated `agent.stevedore.dev/port: "<port>"`
//! ([`AGENT_PORT_ANNOTATION`]) is called on that port instead of `--agent-port`, for
//! simulated nodes that share one IP and each run their own agent process.

mod address;
mod config;
mod error;
mod pool;
mod retry;
mod token;

#[cfg(test)]
mod tests;

pub use address::{AGENT_PORT_ANNOTATION, node_agent_address};
pub use config::{AgentPoolConfig, DEFAULT_CONNECT_TIMEOUT};
pub use error::AgentError;
pub use pool::{AgentChannel, AgentPool};
pub use retry::{RetryPolicy, backoff, is_retryable, next_retry};
pub use stevedore_proto::stevedore::agent::v1::PodRef;
pub use token::{BearerAuth, TOKEN_REREAD_AFTER, TokenSource};

//! What an [`AgentPool`](super::AgentPool) needs to know, apart from the nodes.

use std::{num::NonZeroUsize, path::PathBuf, time::Duration};

use super::{BoundPod, KubeTokenIssuer, RetryPolicy, TokenSource};
use crate::config::Args;

/// How long to wait for a TCP + TLS connection to an agent. Short, because an agent that
/// does not accept within seconds is down, and the retry policy tries again anyway.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Settings of the agent client pool.
#[derive(Debug, Clone)]
pub struct AgentPoolConfig {
    /// Agent port on each node's InternalIP, unless the Node overrides it with the
    /// `agent.stevedore.dev/port` annotation.
    pub default_port: u16,
    /// PEM bundle of CAs that signed agents' serving certificates (re-read by
    /// [`AgentPool::reload_ca`](super::AgentPool::reload_ca)).
    pub ca_file: PathBuf,
    /// The control plane's own signer CA (PEM), trusted as well.
    pub signer_ca: Option<String>,
    /// The bearer tokens presented to agents.
    pub token: TokenSource,
    /// Limit on connecting (TCP and TLS) to one agent.
    pub connect_timeout: Duration,
    /// Deadline of one attempt of a unary call.
    pub rpc_timeout: Duration,
    /// Unary calls in flight at once across all nodes, so a rollout over many nodes
    /// cannot flood the agents (each of which calls the apiserver in turn).
    pub max_concurrent_rpcs: NonZeroUsize,
    /// When and how often to try a failed call again.
    pub retry: RetryPolicy,
}

impl AgentPoolConfig {
    /// The pool settings from the command line; agent tokens are requested with `client`.
    pub fn from_args(args: &Args, client: kube::Client) -> Self {
        let bound_pod = args
            .identity
            .clone()
            .zip(args.pod_uid.clone())
            .map(|(name, uid)| BoundPod { name, uid });
        let issuer = KubeTokenIssuer::new(
            client,
            &args.namespace,
            args.service_account.clone(),
            bound_pod,
        );
        Self {
            default_port: args.agent_port,
            ca_file: args.agent_ca_file.clone(),
            signer_ca: None,
            token: TokenSource::PerNode {
                audience_prefix: args.agent_token_audience.clone(),
                issuer,
            },
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            rpc_timeout: Duration::from_secs(args.agent_rpc_timeout),
            max_concurrent_rpcs: args.max_concurrent_agent_rpcs,
            retry: RetryPolicy::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[tokio::test]
    async fn built_from_the_command_line() {
        let args = Args::try_parse_from([
            "controlplane",
            "--agent-port",
            "20350",
            "--agent-ca-file",
            "/etc/ca.pem",
            "--agent-token-audience",
            "agents",
            "--agent-rpc-timeout",
            "7",
            "--max-concurrent-agent-rpcs",
            "5",
        ])
        .expect("valid arguments");
        let client = kube::Client::try_from(kube::Config::new(
            "http://127.0.0.1:9".parse().expect("valid URI"),
        ))
        .expect("client");
        let config = AgentPoolConfig::from_args(&args, client);
        assert_eq!(config.default_port, 20350);
        assert_eq!(config.ca_file, PathBuf::from("/etc/ca.pem"));
        assert!(
            matches!(&config.token, TokenSource::PerNode { audience_prefix, .. } if audience_prefix == "agents"),
            "{:?}",
            config.token
        );
        assert_eq!(config.rpc_timeout, Duration::from_secs(7));
        assert_eq!(config.max_concurrent_rpcs.get(), 5);
    }
}

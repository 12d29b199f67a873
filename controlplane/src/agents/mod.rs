//! The control plane's clients for the node agents' gRPC API.
//!
//! Every node runs an agent serving TLS on `<InternalIP>:<agent port>` (a certificate
//! with the node IP as SAN, from the control plane's signer CA or a CA in
//! `--agent-ca-file`: [`CaSource`]) and demanding a bearer token bound to its
//! own node's audience `stevedore-agent:<node>`, which the pool requests per node with
//! the TokenRequest API ([`TokenIssuer`]). [`AgentPool`] keeps one lazily opened channel per node and
//! sends unary calls under a global concurrency cap, with a per-attempt deadline and
//! retries of transient failures; its errors tell reconcilers whether the agent was
//! unreachable (wait and retry) or refused the call (report it).
//!
//! Per-node port override: a Node annotated `agent.stevedore.dev/port: "<port>"`
//! ([`AGENT_PORT_ANNOTATION`]) is called on that port instead of `--agent-port`, for
//! simulated nodes that share one IP and each run their own agent process.

mod ca_bundle;
mod config;
mod error;
pub(crate) mod node_sessions;
mod node_tokens;
mod pool;
mod restarts;
mod retry;
mod token;
mod token_request;

#[cfg(test)]
mod tests;

pub use ca_bundle::CaSource;
pub use config::{AgentPoolConfig, DEFAULT_CONNECT_TIMEOUT};
pub use error::AgentError;
pub use node_tokens::{node_audience, renew_after};
pub use pool::{AgentChannel, AgentPool};
pub use retry::{RetryPolicy, backoff, is_retryable, next_retry};
/// Where a node's agent listens: part of the API, which the kubectl plugin shares.
pub use stevedore_api::node_agent::{AGENT_PORT_ANNOTATION, node_agent_address};
pub use stevedore_proto::stevedore::agent::v1::PodRef;
pub use token::{BearerAuth, TokenSource};
pub use token_request::{
    BoundPod, IssueFuture, IssuedToken, KubeTokenIssuer, TOKEN_LIFETIME, TokenIssuer,
};

mod conditions {
    //! The pool as the reconcilers' way to set pod conditions.

    use k8s_openapi::api::core::v1::Node;

    use super::{AgentPool, PodRef};
    use crate::containerrecreate::agent::{AgentFailure, ContainerRestarts};
    use crate::containerrecreate::plan::RestartRequest;
    use crate::controller::pod_conditions::{
        ConditionError, ConditionFuture, ConditionRequest, PodConditions, PodTarget,
    };

    impl PodConditions for AgentPool {
        fn set_condition<'a>(
            &'a self,
            node: &'a Node,
            pod: PodTarget,
            request: ConditionRequest<'a>,
        ) -> ConditionFuture<'a> {
            Box::pin(async move {
                let pod = PodRef {
                    namespace: pod.namespace,
                    name: pod.name,
                    uid: pod.uid,
                };
                self.set_pod_condition(
                    node,
                    pod,
                    request.condition_type,
                    request.status,
                    request.reason,
                    request.message,
                )
                .await
                .map_err(|err| ConditionError {
                    unreachable: err.is_unreachable(),
                    message: err.to_string(),
                })
            })
        }

        fn restart_containers<'a>(
            &'a self,
            node: &'a Node,
            pod: PodTarget,
            containers: &'a [String],
        ) -> ConditionFuture<'a> {
            Box::pin(async move {
                let request = RestartRequest {
                    node: node.metadata.name.clone().unwrap_or_default(),
                    namespace: pod.namespace,
                    pod_name: pod.name,
                    pod_uid: pod.uid,
                    containers: containers.to_vec(),
                    ordered: false,
                    termination_grace_period_seconds: None,
                    unready_grace_period_seconds: 0,
                    min_started_seconds: 0,
                };
                match ContainerRestarts::start(self, node, &request).await {
                    Ok(_operation) => Ok(()),
                    Err(failure) => Err(ConditionError {
                        unreachable: matches!(
                            failure,
                            AgentFailure::Unreachable(_) | AgentFailure::Busy(_)
                        ),
                        message: failure.to_string(),
                    }),
                }
            })
        }
    }
}

//! Why a call to a node's agent failed, and whether waiting can fix it.

use std::{net::SocketAddr, path::PathBuf};

use stevedore_api::node_agent::NodeAddressError;
use tonic::Code;

use super::retry::is_retryable;

/// A failed agent call, or a pool that could not be built.
///
/// Reconcilers care about one distinction: an *unreachable* agent (down, restarting,
/// overloaded, network trouble) is worth a condition on the object and a later retry,
/// while a *refused* call (bad request, no permission, stale pod UID) will fail the same
/// way again until something else changes.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The Node gives no address for its agent (no InternalIP yet, or a malformed one).
    #[error(transparent)]
    Address(#[from] NodeAddressError),

    /// The agent answered with a gRPC status, or the transport failed (tonic reports
    /// connect failures as UNAVAILABLE), or the per-call deadline passed.
    #[error("agent of node {node} at {addr}: {method} failed: {}", in_words(.status))]
    Rpc {
        node: String,
        addr: SocketAddr,
        method: &'static str,
        #[source]
        status: tonic::Status,
    },

    /// The endpoint for the node's agent could not be configured.
    #[error("agent of node {node} at {addr}: configuring the endpoint")]
    Endpoint {
        node: String,
        addr: SocketAddr,
        #[source]
        source: tonic::transport::Error,
    },

    /// The CA bundle that verifies agent certificates is unreadable or holds no
    /// certificate.
    #[error("agent CA file {path}: {reason}")]
    Ca { path: PathBuf, reason: String },

    /// The apiserver did not issue a token for a node's agent.
    #[error("requesting a token with audience {audience}: {message}")]
    TokenRequest { audience: String, message: String },

    /// The token is empty or cannot be sent in an HTTP header.
    #[error("the agent bearer token is empty or not a valid header value")]
    InvalidToken,
}

/// A gRPC status as a sentence: the agent's (or the transport's) message and what the
/// code means. tonic's own Display appends the Debug dump of the transport error's
/// source chain, which then reached pod conditions and Events.
pub fn in_words(status: &tonic::Status) -> String {
    let meaning = status.code().description();
    if status.message().is_empty() {
        meaning.to_owned()
    } else {
        format!("{} ({})", status.message(), meaning.to_lowercase())
    }
}

impl AgentError {
    /// Whether the agent could not be reached (or could not answer in time), so the
    /// caller should record that and try again later, rather than treat the request as
    /// rejected. A Node without an InternalIP counts: it is usually still joining.
    pub fn is_unreachable(&self) -> bool {
        match self {
            Self::Address(err) => err.is_transient(),
            // The codes the pool retries: after the retries, the agent is still not
            // answering, which is what "unreachable" means to a reconciler.
            Self::Rpc { status, .. } => is_retryable(status.code()),
            Self::Endpoint { .. }
            | Self::Ca { .. }
            | Self::TokenRequest { .. }
            | Self::InvalidToken => false,
        }
    }

    /// The gRPC status code, when the agent (or the transport) produced one.
    pub fn code(&self) -> Option<Code> {
        match self {
            Self::Rpc { status, .. } => Some(status.code()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc(code: Code) -> AgentError {
        AgentError::Rpc {
            node: "node-a".into(),
            addr: "10.0.0.1:10350".parse().expect("valid address"),
            method: "SetPodCondition",
            status: tonic::Status::new(code, "test"),
        }
    }

    #[test]
    fn transient_codes_are_unreachable_and_rejections_are_not() {
        for (code, unreachable) in [
            (Code::Unavailable, true),
            (Code::DeadlineExceeded, true),
            (Code::ResourceExhausted, true),
            (Code::PermissionDenied, false),
            (Code::Unauthenticated, false),
            (Code::InvalidArgument, false),
            (Code::NotFound, false),
            (Code::FailedPrecondition, false),
            (Code::Internal, false),
        ] {
            assert_eq!(rpc(code).is_unreachable(), unreachable, "{code:?}");
        }
    }

    #[test]
    fn a_node_without_an_internal_ip_is_unreachable_and_a_malformed_one_is_not() {
        let no_ip = NodeAddressError::NoInternalIp {
            node: "node-a".into(),
        };
        let bad_ip = NodeAddressError::InvalidInternalIp {
            node: "node-a".into(),
            address: "node-a.local".into(),
        };
        assert!(AgentError::from(no_ip).is_unreachable());
        assert!(!AgentError::from(bad_ip).is_unreachable());
    }

    #[test]
    fn a_status_reads_as_its_message_and_meaning_without_a_debug_dump() {
        let source: Box<dyn std::error::Error + Send + Sync> = "connect refused".into();
        let mut status = tonic::Status::new(Code::Unavailable, "invalid peer certificate");
        status.set_source(source.into());
        let text = AgentError::Rpc {
            node: "node-a".into(),
            addr: "10.0.0.1:10350".parse().expect("valid address"),
            method: "SetPodCondition",
            status,
        }
        .to_string();
        assert_eq!(
            text,
            "agent of node node-a at 10.0.0.1:10350: SetPodCondition failed: \
             invalid peer certificate (the service is currently unavailable)"
        );
        assert_eq!(
            in_words(&tonic::Status::new(Code::DeadlineExceeded, "")),
            "Deadline expired before operation could complete"
        );
    }

    #[test]
    fn message_names_the_node_and_address() {
        let text = rpc(Code::PermissionDenied).to_string();
        assert!(text.contains("node-a"), "{text}");
        assert!(text.contains("10.0.0.1:10350"), "{text}");
        assert!(text.contains("SetPodCondition"), "{text}");
    }
}

//! Why a registry request failed, and the blob stream that can fail that way: below
//! the registry client, so the body reader that checks what the client receives need
//! not import the client.

use std::pin::Pin;

use bytes::Bytes;
use futures::Stream;

use super::hosts::HostsError;

/// Why a registry request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RegistryError {
    #[error("{what} not found in the registry ({url})")]
    NotFound { what: &'static str, url: String },
    #[error("registry refused the credentials ({url})")]
    Unauthorized { url: String },
    #[error("registry denied access ({url})")]
    Forbidden { url: String },
    #[error("registry unreachable ({url}): {detail}")]
    Unreachable { url: String, detail: String },
    #[error("registry answered {status} ({url})")]
    Server { status: u16, url: String },
    #[error("unexpected registry response ({url}): {detail}")]
    Protocol { url: String, detail: String },
    #[error("{what} of {reference} is larger than the limit of {limit} bytes")]
    TooLarge {
        what: &'static str,
        reference: String,
        limit: u64,
    },
    #[error("content of {reference} is corrupt: {detail}")]
    Corrupt { reference: String, detail: String },
    #[error("content of {reference} cannot be verified: {detail}")]
    Unverifiable { reference: String, detail: String },
    #[error(
        "refusing to send the credentials for {reference} to the token endpoint {realm} over plain HTTP; name the registry with --insecure-registry to allow it"
    )]
    InsecureRealm { reference: String, realm: String },
    #[error(transparent)]
    Hosts(#[from] HostsError),
}

impl RegistryError {
    /// Worth another attempt: the network or the server, not the request.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Unreachable { .. } => true,
            Self::Server { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }
}

/// A stream of blob bytes.
pub type BlobStream = Pin<Box<dyn Stream<Item = Result<Bytes, RegistryError>> + Send>>;

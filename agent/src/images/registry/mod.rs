//! The registry client: the distribution API ([`Registry`], [`HttpRegistry`]) and what
//! it stands on, below it in this order:
//! - `credentials` (`Auth`) and `error` (`RegistryError`, `BlobStream`): the client's
//!   vocabulary, defined below the client so that the body reader and the token cache
//!   need not import it
//! - [`body`]: bounded reads and size/digest checks of what registries send;
//!   [`digest`]: the OCI digest algorithms
//! - [`token_cache`]: authorisations kept until they expire, per endpoint and credential
//! - [`hosts`]: containerd's `hosts.toml` (mirrors, plain HTTP, TLS per host)

pub mod body;
mod client;
mod credentials;
pub mod digest;
mod error;
pub mod hosts;
pub mod token_cache;

pub use client::{FetchedBlob, FetchedManifest, HttpRegistry, Registry, challenge_param};
pub use credentials::Auth;
pub use error::{BlobStream, RegistryError};

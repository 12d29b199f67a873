//! Images: pulls done by the agent itself into containerd (so it can report real
//! per-layer progress), the pull manager that dedupes, caps and retries them, the
//! node's declarative image list, and the `ImageService` gRPC API over all of it.
//!
//! - [`oci`]: image formats, platform choice, chain IDs (pure); [`platform`]: the
//!   node's platform and what it runs
//! - [`registry`]: the distribution API ([`registry::Registry`], [`registry::HttpRegistry`]);
//!   [`hosts`]: containerd's `hosts.toml` (mirrors, plain HTTP, TLS per host);
//!   [`body`]: bounded reads and size/digest checks of what registries send;
//!   [`digest`]: the OCI digest algorithms; [`token_cache`]: authorisations kept until
//!   they expire, per endpoint and credential; `credentials` (`Auth`) and
//!   `registry_error` (`RegistryError`, `BlobStream`): the client's vocabulary, defined
//!   below the client so that the body reader and the token cache need not import it
//! - [`store`], [`containerd`]: containerd as the pull needs it ([`store::ImageStore`]);
//!   `containerd_conn`: the namespaced channel the store and its content writer share
//! - [`pull`]: one pull; `pipeline`: its downloads and unpacking, overlapped;
//!   `download`: one blob into the content store; `pull_error`: why a pull failed,
//!   below all three that produce it (re-exported as [`pull::PullError`]);
//!   `unpack_schedule`: which layer may unpack when (pure); [`progress`]: what
//!   watchers see of it; `records`: its image records, all or none; [`source_label`]:
//!   containerd's distribution source labels
//! - [`manager`]: concurrency cap, shared in-flight pulls, timeout, retries;
//!   [`failure`]: how failed pulls map to gRPC codes
//! - [`inventory`]: the images present, as CRI reports them
//! - [`image_list`]: the desired list as a pure state machine; [`list_runner`] drives it
//! - [`service`]: the `ImageService` gRPC API

pub mod body;
pub mod containerd;
mod containerd_conn;
mod content_writer;
mod credentials;
pub mod digest;
mod download;
pub mod failure;
pub mod hosts;
pub mod image_list;
pub mod inventory;
pub mod list_runner;
pub mod manager;
pub mod orphan_leases;
mod partial_downloads;
mod pipeline;
pub mod progress;
pub mod pull;
mod pull_error;
mod records;
pub mod registry;
mod registry_error;
pub mod service;
pub mod source_label;
pub mod store;
pub mod token_cache;
mod unpack_schedule;

pub use service::{AgentImageService, ConnectError, ImageServiceImpl};
/// The image formats and platforms, parsed in `stevedore-parsers` (fuzzed there).
pub use stevedore_parsers::{oci, platform};

#[cfg(test)]
mod testing;

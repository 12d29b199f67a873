//! Images: pulls done by the agent itself into containerd (so it can report real
//! per-layer progress), the pull manager that dedupes, caps and retries them, the
//! node's declarative image list, and the `ImageService` gRPC API over all of it.
//!
//! In layers that import one way, each only from those listed before it (and from the
//! ground: [`oci`], [`platform`] and [`progress`]):
//! - [`registry`]: the registry client, with its body reader, token cache, hosts
//!   configuration and digest checks
//! - [`store`]: containerd as the pull needs it ([`store::ImageStore`]), its labels,
//!   image records and inventory
//! - `download`: one blob from the registry into the store, and why a pull failed
//! - [`pipeline`]: one pull, its downloads and unpacking overlapped
//! - [`service`]: the pull manager, the node's image list and the gRPC API

pub mod progress;

pub mod registry;
pub mod store;

mod download;

pub mod pipeline;

pub mod service;

pub use service::{AgentImageService, ConnectError, ImageServiceImpl};
/// The image formats and platforms, parsed in `stevedore-parsers` (fuzzed there).
pub use stevedore_parsers::{oci, platform};

#[cfg(test)]
mod testing;

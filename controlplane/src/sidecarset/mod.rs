//! SidecarSet: sidecar containers injected into matching pods at creation, through the
//! shared webhook server (`crate::admission`).
//!
//! - [`matching`]: which SidecarSets a pod matches (pure);
//! - [`inject`]: the JSON patch injecting them (pure), with [`env`] (variables and mounts
//!   taken from the pod's own containers) and [`metadata`] (`patchPodMetadata`);
//! - [`marks`]: what injection leaves on a pod for the rest to read (the hash and list
//!   annotations, the sidecar variable);
//! - [`hash`]: the versions a pod records (pure);
//! - [`hot`]: HotUpgrade's two containers per sidecar, their names and annotations (pure);
//! - [`upgradable`]: the `SidecarSetUpgradable` pod condition (pure);
//! - [`webhook`]: the route, reading SidecarSets from the caches.

pub mod controller;
pub mod env;
pub mod hash;
pub mod hot;
pub mod inject;
pub mod marks;
pub mod matching;
pub mod metadata;
pub mod plan;
pub mod pod_state;
pub mod triggers;
pub mod upgradable;
pub mod upgrade;
pub mod webhook;

pub use controller::SidecarSetController;
pub mod predownload;
pub mod revisions;

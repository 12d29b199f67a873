//! The Advanced StatefulSet controller, a second adapter of the shared pod-set engine
//! (`workload::plan`): pure rules for a pod's identity (`ordinals`), what the workload
//! says about itself (`adapter`), one sync as a decision (`plan`) and its status
//! (`status`); the thin layer that reads the shared caches and carries the plan out
//! (`reconcile`) and its `triggers`.

pub mod adapter;
mod controller;
pub mod ordinals;
pub mod plan;
mod predownload;
pub mod reconcile;
pub mod retention;
pub mod status;
pub mod triggers;

pub use controller::{StatefulSetController, SyncError};

//! The Advanced StatefulSet controller, a second adapter of the shared pod-set engine
//! (`workload::plan`): pure rules for a pod's identity (`ordinals`), what the workload
//! says about itself (`adapter`), one sync as a decision (`plan`) and its status
//! (`status`); what the generic pod-set sync runs of it (`kind`) and its `triggers`.

pub mod adapter;
mod claim_status;
mod controller;
pub mod kind;
mod missing_claims;
pub mod ordinals;
pub mod plan;
mod predownload;
pub mod retention;
pub mod status;
pub mod triggers;

pub use controller::{StatefulSetController, SyncError};

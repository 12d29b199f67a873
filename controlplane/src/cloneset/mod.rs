//! The CloneSet controller: pure planning (`plan`, `status`, `pods`) and what the
//! generic pod-set sync (`pod_set`) runs of it (`kind`).

pub mod adapter;
mod controller;
pub mod kind;
pub mod plan;
pub mod pods;
pub mod pods_to_delete;
pub mod predownload;
pub mod progress;
pub mod status;
pub mod triggers;

pub use controller::{CloneSetController, SyncError};

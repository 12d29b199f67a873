//! The CloneSet controller: pure planning (`plan`, `status`, `pods`) and the thin
//! layer that reads the shared caches and carries the plan out (`reconcile`).

pub mod adapter;
mod controller;
mod execute;
pub mod guards;
pub mod plan;
pub mod pods;
pub mod pods_to_delete;
pub mod predownload;
pub mod progress;
pub mod reconcile;
pub mod status;
pub mod triggers;

pub use controller::{CloneSetController, SyncError};

//! The Advanced DaemonSet controller, the third adapter of the shared pod-set engine
//! (`workload::plan`): what the workload says about itself (`adapter`), its pods by node
//! (`nodes`), the nodes waiting for room (`unplaced`), one sync as a decision (`plan`,
//! with the surging update in `surge`) and its status (`status`); what the generic
//! pod-set sync (`pod_set`) runs of it (`kind`) and its `triggers`. Node evaluation is
//! `workload::node_eval`, shared with BroadcastJob.

pub mod adapter;
mod controller;
pub mod kind;
pub mod nodes;
pub mod plan;
mod predownload;
pub mod status;
pub mod surge;
pub mod triggers;
pub mod unplaced;

pub use controller::{DaemonSetController, SyncError};

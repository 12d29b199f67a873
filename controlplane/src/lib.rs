//! Stevedore's control plane: OpenKruise-compatible workload reconcilers, ImageList
//! distribution to the node agents, and the agent client pool.

pub mod advancedcronjob;
pub mod agents;
pub mod api;
pub mod app;
pub mod broadcastjob;
pub mod budget;
pub mod caches;
pub mod certs;
pub mod cloneset;
pub mod config;
pub mod containerrecreate;
pub mod controller;
pub mod conversion;
pub mod daemonset;
pub mod imagelist;
pub mod imagelistpulljob;
pub mod imagepulljob;
pub mod predownload;
pub mod runtime;
pub mod statefulset;
pub mod switches;
pub mod telemetry;
pub mod workload;

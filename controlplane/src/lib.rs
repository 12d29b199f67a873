//! Stevedore's control plane: OpenKruise-compatible workload reconcilers, ImageList
//! distribution to the node agents, and the agent client pool.

pub mod advancedcronjob;
pub mod agents;
/// The API types, a crate of their own (`controlplane/api`), kept at this path.
pub use stevedore_api as api;
pub mod admission;
pub mod app;
pub mod broadcastjob;
pub mod budget;
pub mod caches;
pub mod certs;
pub mod cloneset;
pub mod config;
pub mod containerrecreate;
pub mod controller;
/// The PodUnavailableBudget conversion, in the API crate, kept at this path.
pub use stevedore_api::conversion;
pub mod daemonset;
pub mod imagelist;
pub mod imagelistpulljob;
pub mod imagepulljob;
pub mod launchpriority;
pub mod pod_set;
pub mod podprobemarker;
pub mod predownload;
pub mod runtime;
pub mod sidecarset;
pub mod statefulset;
pub mod switches;
pub mod telemetry;
pub mod workload;

#[cfg(test)]
mod api_agreement_tests;
#[cfg(test)]
mod triggers_tests;

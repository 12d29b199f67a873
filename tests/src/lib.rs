//! Cluster harness for Stevedore's integration and e2e tests.
//!
//! `run_in_namespace` brings the local cluster up once per test process (reusing a
//! running one), gives each test its own namespace, removes it afterwards, and on
//! failure prints the namespace's events, pod statuses and each component's log tail.

pub mod auth;
pub mod chaos;
pub mod cluster;
pub mod containerd;
pub mod controlplane;
pub mod crds;
pub mod diagnostics;
pub mod events;
#[cfg(test)]
mod grafana_dashboard;
pub mod grpc;
pub mod helm;
#[cfg(test)]
mod helm_containerd_values;
pub mod kept_watch;
pub mod kustomize_swap;
pub mod manifests;
pub mod metrics;
pub mod namespace;
pub mod oci_image;
pub mod pods;
pub mod proxy;
pub mod random_image;
pub mod real_node_jobs;
pub mod real_nodes;
pub mod registry_log;
pub mod registry_process;
pub mod scratch;
pub mod sim;
pub mod slow_image;
pub mod test_nodes;
pub mod token_server;
pub mod token_signer;
pub mod wait;

pub use cluster::{ClusterInfo, cluster};
pub use namespace::{TestContext, run_in_namespace};
pub use wait::{invariant, poll_until};

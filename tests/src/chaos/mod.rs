//! The chaos harness (issue 33): while rollouts of the pod-set kinds run on simulated
//! nodes, a seeded schedule injects faults at random moments (the control plane's leader
//! and standby killed, etcd paused, nodes flipped NotReady, pods and ControllerRevisions
//! deleted behind the controllers' backs, concurrent user edits), and checkers that read
//! only the apiserver's watch stream, never the control plane's code, hold the promises
//! every kind makes: no over-disruption, one live pod per identity, no orphaned pod, and
//! every rollout finishing after the last fault.
//!
//! Pure parts ([`rng`], [`plan`], [`invariants`]) are table-tested; the I/O is in
//! [`faults`], [`workloads`] and [`run`]. `cargo run -p stevedore-tests --bin chaos --
//! --seed N` runs one schedule; the same seed replays the same faults in the same order.

pub mod faults;
pub mod invariants;
pub mod jobs;
pub mod plan;
pub mod rng;
pub mod run;
pub mod workloads;

#[cfg(test)]
mod invariants_tests;
#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod workloads_tests;

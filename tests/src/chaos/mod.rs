//! The chaos harness (issue 33): while rollouts of the pod-set kinds (recreate and in
//! place), BroadcastJobs, an AdvancedCronJob, ImagePullJobs and ContainerRecreateRequests
//! run on simulated nodes with agents, a seeded schedule injects faults at random moments
//! (the control plane's leader and standby killed, etcd paused, the apiserver restarted or
//! throttled for the control plane, agents killed, nodes flipped NotReady, the webhook's
//! endpoints dropped, pods, claims and ControllerRevisions deleted behind the controllers'
//! backs, concurrent user edits),
//! and checkers that read only the apiserver's watch stream, never the control plane's
//! code, hold the promises every kind makes: no over-disruption (by `maxUnavailable` and by
//! a PodUnavailableBudget), one live pod per identity, one run at a time of a Forbid cron,
//! no orphaned pod, bounded control plane memory, and everything finishing after the last
//! fault.
//!
//! Pure parts ([`rng`], [`plan`], [`invariants`] and the rules in each kind's module) are
//! table-tested, as are [`throttle`]'s token bucket and route; the I/O is in [`faults`],
//! [`process_faults`], [`throttle`]'s proxy (tested in process) and routing, [`runners`],
//! [`settle`] and [`run`]. `cargo run -p stevedore-tests --bin chaos --
//! --seed N` runs one schedule; the same seed replays the same faults in the same order.

pub mod cron;
pub mod faults;
pub mod invariants;
pub mod jobs;
pub mod kubelet;
pub mod memory;
pub mod plan;
pub mod pool;
pub mod process_faults;
pub mod pulls;
pub mod recreate;
pub mod rng;
pub mod run;
pub mod runners;
pub mod settle;
pub mod throttle;
pub mod watch;
pub mod workloads;

#[cfg(test)]
mod invariants_tests;
#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod workloads_tests;

//! Image pre-download for in-place rollouts, shared by the workloads that update in
//! place: a pure decision ([`plan`]), the ImagePullJobs that carry it out ([`jobs`]), and
//! the step any pod-set kind runs after its status ([`workload`]).

pub mod jobs;
pub mod plan;
pub mod workload;

//! Image pre-download for in-place rollouts, shared by the workloads that update in
//! place: a pure decision ([`plan`]) and the ImagePullJobs that carry it out ([`jobs`]).

pub mod jobs;
pub mod plan;

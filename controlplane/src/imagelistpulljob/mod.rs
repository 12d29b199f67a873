//! The ImageListPullJob controller: one ImagePullJob per listed image. The pure planner
//! (`plan`) decides which ImagePullJobs to create, edit and delete and sums their status;
//! `reconcile` reads the shared caches and carries the plan out, fed by `triggers`.

pub mod plan;
#[cfg(test)]
mod plan_tests;
pub mod reconcile;
pub mod triggers;

pub use reconcile::ImageListPullJobController;

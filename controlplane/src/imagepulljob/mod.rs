//! The ImagePullJob controller: the pure planner (`plan`), the job's ownership of its
//! ImageList entries (`entries`), and the layer that reads the shared caches and carries
//! the plan out (`reconcile`), fed by `triggers`.

pub mod entries;
#[cfg(test)]
mod parallelism_tests;
pub mod plan;
#[cfg(test)]
mod plan_tests;
pub mod progress;
pub mod reconcile;
pub mod triggers;

pub use reconcile::{FINALIZER, ImagePullJobController};

//! BroadcastJob: one pod run to completion on every node that fits its template.
//! `pods` builds and reads the job's pods; `plan` decides, from the job, the nodes, its
//! pods and the time, what to create, delete, and when to look again; `reconcile`
//! carries a plan out; `triggers` maps pod and node changes to jobs.

pub mod plan;
pub mod pods;
pub mod reconcile;
pub mod triggers;

pub use reconcile::BroadcastJobController;

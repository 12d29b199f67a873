//! AdvancedCronJob: Jobs or BroadcastJobs created on a cron schedule in a time zone.
//! `schedule` reads the schedule language; `plan` decides, from the object, its children
//! and the time, what to create, delete and when to look again; `children` reads and
//! builds the runs (Jobs or BroadcastJobs), `reconcile` carries a plan out, `triggers`
//! maps run changes to their cron.

pub mod children;
pub mod plan;
pub mod reconcile;
pub mod schedule;
pub mod triggers;

pub use reconcile::AdvancedCronJobController;

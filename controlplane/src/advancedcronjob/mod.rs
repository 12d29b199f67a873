//! AdvancedCronJob: Jobs or BroadcastJobs created on a cron schedule in a time zone.
//! `schedule` reads the schedule language; `plan` decides, from the object, its children
//! and the time, what to create, delete and when to look again.

pub mod plan;
pub mod schedule;

//! What an AdvancedCronJob does now, as the native CronJob controller decides it (seed
//! 002; kube-controller-manager's cronjob controller v2): find the most recent scheduled
//! time not yet run, skip it when past `startingDeadlineSeconds`, apply the concurrency
//! policy, create the run under a name derived from its scheduled minute (so a restart
//! or a second leader can only ever create it once: the apiserver refuses the duplicate),
//! prune finished runs beyond the history limits, and look again at the next scheduled
//! time — never by polling.

use k8s_openapi::jiff::Timestamp;

use super::schedule::Schedule;

/// More missed start times than this is reported (the native controller's bound).
pub const MAX_MISSED: usize = 100;

/// `spec.concurrencyPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConcurrencyPolicy {
    #[default]
    Allow,
    Forbid,
    Replace,
}

/// The AdvancedCronJob as the planner needs it.
#[derive(Debug, Clone)]
pub struct CronFacts<'a> {
    pub name: &'a str,
    pub created: Timestamp,
    pub last_schedule: Option<Timestamp>,
    pub starting_deadline_seconds: Option<i64>,
    pub concurrency: ConcurrencyPolicy,
    pub paused: bool,
    pub successful_history_limit: usize,
    pub failed_history_limit: usize,
}

/// Where one child run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    Active,
    Succeeded,
    Failed,
}

/// One child (Job or BroadcastJob) the AdvancedCronJob owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    pub name: String,
    pub state: RunState,
    /// When it finished, or, unknown, when it was created: the history's order.
    pub finished_or_created: Timestamp,
}

/// A run to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub name: String,
    pub scheduled: Timestamp,
}

/// Why a child is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// `Replace`: an active run gives way to the new one.
    Replaced,
    /// A finished run beyond `successfulJobsHistoryLimit` / `failedJobsHistoryLimit`.
    History,
}

/// Something a person should see as an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// More than [`MAX_MISSED`] start times were missed (clock skew, or a long outage
    /// without `startingDeadlineSeconds`).
    TooManyMissed,
    /// A start time passed by more than `startingDeadlineSeconds` (the control plane was
    /// down, or a run was forbidden): it is skipped; `scheduled` is the latest such.
    MissedDeadline { scheduled: Timestamp },
    /// `Forbid` and a run is still active: this start time is skipped.
    AlreadyActive { scheduled: Timestamp },
}

/// The planner's answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CronPlan {
    pub create: Option<Run>,
    pub delete: Vec<(String, DeleteReason)>,
    /// The new `status.lastScheduleTime`, when it moves.
    pub last_schedule: Option<Timestamp>,
    /// When to reconcile again: the next scheduled time (none while paused).
    pub requeue_at: Option<Timestamp>,
    pub notices: Vec<Notice>,
}

/// The child's name for a scheduled time: `<name>-<unix minutes>`, as the native
/// controller names Jobs.
pub fn run_name(name: &str, scheduled: Timestamp) -> String {
    format!("{name}-{}", scheduled.as_second().div_euclid(60))
}

/// Decides what to do at `now`.
pub fn plan(
    cron: &CronFacts<'_>,
    schedule: &Schedule,
    children: &[Child],
    now: Timestamp,
) -> CronPlan {
    let mut out = CronPlan {
        delete: history_to_prune(cron, children),
        ..CronPlan::default()
    };
    if cron.paused {
        return out;
    }
    out.requeue_at = schedule.next_after(now);
    let missed = most_recent_missed(cron, schedule, now);
    if missed.too_many {
        out.notices.push(Notice::TooManyMissed);
    }
    if let Some(scheduled) = missed.past_deadline {
        out.notices.push(Notice::MissedDeadline { scheduled });
    }
    let Some(scheduled) = missed.latest else {
        return out;
    };
    let name = run_name(cron.name, scheduled);
    if children.iter().any(|c| c.name == name) {
        // Created already (by this replica before a restart, or by another leader).
        out.last_schedule = Some(scheduled);
        return out;
    }
    let active = children.iter().filter(|c| c.state == RunState::Active);
    match cron.concurrency {
        ConcurrencyPolicy::Forbid if active.clone().next().is_some() => {
            out.notices.push(Notice::AlreadyActive { scheduled });
            return out;
        }
        ConcurrencyPolicy::Replace => out
            .delete
            .extend(active.map(|c| (c.name.clone(), DeleteReason::Replaced))),
        _ => {}
    }
    out.create = Some(Run { name, scheduled });
    out.last_schedule = Some(scheduled);
    out
}

/// The start times not yet run, as far as the planner needs them.
struct Missed {
    /// The latest one within the starting deadline: the one to run.
    latest: Option<Timestamp>,
    /// The latest one older than the starting deadline: skipped.
    past_deadline: Option<Timestamp>,
    /// More than [`MAX_MISSED`] within the window.
    too_many: bool,
}

/// Start times after the last run (or creation) and at or before `now`; those older
/// than `now` minus the starting deadline are only reported.
fn most_recent_missed(cron: &CronFacts<'_>, schedule: &Schedule, now: Timestamp) -> Missed {
    let mut earliest = cron.last_schedule.unwrap_or(cron.created);
    let mut past_deadline = None;
    let window_start = cron
        .starting_deadline_seconds
        .and_then(|d| Timestamp::from_second(now.as_second().saturating_sub(d)).ok());
    if let Some(window_start) = window_start.filter(|w| *w > earliest) {
        past_deadline = schedule.last_at_or_before(earliest, window_start);
        earliest = window_start;
    }
    let mut latest = None;
    let mut cursor = earliest;
    for _ in 0..=MAX_MISSED {
        match schedule.next_after(cursor) {
            Some(t) if t <= now => {
                latest = Some(t);
                cursor = t;
            }
            _ => {
                return Missed {
                    latest,
                    past_deadline,
                    too_many: false,
                };
            }
        }
    }
    // Still behind after MAX_MISSED + 1 steps: jump to the last start time before `now`
    // instead of walking every one of them.
    Missed {
        latest: schedule.last_at_or_before(cursor, now).or(latest),
        past_deadline,
        too_many: true,
    }
}

/// Finished children beyond their history limit, oldest first.
fn history_to_prune(cron: &CronFacts<'_>, children: &[Child]) -> Vec<(String, DeleteReason)> {
    let mut doomed = Vec::new();
    for (state, limit) in [
        (RunState::Succeeded, cron.successful_history_limit),
        (RunState::Failed, cron.failed_history_limit),
    ] {
        let mut finished: Vec<&Child> = children.iter().filter(|c| c.state == state).collect();
        finished.sort_by(|a, b| {
            (a.finished_or_created, &a.name).cmp(&(b.finished_or_created, &b.name))
        });
        let excess = finished.len().saturating_sub(limit);
        doomed.extend(
            finished[..excess]
                .iter()
                .map(|c| (c.name.clone(), DeleteReason::History)),
        );
    }
    doomed
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "plan_clock_tests.rs"]
mod clock_tests;

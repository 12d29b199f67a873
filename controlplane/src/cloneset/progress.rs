//! The CloneSet's Progressing condition as OpenKruise 1.9 writes it (`cloneset_status.go`
//! `calculateProgressingStatus`): present only while a progress deadline is set, its
//! reason saying where the rollout stands, and an event with the counts behind each change
//! of reason (the condition's messages are OpenKruise's fixed sentences).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::api::cloneset::CloneSetCondition;
use crate::api::{CloneSet, CloneSetStatus};
use crate::controller::conditions::bool_status;

pub const PROGRESSING: &str = "Progressing";

/// Reasons of the Progressing condition, as OpenKruise 1.9 spells them.
pub const REASON_UPDATED: &str = "CloneSetUpdated";
pub const REASON_AVAILABLE: &str = "CloneSetAvailable";
pub const REASON_PAUSED: &str = "CloneSetPaused";
pub const REASON_PARTITION_AVAILABLE: &str = "ProgressPartitionAvailable";
pub const REASON_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";

/// The progress deadline in seconds, when there is one: unset, not positive and
/// `2147483647` (OpenKruise's and Deployment's "no deadline") mean none.
fn progress_deadline(cloneset: &CloneSet) -> Option<i32> {
    cloneset
        .spec
        .progress_deadline_seconds
        .filter(|&seconds| seconds > 0 && seconds != i32::MAX)
}

/// Where a rollout stands, as OpenKruise 1.9's `calculateProgressingStatus` decides it:
/// the first of these that holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Every pod is on the update revision and available.
    Available,
    /// `updateStrategy.paused`.
    Paused,
    /// A partition holds pods back and every pod the partition lets update is available.
    PartitionAvailable,
    /// The rollout took longer than the deadline; stays until the rollout completes,
    /// pauses, reaches its partition, or a new update revision starts a new rollout.
    DeadlineExceeded,
    /// Under way since `since` (the deadline counts from it).
    Progressing { since: Timestamp },
}

/// OpenKruise's `CloneSetAvailable` / `CloneSetBePaused` / `CloneSetPartitionAvailable` /
/// `CloneSetDeadlineExceeded`, in that order, over the new counts and the condition the
/// old status carries. Unlike a Deployment, progress of the counts does not restart the
/// clock: the rollout as a whole must finish within the deadline.
pub fn decide_progress(
    cloneset: &CloneSet,
    old: &CloneSetStatus,
    new: &CloneSetStatus,
    deadline: i32,
    now: Timestamp,
) -> Progress {
    let desired = cloneset.spec.desired_replicas();
    let updated_available = new.updated_available_replicas.unwrap_or(0);
    if new.current_revision == new.update_revision
        && new.replicas == desired
        && updated_available == desired
    {
        return Progress::Available;
    }
    if cloneset.spec.update_strategy.paused {
        return Progress::Paused;
    }
    if new.expected_updated_replicas < desired && updated_available >= new.expected_updated_replicas
    {
        return Progress::PartitionAvailable;
    }
    let same_rollout = old.update_revision == new.update_revision;
    let existing = old
        .conditions
        .iter()
        .find(|c| c.type_ == PROGRESSING)
        .filter(|_| same_rollout);
    if existing.is_some_and(|c| c.reason == REASON_DEADLINE_EXCEEDED) {
        return Progress::DeadlineExceeded;
    }
    let since = existing
        .filter(|c| c.reason == REASON_UPDATED && c.status == "True")
        .and_then(|c| {
            c.last_update_time
                .as_ref()
                .or(c.last_transition_time.as_ref())
        })
        .map_or(now, |t| t.0);
    if now.duration_since(since) >= SignedDuration::from_secs(i64::from(deadline)) {
        Progress::DeadlineExceeded
    } else {
        Progress::Progressing { since }
    }
}

/// The Progressing condition's status, reason and message for `progress`, exactly as
/// OpenKruise 1.9 writes them.
pub fn progress_condition(
    progress: Progress,
    update_revision: &str,
) -> (bool, &'static str, String) {
    match progress {
        Progress::Available => (true, REASON_AVAILABLE, "CloneSet is available".to_owned()),
        Progress::Paused => (true, REASON_PAUSED, "CloneSet is paused".to_owned()),
        Progress::PartitionAvailable => (
            true,
            REASON_PARTITION_AVAILABLE,
            "CloneSet has been paused due to partition ready".to_owned(),
        ),
        Progress::DeadlineExceeded => (
            false,
            REASON_DEADLINE_EXCEEDED,
            format!("CloneSet revision {update_revision} has timed out progressing"),
        ),
        Progress::Progressing { .. } => {
            (true, REASON_UPDATED, "CloneSet is progressing".to_owned())
        }
    }
}

/// Sets the Progressing condition of `new` (or removes it without a deadline) and returns
/// when the deadline would pass (plus a second) while the rollout is under way.
pub fn set_progressing(
    conditions: &mut Vec<CloneSetCondition>,
    cloneset: &CloneSet,
    old: &CloneSetStatus,
    new: &CloneSetStatus,
    now: Timestamp,
) -> Option<Duration> {
    let Some(deadline) = progress_deadline(cloneset) else {
        conditions.retain(|c| c.type_ != PROGRESSING);
        return None;
    };
    let progress = decide_progress(cloneset, old, new, deadline, now);
    let (value, reason, message) = progress_condition(progress, &new.update_revision);
    let status = bool_status(value);
    let existing = conditions.iter().find(|c| c.type_ == PROGRESSING).cloned();
    let same = |c: &CloneSetCondition| c.status == status && c.reason == reason;
    // lastTransitionTime moves with the status, lastUpdateTime with the reason (OpenKruise's
    // SetCloneSetCondition); a rollout under way is dated from when it began.
    let last_transition_time = existing
        .as_ref()
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    let last_update_time = match progress {
        Progress::Progressing { since } => Time(since),
        _ => existing
            .as_ref()
            .filter(|c| same(c))
            .and_then(|c| c.last_update_time.clone())
            .unwrap_or(Time(now)),
    };
    conditions.retain(|c| c.type_ != PROGRESSING);
    conditions.push(CloneSetCondition {
        type_: PROGRESSING.to_owned(),
        status: status.to_owned(),
        last_transition_time: Some(last_transition_time),
        last_update_time: Some(last_update_time),
        reason: reason.to_owned(),
        message,
    });
    let Progress::Progressing { since } = progress else {
        return None;
    };
    let due = since + SignedDuration::from_secs(i64::from(deadline));
    Some(Duration::try_from(due.duration_since(now)).unwrap_or_default() + Duration::from_secs(1))
}

/// An event for a change of the Progressing condition's reason, with the counts its fixed
/// message leaves out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgressEvent {
    /// A Warning (the deadline passed) rather than a Normal event.
    pub warning: bool,
    /// The condition's new reason.
    pub reason: String,
    pub note: String,
}

/// The event to publish when `new` changes the Progressing reason of `old` (None: no
/// status yet); None while the reason holds or there is no Progressing condition.
pub fn progress_event(old: Option<&CloneSetStatus>, new: &CloneSetStatus) -> Option<ProgressEvent> {
    let condition = new.conditions.iter().find(|c| c.type_ == PROGRESSING)?;
    let old_reason = old
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == PROGRESSING))
        .map(|c| c.reason.as_str());
    if old_reason == Some(condition.reason.as_str()) {
        return None;
    }
    let note = format!(
        "{}: {} of {} pods updated to revision {}, {} of them available; {} of {} pods \
         available.",
        condition.message,
        new.updated_replicas,
        new.expected_updated_replicas,
        new.update_revision,
        new.updated_available_replicas.unwrap_or(0),
        new.available_replicas,
        new.replicas,
    );
    Some(ProgressEvent {
        warning: condition.reason == REASON_DEADLINE_EXCEEDED,
        reason: condition.reason.clone(),
        note,
    })
}

#[cfg(test)]
#[path = "progress_tests.rs"]
mod tests;

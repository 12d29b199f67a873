//! The CloneSet status, computed purely from the pods, the revisions and what the sync
//! ran into, with the conditions OpenKruise 1.9 writes: Progressing (reasons
//! CloneSetUpdated, CloneSetAvailable, CloneSetPaused, ProgressPartitionAvailable,
//! ProgressDeadlineExceeded) while a progress deadline is set, FailedScale and FailedUpdate
//! while the sync runs into them.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::api::cloneset::CloneSetCondition;
use crate::api::{CloneSet, CloneSetStatus};
use crate::controller::conditions::{bool_status, set_condition, set_problem};
use crate::workload::pod_view::{PodView, ViewContext, is_active};
use crate::workload::rollout::partition_replicas;
use crate::workload::selector::format_selector;

pub const FAILED_SCALE: &str = "FailedScale";
pub const FAILED_UPDATE: &str = "FailedUpdate";
pub const PROGRESSING: &str = "Progressing";
/// The condition type Stevedore wrote before it followed OpenKruise; removed on sight.
const LEGACY_AVAILABLE: &str = "Available";

/// Reasons of the Progressing condition, as OpenKruise 1.9 spells them.
pub const REASON_UPDATED: &str = "CloneSetUpdated";
pub const REASON_AVAILABLE: &str = "CloneSetAvailable";
pub const REASON_PAUSED: &str = "CloneSetPaused";
pub const REASON_PARTITION_AVAILABLE: &str = "ProgressPartitionAvailable";
pub const REASON_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";

/// What the sync ran into, for the FailedScale / FailedUpdate conditions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncProblems {
    /// Creating pods failed: the error.
    pub scale: Option<String>,
    /// Updating pods failed or was refused (InPlaceOnly, an unreachable agent).
    pub update: Option<String>,
}

/// The new status and when to look again (a pod turning available after minReadySeconds,
/// the progress deadline).
pub fn compute_status(
    cloneset: &CloneSet,
    pods: &[&Pod],
    update_revision: &str,
    current_revision: &str,
    collision_count: i32,
    problems: &SyncProblems,
    now: Timestamp,
) -> (CloneSetStatus, Option<Duration>) {
    let spec = &cloneset.spec;
    let old = cloneset.status.clone().unwrap_or_default();
    let mut status = CloneSetStatus {
        observed_generation: cloneset.metadata.generation.unwrap_or(0),
        update_revision: update_revision.to_owned(),
        collision_count: (collision_count > 0).then_some(collision_count),
        label_selector: format_selector(&spec.selector),
        ..CloneSetStatus::default()
    };
    let named_for_deletion = BTreeSet::new();
    let ctx = ViewContext {
        update_revision,
        min_ready_seconds: spec.min_ready_seconds,
        now,
        named_for_deletion: &named_for_deletion,
    };
    let mut requeue = count_pods(&mut status, pods, &ctx);
    let desired = spec.desired_replicas();
    let partition =
        partition_replicas(spec.update_strategy.partition.as_ref(), desired).unwrap_or(0);
    status.expected_updated_replicas = (desired - partition).max(0);
    status.current_revision =
        if status.updated_replicas == status.replicas && status.replicas == desired {
            update_revision.to_owned()
        } else {
            current_revision.to_owned()
        };

    let mut conditions = old.conditions.clone();
    set_problem(
        &mut conditions,
        FAILED_SCALE,
        problems.scale.as_deref(),
        now,
    );
    set_problem(
        &mut conditions,
        FAILED_UPDATE,
        problems.update.as_deref(),
        now,
    );

    conditions.retain(|c| c.type_ != LEGACY_AVAILABLE);
    if let Some(wait) = set_progressing(&mut conditions, cloneset, &old, &status, now) {
        requeue = Some(requeue.map_or(wait, |r| r.min(wait)));
    }
    status.conditions = conditions;
    (status, requeue)
}

/// Counts the active pods into `status`; when a ready pod becomes available after
/// `minReadySeconds`, how long until the first does (plus a second).
fn count_pods(
    status: &mut CloneSetStatus,
    pods: &[&Pod],
    ctx: &ViewContext<'_>,
) -> Option<Duration> {
    let mut requeue: Option<Duration> = None;
    let mut updated_available = 0;
    for pod in pods.iter().filter(|p| is_active(p)) {
        let view = PodView::of(pod, ctx);
        let updated = view.updated;
        // OpenKruise's calculateStatus: ready is IsPodUpdateReady (Ready and not mid
        // in-place update), available is IsPodAvailable (also lifecycle Normal or none).
        let ready = view.update_ready();
        let available = view.serving();
        status.replicas += 1;
        status.ready_replicas += i32::from(ready);
        status.available_replicas += i32::from(available);
        status.updated_replicas += i32::from(updated);
        status.updated_ready_replicas += i32::from(updated && ready);
        updated_available += i32::from(updated && available);
        if ready
            && !view.available
            && let Some(since) = view.ready_since
        {
            let due = since + SignedDuration::from_secs(i64::from(ctx.min_ready_seconds));
            let wait = Duration::try_from(due.duration_since(ctx.now)).unwrap_or_default();
            let wait = wait + Duration::from_secs(1);
            requeue = Some(requeue.map_or(wait, |r| r.min(wait)));
        }
    }
    status.updated_available_replicas = Some(updated_available);
    requeue
}

/// The status of a CloneSet the controller refuses to act on (its selector does not select
/// its template): the counts stay as they were, `type_` is True with `reason` and
/// `message`, and the generation counts as observed.
pub fn refused_status(
    cloneset: &CloneSet,
    type_: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> CloneSetStatus {
    let mut status = cloneset.status.clone().unwrap_or_default();
    status.observed_generation = cloneset.metadata.generation.unwrap_or(0);
    set_condition(&mut status.conditions, type_, true, reason, message, now);
    status
}

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
fn set_progressing(
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

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;

//! The CloneSet status, computed purely from the pods, the revisions and what the sync
//! ran into; conditions keep their transition time while their status holds.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::api::cloneset::CloneSetCondition;
use crate::api::{CloneSet, CloneSetStatus};
use crate::controller::conditions::{bool_status, set_condition, set_problem};
use crate::workload::pod_view::{PodView, ViewContext, is_active};
use crate::workload::rollout::{MAX_UNAVAILABLE_FIELD, partition_replicas, scaled_share};
use crate::workload::selector::format_selector;

pub const FAILED_SCALE: &str = "FailedScale";
pub const FAILED_UPDATE: &str = "FailedUpdate";
pub const PROGRESSING: &str = "Progressing";
pub const AVAILABLE: &str = "Available";

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
        partition_replicas(spec.update_strategy.partition_in_effect(), desired).unwrap_or(0);
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

    set_available(&mut conditions, cloneset, status.available_replicas, now);
    if let Some(deadline) = spec.progress_deadline_seconds {
        let wait = progress(&mut conditions, &old, &status, desired, deadline, now);
        if let Some(wait) = wait {
            requeue = Some(requeue.map_or(wait, |r| r.min(wait)));
        }
    } else {
        conditions.retain(|c| c.type_ != PROGRESSING);
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
        status.replicas += 1;
        status.ready_replicas += i32::from(view.ready);
        status.available_replicas += i32::from(view.available);
        status.updated_replicas += i32::from(updated);
        status.updated_ready_replicas += i32::from(updated && view.ready);
        updated_available += i32::from(updated && view.available);
        if view.ready
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

/// Available: at least `replicas - maxUnavailable` pods available.
fn set_available(
    conditions: &mut Vec<CloneSetCondition>,
    cloneset: &CloneSet,
    available_replicas: i32,
    now: Timestamp,
) {
    let desired = cloneset.spec.desired_replicas();
    let max_unavailable = scaled_share(
        MAX_UNAVAILABLE_FIELD,
        &cloneset.spec.update_strategy.max_unavailable_or_default(),
        desired,
        true,
    )
    .unwrap_or(0);
    let available = available_replicas >= desired - max_unavailable;
    let (reason, message) = if available {
        (
            "MinimumReplicasAvailable",
            "the CloneSet has minimum availability".to_owned(),
        )
    } else {
        (
            "MinimumReplicasUnavailable",
            format!(
                "{available_replicas} of {desired} pods available, fewer than replicas - maxUnavailable"
            ),
        )
    };
    set_condition(conditions, AVAILABLE, available, reason, message, now);
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

/// The Deployment-style Progressing condition: True (CloneSetProgressing) whenever the
/// counts move, True (CloneSetAvailable) once every pod is updated and available, False
/// (ProgressDeadlineExceeded) when nothing moved for `deadline` seconds during a rollout.
/// The time of the last progress is kept as the condition's transition time.
fn progress(
    conditions: &mut Vec<CloneSetCondition>,
    old: &CloneSetStatus,
    new: &CloneSetStatus,
    desired: i32,
    deadline: i32,
    now: Timestamp,
) -> Option<Duration> {
    let complete = new.updated_replicas >= new.expected_updated_replicas
        && new.replicas == desired
        && new.available_replicas == desired
        && new.updated_available_replicas.unwrap_or(0) >= new.expected_updated_replicas;
    let moved = old.updated_replicas != new.updated_replicas
        || old.ready_replicas != new.ready_replicas
        || old.available_replicas != new.available_replicas
        || old.replicas != new.replicas
        || old.update_revision != new.update_revision;
    let existing = conditions.iter().find(|c| c.type_ == PROGRESSING).cloned();
    let (status, reason, message) = if complete {
        (
            true,
            "CloneSetAvailable",
            "all pods are updated and available".to_owned(),
        )
    } else if moved || existing.is_none() {
        (
            true,
            "CloneSetProgressing",
            format!(
                "{} of {} pods updated",
                new.updated_replicas, new.expected_updated_replicas
            ),
        )
    } else {
        let since = existing
            .as_ref()
            .and_then(|c| c.last_transition_time.as_ref())
            .map_or(now, |t| t.0);
        let limit = SignedDuration::from_secs(i64::from(deadline));
        let stalled = now.duration_since(since);
        if existing
            .as_ref()
            .is_some_and(|c| c.reason == "ProgressDeadlineExceeded")
            || stalled >= limit
        {
            (
                false,
                "ProgressDeadlineExceeded",
                format!(
                    "no progress for {deadline}s: {} of {} pods updated",
                    new.updated_replicas, new.expected_updated_replicas
                ),
            )
        } else {
            return Some(
                Duration::try_from(limit - stalled).unwrap_or_default() + Duration::from_secs(1),
            );
        }
    };
    let keep_time = existing.as_ref().is_some_and(|c| {
        c.reason == reason
            && c.status == bool_status(status)
            && !(moved && reason == "CloneSetProgressing")
    });
    conditions.retain(|c| c.type_ != PROGRESSING);
    conditions.push(CloneSetCondition {
        type_: PROGRESSING.to_owned(),
        status: bool_status(status).to_owned(),
        last_transition_time: if keep_time {
            existing.and_then(|c| c.last_transition_time)
        } else {
            Some(Time(now))
        },
        reason: reason.to_owned(),
        message,
    });
    (!complete && status).then(|| Duration::from_secs(u64::try_from(deadline).unwrap_or(0) + 1))
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;

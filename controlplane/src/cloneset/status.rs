//! The CloneSet status, computed purely from the pods, the revisions and what the sync
//! ran into, with the conditions OpenKruise 1.9 writes: Progressing (reasons
//! CloneSetUpdated, CloneSetAvailable, CloneSetPaused, ProgressPartitionAvailable,
//! ProgressDeadlineExceeded) while a progress deadline is set, FailedScale and FailedUpdate
//! while the sync runs into them.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::progress::set_progressing;
use crate::api::cloneset::CloneSetCondition;
use crate::api::{CloneSet, CloneSetStatus};
use crate::controller::conditions::set_problem;
use crate::pod_set::kind::SharedProblems;
use crate::workload::pod_view::{PodView, ViewContext, is_active};
use crate::workload::rollout::partition_replicas;
use crate::workload::selector::format_selector;
use crate::workload::selector_guard::{GuardedSet, RefusableStatus};
use crate::workload::update_hold::{StrategyFields, UpdateHoldSeen, set_update_hold};

pub const FAILED_SCALE: &str = "FailedScale";
pub const FAILED_UPDATE: &str = "FailedUpdate";
/// Where a CloneSet keeps its partition, named in errors and update holds.
pub const PARTITION_FIELD: &str = "spec.updateStrategy.partition";
pub use super::progress::PROGRESSING;
/// The condition type Stevedore wrote before it followed OpenKruise; removed on sight.
const LEGACY_AVAILABLE: &str = "Available";

/// What the sync ran into, for the FailedScale / FailedUpdate conditions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncProblems {
    /// Creating pods failed: the error.
    pub scale: Option<String>,
    /// Updating pods failed or was refused (InPlaceOnly, an unreachable agent).
    pub update: Option<String>,
    /// Why pods stay on an older revision (partition, maxUnavailable, paused).
    pub update_hold: UpdateHoldSeen,
}

/// The fields a CloneSet's update holds name.
const STRATEGY_FIELDS: StrategyFields = StrategyFields {
    paused: "spec.updateStrategy.paused",
    partition: PARTITION_FIELD,
    partition_hint: "lower it to update them",
    max_unavailable: "spec.updateStrategy.maxUnavailable",
};

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
    let partition = partition_replicas(
        PARTITION_FIELD,
        spec.update_strategy.partition_in_effect(),
        desired,
    )
    .unwrap_or(0);
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
    set_update_hold(
        &mut conditions,
        &problems.update_hold,
        &STRATEGY_FIELDS,
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

/// What the selector guard (`workload::selector_guard`) reads of a CloneSet.
impl GuardedSet for CloneSet {
    type Status = CloneSetStatus;
    const CREATE_CONDITION: &'static str = FAILED_SCALE;

    fn selector(&self) -> &LabelSelector {
        &self.spec.selector
    }

    fn template(&self) -> &PodTemplateSpec {
        &self.spec.template
    }

    fn status(&self) -> Option<&CloneSetStatus> {
        self.status.as_ref()
    }
}

/// What the selector guard writes of a refused CloneSet.
impl RefusableStatus for CloneSetStatus {
    type Condition = CloneSetCondition;

    fn observed_generation_mut(&mut self) -> &mut i64 {
        &mut self.observed_generation
    }

    fn conditions_mut(&mut self) -> &mut Vec<CloneSetCondition> {
        &mut self.conditions
    }
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;

/// What the shared steps of the sync fill in.
impl SharedProblems for SyncProblems {
    fn create_and_update(&mut self) -> (&mut Option<String>, &mut Option<String>) {
        (&mut self.scale, &mut self.update)
    }
}

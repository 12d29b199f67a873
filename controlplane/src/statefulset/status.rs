//! The StatefulSet status, computed purely from the pods, the revisions and what the sync
//! ran into (the native `computeReplicaStatus` and `completeRollingUpdate`), with a
//! condition saying which pod an OrderedReady set waits on.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::plan::Halt;
use crate::api::statefulset::{StatefulSetCondition, StatefulSetUpdateStrategyType};
use crate::api::{StatefulSet, StatefulSetStatus};
use crate::controller::conditions::{set_condition, set_problem};
use crate::pod_set::kind::SharedProblems;
use crate::workload::pod_view::{PodView, ViewContext, is_active, pod_labels};
use crate::workload::revision_adapter::RevisionAdapter;
use crate::workload::selector::format_selector;
use crate::workload::selector_guard::{GuardedSet, RefusableStatus};
use crate::workload::update_hold::{StrategyFields, UpdateHoldSeen, set_update_hold};

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;

/// Creating a pod or claim failed (OpenKruise's condition type).
pub const FAILED_CREATE_POD: &str = "FailedCreatePod";
/// Updating a pod failed or was refused.
pub const FAILED_UPDATE_POD: &str = "FailedUpdatePod";
/// OrderedReady waits on a pod that is not Running and Ready, or still terminating.
pub const WAITING_FOR_POD: &str = "WaitingForPod";

/// The fields an Advanced StatefulSet's update holds name.
const STRATEGY_FIELDS: StrategyFields = StrategyFields {
    paused: "spec.updateStrategy.rollingUpdate.paused",
    partition: "spec.updateStrategy.rollingUpdate.partition",
    partition_hint: "lower it to update them",
    max_unavailable: "spec.updateStrategy.rollingUpdate.maxUnavailable",
};

/// What the sync ran into.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncProblems {
    /// Creating pods or claims failed: the apiserver's message.
    pub create: Option<String>,
    /// Updating pods failed or was refused.
    pub update: Option<String>,
    /// The pod an OrderedReady set waits on.
    pub halted: Option<Halt>,
    /// Why pods stay on an older revision (partition, maxUnavailable, paused, OnDelete).
    pub update_hold: UpdateHoldSeen,
}

/// The revisions a status is computed against.
#[derive(Clone, Copy, Debug)]
pub struct Revisions<'a> {
    pub update: &'a str,
    pub current: &'a str,
    pub collision_count: i32,
}

/// The new status, and when to look again (a pod turning available after minReadySeconds).
pub fn compute_status(
    set: &StatefulSet,
    pods: &[&Pod],
    revisions: Revisions<'_>,
    problems: &SyncProblems,
    now: Timestamp,
) -> (StatefulSetStatus, Option<Duration>) {
    let spec = &set.spec;
    let old = set.status.clone().unwrap_or_default();
    let mut status = StatefulSetStatus {
        observed_generation: set.metadata.generation.unwrap_or(0),
        update_revision: revisions.update.to_owned(),
        collision_count: (revisions.collision_count > 0).then_some(revisions.collision_count),
        label_selector: format_selector(&spec.selector),
        ..StatefulSetStatus::default()
    };
    let named = BTreeSet::new();
    let ctx = ViewContext {
        update_revision: revisions.update,
        min_ready_seconds: spec.effective_min_ready_seconds(),
        now,
        named_for_deletion: &named,
    };
    let mut requeue: Option<Duration> = None;
    let mut updated_available = 0;
    for pod in pods.iter().filter(|p| is_active(p)) {
        let view = PodView::of(pod, &ctx);
        status.replicas += 1;
        status.ready_replicas += i32::from(view.ready);
        status.available_replicas += i32::from(view.available);
        status.current_replicas +=
            i32::from(RevisionAdapter::is_on(pod_labels(pod), revisions.current));
        status.updated_replicas += i32::from(view.updated);
        status.updated_ready_replicas += i32::from(view.updated && view.ready);
        updated_available += i32::from(view.updated && view.available);
        if let Some(wait) = until_available(&view, ctx.min_ready_seconds, now) {
            requeue = Some(requeue.map_or(wait, |r| r.min(wait)));
        }
    }
    status.updated_available_replicas = Some(updated_available);
    // The native `completeRollingUpdate`: once every pod is updated and ready, the update
    // revision becomes the current one.
    let complete = spec.update_type() == StatefulSetUpdateStrategyType::RollingUpdate
        && status.replicas == spec.desired_replicas()
        && status.updated_replicas == status.replicas
        && status.ready_replicas == status.replicas;
    if complete {
        status.current_revision = revisions.update.to_owned();
        status.current_replicas = status.updated_replicas;
    } else {
        status.current_revision = revisions.current.to_owned();
    }
    status.conditions = conditions(old.conditions, problems, now);
    (status, requeue)
}

/// The conditions after this sync: `old` with the problems the sync ran into, the pod an
/// OrderedReady set waits on, and why pods stay on an older revision.
fn conditions(
    old: Vec<StatefulSetCondition>,
    problems: &SyncProblems,
    now: Timestamp,
) -> Vec<StatefulSetCondition> {
    let mut conditions = old;
    let (create, update) = (problems.create.as_deref(), problems.update.as_deref());
    set_problem(&mut conditions, FAILED_CREATE_POD, create, now);
    set_problem(&mut conditions, FAILED_UPDATE_POD, update, now);
    // Not a problem condition: its message follows the pod waited on, which moves up one
    // ordinal at a time during a healthy scale-up.
    match &problems.halted {
        Some(halt) => set_condition(
            &mut conditions,
            WAITING_FOR_POD,
            true,
            WAITING_FOR_POD,
            halt.message(),
            now,
        ),
        None => conditions.retain(|c| c.type_ != WAITING_FOR_POD),
    }
    let fields = &STRATEGY_FIELDS;
    set_update_hold(&mut conditions, &problems.update_hold, fields, now);
    conditions
}

/// How long a pod may stay not Running and Ready before an OrderedReady halt on it is
/// worth a Warning: a healthy scale-up waits on each new pod for seconds.
pub const STUCK_AFTER: Duration = Duration::from_secs(60);

/// The Warning note for a halt that lasts: the pod waited on is older than
/// [`STUCK_AFTER`] (or terminating for that long); `None` while it is young.
pub fn stuck_warning(halt: &Halt, pods: &[&Pod], now: Timestamp) -> Option<String> {
    let name = match halt {
        Halt::NotHealthy(name) | Halt::Terminating(name) => name,
    };
    let pod = pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))?;
    let since = match halt {
        Halt::NotHealthy(_) => pod.metadata.creation_timestamp.as_ref(),
        Halt::Terminating(_) => pod.metadata.deletion_timestamp.as_ref(),
    }?;
    let waited = now.duration_since(since.0);
    let stuck = SignedDuration::try_from(STUCK_AFTER).is_ok_and(|limit| waited >= limit);
    // No duration in the note: the same note every time lets the recorder count one series.
    stuck.then(|| {
        format!(
            "{} (over a minute now); the StatefulSet makes no other change until then",
            halt.message()
        )
    })
}

/// How long until a ready pod counts as available (plus a second), if it does not yet.
fn until_available(view: &PodView<'_>, min_ready_seconds: i32, now: Timestamp) -> Option<Duration> {
    if !view.ready || view.available {
        return None;
    }
    let due = view.ready_since? + SignedDuration::from_secs(i64::from(min_ready_seconds));
    let wait = now.duration_until(due).max(SignedDuration::ZERO);
    Some(Duration::try_from(wait).unwrap_or_default() + Duration::from_secs(1))
}

/// What the selector guard (`workload::selector_guard`) reads of a StatefulSet.
impl GuardedSet for StatefulSet {
    type Status = StatefulSetStatus;
    const CREATE_CONDITION: &'static str = FAILED_CREATE_POD;

    fn selector(&self) -> &LabelSelector {
        &self.spec.selector
    }

    fn template(&self) -> &PodTemplateSpec {
        &self.spec.template
    }

    fn status(&self) -> Option<&StatefulSetStatus> {
        self.status.as_ref()
    }
}

/// What the selector guard writes of a refused StatefulSet.
impl RefusableStatus for StatefulSetStatus {
    type Condition = StatefulSetCondition;

    fn observed_generation_mut(&mut self) -> &mut i64 {
        &mut self.observed_generation
    }

    fn conditions_mut(&mut self) -> &mut Vec<StatefulSetCondition> {
        &mut self.conditions
    }
}

/// What the shared steps of the sync fill in.
impl SharedProblems for SyncProblems {
    fn create_and_update(&mut self) -> (&mut Option<String>, &mut Option<String>) {
        (&mut self.create, &mut self.update)
    }
}

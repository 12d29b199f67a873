//! A DaemonSet's status as the native controller counts it (`updateDaemonSetStatus`):
//! per node that should run the pod, whether it runs one, and whether the oldest of its
//! pods is ready, available and updated; nodes that run one but should not are
//! misscheduled. Plus the problem conditions of the sync (FailedCreate, FailedUpdate,
//! FailedPodBackoff).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::jiff::Timestamp;

use super::nodes::{NodePods, oldest_first};
use crate::api::DaemonSet;
use crate::api::daemonset::{DaemonSetCondition, DaemonSetStatus};
use crate::controller::conditions::set_problem;
use crate::pod_set::kind::SharedProblems;
use crate::workload::node_eval::NodeFit;
use crate::workload::pod_view::{PodView, ViewContext};
use crate::workload::revision_adapter::short_hash;
use crate::workload::selector_guard::{GuardedSet, RefusableStatus};
use crate::workload::update_hold::{StrategyFields, UpdateHoldSeen, set_update_hold};

/// Condition: creating pods failed (the apiserver's message).
pub const FAILED_CREATE: &str = "FailedCreate";
/// Condition: updating pods failed or was refused.
pub const FAILED_UPDATE: &str = "FailedUpdate";
/// Condition: failed pods wait for their node's backoff before they are replaced.
pub const FAILED_POD_BACKOFF: &str = "FailedPodBackoff";

/// What the sync ran into, for the conditions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncProblems {
    pub create: Option<String>,
    pub update: Option<String>,
    /// Nodes whose failed pods wait for the backoff.
    pub failed_waiting_on: Vec<String>,
    /// Why pods stay on an older revision (partition, maxUnavailable, paused, OnDelete).
    pub update_hold: UpdateHoldSeen,
}

/// The fields an Advanced DaemonSet's update holds name.
const STRATEGY_FIELDS: StrategyFields = StrategyFields {
    paused: "spec.updateStrategy.rollingUpdate.paused",
    partition: "spec.updateStrategy.rollingUpdate.partition or its selector",
    partition_hint: "lower the partition or widen the selector to update them",
    max_unavailable: "spec.updateStrategy.rollingUpdate.maxUnavailable",
};

/// The revisions the status names.
pub struct Revisions<'a> {
    pub update: &'a str,
    pub collision_count: Option<i32>,
}

/// The status after this sync.
pub fn compute_status(
    ds: &DaemonSet,
    fits: &BTreeMap<String, NodeFit>,
    by_node: &BTreeMap<String, NodePods<'_>>,
    revisions: &Revisions<'_>,
    problems: &SyncProblems,
    now: Timestamp,
) -> DaemonSetStatus {
    let named = BTreeSet::new();
    let ctx = ViewContext {
        update_revision: revisions.update,
        min_ready_seconds: ds.spec.min_ready_seconds,
        now,
        named_for_deletion: &named,
    };
    let mut status = DaemonSetStatus {
        observed_generation: ds.metadata.generation.unwrap_or(0),
        collision_count: revisions.collision_count,
        daemon_set_hash: short_hash(revisions.update).to_owned(),
        conditions: ds.status.clone().unwrap_or_default().conditions,
        ..DaemonSetStatus::default()
    };
    for (node, pods) in by_node {
        // Pods pinned to no known node are not counted: the native controller counts
        // only the nodes it lists.
        let misplaced = fits.get(node).is_some_and(|f| !f.wanted);
        if misplaced && !pods.all.is_empty() {
            status.number_misscheduled += 1;
        }
    }
    for (node, fit) in fits {
        if !fit.wanted {
            continue;
        }
        status.desired_number_scheduled += 1;
        let Some(pods) = by_node.get(node).filter(|p| !p.all.is_empty()) else {
            continue;
        };
        status.current_number_scheduled += 1;
        let mut all = pods.all.clone();
        oldest_first(&mut all);
        let oldest = PodView::of(all[0], &ctx);
        if oldest.ready {
            status.number_ready += 1;
            if oldest.available {
                status.number_available += 1;
            }
        }
        if oldest.updated {
            status.updated_number_scheduled += 1;
        }
    }
    status.number_unavailable = status.desired_number_scheduled - status.number_available;
    set_problems(&mut status.conditions, problems, now);
    status
}

/// The problem conditions of what the sync ran into, and why pods stay on an older
/// revision.
fn set_problems(conditions: &mut Vec<DaemonSetCondition>, problems: &SyncProblems, now: Timestamp) {
    set_problem(conditions, FAILED_CREATE, problems.create.as_deref(), now);
    set_problem(conditions, FAILED_UPDATE, problems.update.as_deref(), now);
    let backoff = (!problems.failed_waiting_on.is_empty()).then(|| {
        format!(
            "failed pods on node(s) {} are replaced after a backoff, so a template that keeps failing does not recreate pods in a loop",
            problems.failed_waiting_on.join(", ")
        )
    });
    set_problem(conditions, FAILED_POD_BACKOFF, backoff.as_deref(), now);
    set_update_hold(conditions, &problems.update_hold, &STRATEGY_FIELDS, now);
}

/// How many nodes that should run the pod have their oldest pod updated and ready (what
/// pre-download waits for before it pulls ahead).
pub fn updated_ready_nodes(
    ds: &DaemonSet,
    fits: &BTreeMap<String, NodeFit>,
    by_node: &BTreeMap<String, NodePods<'_>>,
    update_revision: &str,
    now: Timestamp,
) -> i32 {
    let named = BTreeSet::new();
    let ctx = ViewContext {
        update_revision,
        min_ready_seconds: ds.spec.min_ready_seconds,
        now,
        named_for_deletion: &named,
    };
    let updated_ready = (fits.iter())
        .filter(|(_, fit)| fit.wanted)
        .filter_map(|(node, _)| {
            let mut all = by_node.get(node)?.all.clone();
            oldest_first(&mut all);
            let oldest = PodView::of(all.first()?, &ctx);
            (oldest.updated && oldest.ready).then_some(())
        })
        .count();
    i32::try_from(updated_ready).unwrap_or(i32::MAX)
}

/// What the selector guard (`workload::selector_guard`) reads of a DaemonSet.
impl GuardedSet for DaemonSet {
    type Status = DaemonSetStatus;
    const CREATE_CONDITION: &'static str = FAILED_CREATE;

    fn selector(&self) -> &LabelSelector {
        &self.spec.selector
    }

    fn template(&self) -> &PodTemplateSpec {
        &self.spec.template
    }

    fn status(&self) -> Option<&DaemonSetStatus> {
        self.status.as_ref()
    }
}

/// What the selector guard writes of a refused DaemonSet.
impl RefusableStatus for DaemonSetStatus {
    type Condition = DaemonSetCondition;

    fn observed_generation_mut(&mut self) -> &mut i64 {
        &mut self.observed_generation
    }

    fn conditions_mut(&mut self) -> &mut Vec<DaemonSetCondition> {
        &mut self.conditions
    }
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;

/// What the shared steps of the sync fill in.
impl SharedProblems for SyncProblems {
    fn create_and_update(&mut self) -> (&mut Option<String>, &mut Option<String>) {
        (&mut self.create, &mut self.update)
    }
}

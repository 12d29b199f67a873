//! The BroadcastJob planner: from the job, the nodes, the job's pods and the time, decide
//! which nodes get a pod now, which pods are deleted, whether the job pauses or is
//! deleted, its status, and when to look again. Pure: no client, no clock.
//!
//! Every node that fits the template (`workload::node_eval`) gets one pod, pinned to it.
//! Fitting includes resources as OpenKruise's `checkNodeFitness` judges them: the pod's
//! requests against the node's allocatable alone, not against the pods already there. A
//! node that could never hold the pod is not desired (the job completes without it); a
//! node that is only busy now is, and the scheduler places the pod once room frees up.
//! A node that has a pod, whatever its phase, is done with until that pod is gone: a
//! failed pod is never replaced, so a template that fails forever cannot flood the
//! cluster. At most `parallelism` pods are active at once. Nodes are evaluated on every
//! sync, so a node added later, or one whose blocking taint was removed, gets its pod
//! (OpenKruise #1199). With completion policy Always the job completes once no pod is
//! active and every fit node has had one; with Never it runs until deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::api::broadcastjob::{
    BroadcastJobPhase, BroadcastJobSpec, BroadcastJobStatus, FailurePolicyType,
};
use crate::api::common::CompletionPolicyType;
use crate::controller::conditions::{find, set_condition};
use crate::controller::events::PlannedEvent;
use crate::controller::job_ttl::{earlier, impl_job_plan, job_ttl, until};
use crate::workload::node_eval;
use crate::workload::node_resources::{NodeUsage, pod_requests};
use crate::workload::plan::MAX_CREATES_PER_SYNC;
use crate::workload::rollout::parallelism;

use super::pods::{pinned_node, restart_count};

pub const CONDITION_COMPLETE: &str = "Complete";
pub const CONDITION_FAILED: &str = "Failed";

/// Why a job failed (the Failed condition's reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureReason {
    /// `completionPolicy.activeDeadlineSeconds` passed before the job finished.
    DeadlineExceeded,
    /// A pod failed under failure policy FailFast.
    BackoffLimitExceeded,
    /// A pod's containers restarted more than `failurePolicy.restartLimit` times, under
    /// failure policy FailFast.
    RestartLimitExceeded,
}

impl FailureReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DeadlineExceeded => "DeadlineExceeded",
            Self::BackoffLimitExceeded => "BackoffLimitExceeded",
            Self::RestartLimitExceeded => "RestartLimitExceeded",
        }
    }
}

/// What the planner looks at: the job's spec and last status, every node, the pods the
/// job controls, and the time.
pub struct Snapshot<'a> {
    pub spec: &'a BroadcastJobSpec,
    pub status: &'a BroadcastJobStatus,
    pub nodes: &'a [Node],
    pub pods: &'a [Pod],
    /// Nodes whose last pod create failed and is backing off: no create there now.
    pub backing_off: &'a BTreeSet<String>,
    pub now: Timestamp,
}

/// A pod to delete, with the UID it must still have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodToDelete {
    pub name: String,
    pub uid: String,
}

/// What to do.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Nodes that get a pod now.
    pub create_on: Vec<String>,
    pub delete: Vec<PodToDelete>,
    /// Set `spec.paused` (failure policy Pause).
    pub pause: bool,
    /// The TTL after finishing ran out: delete the job (its pods go with it).
    pub delete_job: bool,
    pub status: BroadcastJobStatus,
    pub events: Vec<PlannedEvent>,
    pub requeue_after: Option<Duration>,
}

impl_job_plan!(Plan);

/// Where the job's pods stand.
#[derive(Default)]
struct PodCounts<'a> {
    active: Vec<&'a Pod>,
    succeeded: usize,
    /// Failed pods, each with whether it failed by its restart count.
    failed: Vec<(&'a Pod, bool)>,
    /// Nodes that have a pod of the job, in any phase.
    nodes: BTreeMap<String, ()>,
}

/// Plans one reconcile.
pub fn plan(s: &Snapshot<'_>) -> Plan {
    let mut plan = Plan {
        status: s.status.clone(),
        ..Plan::default()
    };
    let start = s.status.start_time.as_ref().map_or(s.now, |t| t.0);
    plan.status.start_time = Some(Time(start));
    let counts = count_pods(s.spec, s.pods);
    let fit_without_pod = fit_nodes_without_pod(s, &counts);
    plan.status.active = to_i32(counts.active.len());
    plan.status.succeeded = to_i32(counts.succeeded);
    plan.status.failed = to_i32(counts.failed.len());
    plan.status.desired = to_i32(counts.nodes.len() + fit_without_pod.len());

    if let Some(Time(finished)) = s.status.completion_time {
        let ttl_seconds = s.spec.completion_policy.ttl_seconds_after_finished;
        job_ttl(ttl_seconds, finished, s.now, "the job and its pods").apply(&mut plan);
        return plan;
    }
    if let Some(reason) = failure(s, &counts, start, &mut plan) {
        let running = counts.failed.iter().filter(|(_, by_restarts)| *by_restarts);
        let mut to_stop = counts.active.clone();
        to_stop.extend(running.map(|(pod, _)| *pod));
        fail(&mut plan, s.now, reason, &to_stop);
        let ttl_seconds = s.spec.completion_policy.ttl_seconds_after_finished;
        job_ttl(ttl_seconds, s.now, s.now, "the job and its pods").apply(&mut plan);
        return plan;
    }
    let paused = s.spec.paused || plan.pause;
    if !paused {
        let limit = parallelism(
            &s.spec.parallelism_or_default(),
            counts.nodes.len() + fit_without_pod.len(),
        );
        // One sync creates no more than the pod-set executor would; the rest come next.
        let room = limit
            .saturating_sub(counts.active.len())
            .min(MAX_CREATES_PER_SYNC);
        plan.create_on = fit_without_pod
            .into_iter()
            .filter(|node| !s.backing_off.contains(node))
            .take(room)
            .collect();
        plan.status.active += to_i32(plan.create_on.len());
    }
    let always = s.spec.completion_policy.policy_type() == CompletionPolicyType::Always;
    let remaining = plan.status.desired - plan.status.succeeded - plan.status.failed;
    if always && counts.active.is_empty() && plan.create_on.is_empty() && remaining <= 0 && !paused
    {
        complete(&mut plan, s.now);
        let ttl_seconds = s.spec.completion_policy.ttl_seconds_after_finished;
        job_ttl(ttl_seconds, s.now, s.now, "the job and its pods").apply(&mut plan);
        return plan;
    }
    plan.status.phase = if paused {
        BroadcastJobPhase::Paused
    } else {
        BroadcastJobPhase::Running
    };
    if always {
        deadline_requeue(&mut plan, s.spec, start, s.now);
    }
    plan
}

/// Sorts the job's pods: active, succeeded, failed (by phase, or by restarts past the
/// limit under restartPolicy OnFailure, as OpenKruise counts them).
fn count_pods<'a>(spec: &BroadcastJobSpec, pods: &'a [Pod]) -> PodCounts<'a> {
    let mut counts = PodCounts::default();
    let limit = spec.failure_policy.restart_limit;
    for pod in pods {
        if let Some(node) = pinned_node(pod) {
            counts.nodes.insert(node, ());
        }
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let on_failure = pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.as_deref())
            .is_some_and(|p| p == "OnFailure");
        match phase {
            Some("Succeeded") => counts.succeeded += 1,
            Some("Failed") => counts.failed.push((pod, false)),
            _ if on_failure && restart_count(pod) > limit => counts.failed.push((pod, true)),
            _ => counts.active.push(pod),
        }
    }
    counts
}

/// The nodes the template fits that have no pod of the job yet, in name order.
fn fit_nodes_without_pod(s: &Snapshot<'_>, counts: &PodCounts<'_>) -> Vec<String> {
    let spec = s.spec.template.spec.clone().unwrap_or_default();
    let requests = pod_requests(&spec);
    let nothing_bound = NodeUsage::default();
    s.nodes
        .iter()
        .filter(|node| node.metadata.deletion_timestamp.is_none())
        .filter_map(|node| node.metadata.name.clone().map(|name| (name, node)))
        .filter(|(name, node)| {
            !counts.nodes.contains_key(name)
                && node_eval::evaluate_with_room(&spec, node, &requests, &nothing_bound).should_run
        })
        .map(|(name, _)| name)
        .collect()
}

/// Why the job fails now, if it does: the deadline, or a failed pod under FailFast. A
/// failed pod under Pause pauses the job instead (once: the pause is what a person
/// lifts, and lifting it must not pause again at once for the same pod).
fn failure(
    s: &Snapshot<'_>,
    counts: &PodCounts<'_>,
    start: Timestamp,
    plan: &mut Plan,
) -> Option<FailureReason> {
    let always = s.spec.completion_policy.policy_type() == CompletionPolicyType::Always;
    if always
        && let Some(deadline) = deadline(s.spec, start)
        && deadline <= s.now
    {
        return Some(FailureReason::DeadlineExceeded);
    }
    let (first, by_restarts) = counts.failed.first()?;
    match s.spec.failure_policy.policy_type() {
        FailurePolicyType::FailFast if *by_restarts => Some(FailureReason::RestartLimitExceeded),
        FailurePolicyType::FailFast => Some(FailureReason::BackoffLimitExceeded),
        FailurePolicyType::Pause => {
            let known = s.status.failed;
            if !s.spec.paused && to_i32(counts.failed.len()) > known {
                plan.pause = true;
                plan.events.push(PlannedEvent {
                    warning: true,
                    reason: "Paused",
                    note: format!(
                        "pausing the job: pod {} failed and failurePolicy.type is Pause",
                        name_of(first)
                    ),
                });
            }
            None
        }
        FailurePolicyType::Continue => None,
    }
}

/// Fails the job: the Failed condition, phase, completion time, every running pod deleted.
fn fail(plan: &mut Plan, now: Timestamp, reason: FailureReason, running: &[&Pod]) {
    let message = match reason {
        FailureReason::DeadlineExceeded => {
            "the job was active longer than completionPolicy.activeDeadlineSeconds"
        }
        FailureReason::BackoffLimitExceeded => "a pod failed and failurePolicy.type is FailFast",
        FailureReason::RestartLimitExceeded => {
            "a pod's containers restarted more than failurePolicy.restartLimit times and failurePolicy.type is FailFast"
        }
    };
    set_condition(
        &mut plan.status.conditions,
        CONDITION_FAILED,
        true,
        reason.as_str(),
        message.to_owned(),
        now,
    );
    plan.status.phase = BroadcastJobPhase::Failed;
    plan.status.completion_time = Some(Time(now));
    plan.delete = running
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .map(|pod| PodToDelete {
            name: name_of(pod).to_owned(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        })
        .collect();
    plan.status.active = 0;
    plan.events.push(PlannedEvent {
        warning: true,
        reason: reason.as_str(),
        note: format!("the job failed: {message}"),
    });
}

/// Completes the job: the Complete condition, phase and completion time.
fn complete(plan: &mut Plan, now: Timestamp) {
    if find(&plan.status.conditions, CONDITION_COMPLETE).is_none() {
        plan.events.push(PlannedEvent {
            warning: false,
            reason: "Completed",
            note: format!(
                "the job completed: {} pods succeeded, {} failed",
                plan.status.succeeded, plan.status.failed
            ),
        });
    }
    set_condition(
        &mut plan.status.conditions,
        CONDITION_COMPLETE,
        true,
        "Completed",
        "every fit node ran the job's pod".to_owned(),
        now,
    );
    plan.status.phase = BroadcastJobPhase::Completed;
    plan.status.completion_time = Some(Time(now));
}

fn deadline(spec: &BroadcastJobSpec, start: Timestamp) -> Option<Timestamp> {
    let seconds = spec.completion_policy.active_deadline_seconds?;
    start
        .saturating_add(SignedDuration::from_secs(seconds))
        .ok()
}

/// Looks again at the deadline, so the job fails on time without polling.
fn deadline_requeue(plan: &mut Plan, spec: &BroadcastJobSpec, start: Timestamp, now: Timestamp) {
    if let Some(wait) = deadline(spec, start).and_then(|d| until(now, d)) {
        plan.requeue_after = earlier(plan.requeue_after, wait);
    }
}

fn name_of(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

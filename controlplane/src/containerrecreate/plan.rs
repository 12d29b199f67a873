//! The ContainerRecreateRequest state machine as a pure step: from the request, its pod,
//! the requests queued before it and what the agent last said, the next thing to do and
//! the status to show. Pending (checked, waiting its turn) → Recreating (the agent has the
//! operation) → Completed or Failed; then deleted after its TTL. The deadline ends a
//! request wherever it is (kruise #2353), and an agent that stops answering ends it after
//! [`AGENT_LOST_AFTER`], so no request stays Recreating forever.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt as _;

use crate::api::ContainerRecreateRequest;
use crate::api::containerrecreaterequest::{
    ContainerRecreateRequestPhase as Phase, ContainerRecreateRequestStatus, ContainerRecreateState,
    FailurePolicy, NODE_NAME_LABEL, POD_NAME_LABEL, POD_UID_LABEL,
};

/// How long an agent may fail to answer before the request fails.
pub const AGENT_LOST_AFTER: Duration = Duration::from_secs(60);
/// How often a running recreate's progress is read from the agent.
pub const POLL_EVERY: Duration = Duration::from_secs(2);
/// How soon to try again after an agent that did not answer, or was busy.
pub const RETRY_AGENT_AFTER: Duration = Duration::from_secs(5);
/// How soon to ask a budget that blocked the recreate again.
pub const RETRY_BUDGET_AFTER: Duration = Duration::from_secs(10);
/// A waiting request looks again this often, in case the earlier one's change was missed.
pub const RECHECK_WAITING_AFTER: Duration = Duration::from_secs(30);

/// The progress of one container, as the agent reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerProgress {
    pub name: String,
    /// Pending, Recreating, Succeeded or Failed.
    pub phase: Phase,
    pub message: String,
}

/// What the agent of the pod's node last said about this request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentView {
    /// Nothing yet: no restart asked for, or its progress not read yet.
    Silent,
    /// The progress of the restart operation.
    Progress {
        containers: Vec<ContainerProgress>,
        done: bool,
    },
    /// The agent has not answered since `since`.
    Unreachable { since: Timestamp, message: String },
    /// The agent refused the restart (the request can never succeed as it is).
    Refused(String),
    /// The agent no longer knows the operation: it restarted during the recreate.
    Lost(String),
    /// The agent is restarting other containers of this pod; try again later.
    Busy(String),
}

/// Everything one step reads.
#[derive(Clone, Debug)]
pub struct Snapshot<'a> {
    pub request: &'a ContainerRecreateRequest,
    /// The pod named by `spec.podName`, if the cache has it.
    pub pod: Option<&'a Pod>,
    /// Whether the Node the pod is bound to exists.
    pub node_exists: bool,
    /// An earlier unfinished request of the same pod (see [`earlier_request`]).
    pub earlier: Option<&'a str>,
    /// The agent's restart operation for this request, once one was started.
    pub operation: Option<&'a str>,
    pub agent: &'a AgentView,
    pub now: Timestamp,
}

/// What the agent is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartRequest {
    pub node: String,
    pub namespace: String,
    pub pod_name: String,
    pub pod_uid: String,
    pub containers: Vec<String>,
    pub ordered: bool,
    pub termination_grace_period_seconds: Option<i64>,
    pub unready_grace_period_seconds: i64,
    pub min_started_seconds: i64,
}

/// The side effect of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    None,
    /// Ask the budgets, then the agent; on success show [`Plan::status`] as Recreating.
    Start(RestartRequest),
    /// The TTL after finishing ran out.
    Delete,
}

/// The outcome of one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Labels the request lacks (pod name, pod UID, node name), to add.
    pub labels: BTreeMap<String, String>,
    pub action: Action,
    /// The status to write (for `Start`: the status while the agent is being asked).
    pub status: ContainerRecreateRequestStatus,
    pub requeue_after: Option<Duration>,
}

/// The next step for the request.
pub fn plan(s: &Snapshot<'_>) -> Plan {
    let mut current = s.request.status.clone().unwrap_or_default();
    if current.phase.is_finished() {
        return after_finish(s, current);
    }
    // What the agent last reported counts even when the request ends now.
    if let (Some(_), AgentView::Progress { containers, .. }) = (s.operation, s.agent) {
        current.container_recreate_states = states_of(containers);
    }
    // OpenKruise checks this first: a request whose pod is gone ends Completed.
    if pod_gone(s) {
        return finish(current, Phase::Completed, POD_GONE.to_owned(), s.now);
    }
    if let Some(deadline) = deadline(s.request)
        && s.now >= deadline
    {
        let seconds = s.request.spec.active_deadline_seconds.unwrap_or_default();
        let message =
            format!("The request did not finish within its activeDeadlineSeconds ({seconds}s).");
        return failed(s, current, message, "not recreated before the deadline");
    }
    let pod = match checked_pod(s) {
        Ok(pod) => pod,
        Err(message) => return failed(s, current, message, ""),
    };
    let mut plan = match s.operation {
        None => before_start(s, pod, current),
        Some(operation) => following(s, operation, current),
    };
    plan.labels = missing_labels(s.request, pod);
    plan.requeue_after = earliest(plan.requeue_after, until_deadline(s));
    plan
}

/// The status while a budget holds the recreate: Pending, saying which budget and why
/// (`held` is the budget's own sentence, naming it), asked again after
/// [`RETRY_BUDGET_AFTER`].
pub fn held(status: &ContainerRecreateRequestStatus, held: &str) -> Plan {
    Plan {
        labels: BTreeMap::new(),
        action: Action::None,
        status: ContainerRecreateRequestStatus {
            phase: Phase::Pending,
            message: format!("Waiting for a disruption budget: {held}."),
            ..status.clone()
        },
        requeue_after: Some(RETRY_BUDGET_AFTER),
    }
}

/// The status once the agent accepted the restart: Recreating, every container Pending.
pub fn recreating(
    request: &ContainerRecreateRequest,
    node: &str,
) -> ContainerRecreateRequestStatus {
    ContainerRecreateRequestStatus {
        phase: Phase::Recreating,
        completion_time: None,
        message: format!("The agent of node {node} is recreating the containers."),
        container_recreate_states: request
            .spec
            .containers
            .iter()
            .map(|c| ContainerRecreateState {
                name: c.name.clone(),
                phase: Phase::Pending,
                message: String::new(),
            })
            .collect(),
    }
}

/// The earliest unfinished request for the same pod created before `request` (by
/// creation time, then name), which `request` waits for.
pub fn earlier_request<'a>(
    request: &ContainerRecreateRequest,
    others: impl IntoIterator<Item = &'a ContainerRecreateRequest>,
) -> Option<&'a str> {
    let order = |r: &ContainerRecreateRequest| {
        let created = r.metadata.creation_timestamp.as_ref().map(|t| t.0);
        (created, r.metadata.name.clone().unwrap_or_default())
    };
    let mine = order(request);
    others
        .into_iter()
        .filter(|o| o.metadata.namespace == request.metadata.namespace)
        .filter(|o| o.spec.pod_name == request.spec.pod_name)
        .filter(|o| o.metadata.uid != request.metadata.uid)
        .filter(|o| !o.status.as_ref().is_some_and(|st| st.phase.is_finished()))
        .filter(|o| order(o) < mine)
        .min_by_key(|o| order(o))
        .and_then(|o| o.metadata.name.as_deref())
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// The message of a request whose pod is gone, OpenKruise's own words.
pub const POD_GONE: &str = "pod has gone";

/// OpenKruise's `pod has gone` (`ContainerRecreateRequest` controller `Reconcile`): the
/// pod does not exist, is being deleted, or is another pod than the one whose UID the
/// request recorded. Such a request ends Completed, not Failed.
fn pod_gone(s: &Snapshot<'_>) -> bool {
    let Some(pod) = s.pod else {
        return true;
    };
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let replaced = s
        .request
        .labels()
        .get(POD_UID_LABEL)
        .is_some_and(|recorded| recorded != uid);
    replaced || pod.metadata.deletion_timestamp.is_some()
}

/// The pod, if it is one the request can still act on; otherwise why not (a gone pod
/// is [`pod_gone`]'s).
fn checked_pod<'a>(s: &Snapshot<'a>) -> Result<&'a Pod, String> {
    let name = &s.request.spec.pod_name;
    let pod = s.pod.ok_or_else(|| format!("Pod {name} does not exist."))?;
    let Some(node) = node_of(pod) else {
        return Err(format!("Pod {name} is not bound to a node."));
    };
    if !s.node_exists {
        return Err(format!("Node {node} of pod {name} does not exist."));
    }
    let known: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|spec| spec.containers.iter().map(|c| c.name.as_str()))
        .collect();
    let missing: Vec<&str> = s
        .request
        .spec
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .filter(|c| !known.contains(c))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "Pod {name} has no container named {}.",
            missing.join(", ")
        ));
    }
    Ok(pod)
}

fn before_start(s: &Snapshot<'_>, pod: &Pod, current: ContainerRecreateRequestStatus) -> Plan {
    let node = node_of(pod).unwrap_or_default();
    if current.phase == Phase::Recreating {
        // Started, but which operation the agent runs was never recorded.
        let message = format!(
            "The restart operation on node {node} was not recorded; whether the containers were recreated is unknown."
        );
        return failed(s, current, message, "");
    }
    let pending = |message: String, requeue: Duration, action: Action| Plan {
        labels: BTreeMap::new(),
        action,
        status: ContainerRecreateRequestStatus {
            phase: Phase::Pending,
            message,
            ..current.clone()
        },
        requeue_after: Some(requeue),
    };
    if let Some(earlier) = s.earlier {
        let message =
            format!("Waiting for ContainerRecreateRequest {earlier} of the same pod to finish.");
        return pending(message, RECHECK_WAITING_AFTER, Action::None);
    }
    let start = Action::Start(restart_request(s.request, pod));
    match s.agent {
        AgentView::Refused(reason) => {
            let message = format!("The agent of node {node} refused the restart: {reason}");
            failed(s, current, message, "")
        }
        AgentView::Unreachable { since, message } => {
            if waited(*since, s.now) >= AGENT_LOST_AFTER {
                let message = format!(
                    "The agent of node {node} did not answer for {}s: {message}",
                    AGENT_LOST_AFTER.as_secs()
                );
                return failed(s, current, message, "");
            }
            let message = format!("Waiting for the agent of node {node} to answer: {message}");
            pending(message, RETRY_AGENT_AFTER, start)
        }
        AgentView::Busy(reason) => {
            let message = format!("The agent of node {node} is busy with this pod: {reason}");
            pending(message, RETRY_AGENT_AFTER, start)
        }
        AgentView::Silent | AgentView::Progress { .. } | AgentView::Lost(_) => {
            let message = format!("Asking the agent of node {node} to recreate the containers.");
            pending(message, RETRY_AGENT_AFTER, start)
        }
    }
}

fn restart_request(request: &ContainerRecreateRequest, pod: &Pod) -> RestartRequest {
    let strategy = &request.spec.strategy;
    RestartRequest {
        node: node_of(pod).unwrap_or_default().to_owned(),
        namespace: pod.namespace().unwrap_or_default(),
        pod_name: pod.name_any(),
        pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
        containers: request
            .spec
            .containers
            .iter()
            .map(|c| c.name.clone())
            .collect(),
        ordered: strategy.ordered_recreate,
        termination_grace_period_seconds: strategy.termination_grace_period_seconds,
        unready_grace_period_seconds: strategy.unready_grace_period_seconds.unwrap_or(0),
        min_started_seconds: i64::from(strategy.min_started_seconds),
    }
}

fn following(s: &Snapshot<'_>, operation: &str, current: ContainerRecreateRequestStatus) -> Plan {
    let node = s
        .request
        .labels()
        .get(NODE_NAME_LABEL)
        .cloned()
        .unwrap_or_default();
    let recreating = |status: ContainerRecreateRequestStatus, requeue: Duration| Plan {
        labels: BTreeMap::new(),
        action: Action::None,
        status,
        requeue_after: Some(requeue),
    };
    match s.agent {
        AgentView::Progress { containers, done } => progress(s, current, containers, *done),
        AgentView::Unreachable { since, message } => {
            if waited(*since, s.now) >= AGENT_LOST_AFTER {
                let message = format!(
                    "The agent of node {node} stopped answering during the recreate ({}s): {message}; the containers may or may not have been recreated.",
                    AGENT_LOST_AFTER.as_secs()
                );
                return failed(s, current, message, "the agent stopped answering");
            }
            let message = format!("Waiting for the agent of node {node} to answer: {message}");
            recreating(with_message(current, message), RETRY_AGENT_AFTER)
        }
        AgentView::Lost(reason) => {
            let message = format!(
                "The agent of node {node} no longer knows restart operation {operation} (it restarted during the recreate): {reason}"
            );
            failed(s, current, message, "the agent lost the operation")
        }
        AgentView::Refused(reason) => {
            let message = format!("The agent of node {node} refused to report progress: {reason}");
            failed(s, current, message, "")
        }
        AgentView::Silent | AgentView::Busy(_) => {
            let status = ContainerRecreateRequestStatus {
                phase: Phase::Recreating,
                ..current
            };
            recreating(status, POLL_EVERY)
        }
    }
}

/// Follows the agent's progress: a failed container ends the request under
/// failurePolicy Fail; once the agent is done the request is Completed.
fn progress(
    s: &Snapshot<'_>,
    current: ContainerRecreateRequestStatus,
    containers: &[ContainerProgress],
    done: bool,
) -> Plan {
    let states = states_of(containers);
    let failures: Vec<String> = containers
        .iter()
        .filter(|c| c.phase == Phase::Failed)
        .map(|c| format!("{}: {}", c.name, c.message))
        .collect();
    let policy = s.request.spec.strategy.policy();
    let base = ContainerRecreateRequestStatus {
        container_recreate_states: states,
        ..current
    };
    if !failures.is_empty() && policy == FailurePolicy::Fail {
        let message = format!("Container {}", failures.join("; container "));
        return finish(base, Phase::Failed, message, s.now);
    }
    if done {
        let message = if failures.is_empty() {
            "Every container was recreated.".to_owned()
        } else {
            format!(
                "Done; failed containers ignored (failurePolicy Ignore): {}",
                failures.join("; ")
            )
        };
        return finish(base, Phase::Completed, message, s.now);
    }
    let status = ContainerRecreateRequestStatus {
        phase: Phase::Recreating,
        ..base
    };
    Plan {
        labels: BTreeMap::new(),
        action: Action::None,
        status,
        requeue_after: Some(POLL_EVERY),
    }
}

fn states_of(containers: &[ContainerProgress]) -> Vec<ContainerRecreateState> {
    containers
        .iter()
        .map(|c| ContainerRecreateState {
            name: c.name.clone(),
            phase: c.phase,
            message: c.message.clone(),
        })
        .collect()
}

/// A finished request waits out its TTL, then is deleted.
fn after_finish(s: &Snapshot<'_>, current: ContainerRecreateRequestStatus) -> Plan {
    let (action, requeue_after) = match (
        s.request.spec.ttl_seconds_after_finished,
        &current.completion_time,
    ) {
        (Some(ttl), Some(done)) => {
            let expires = done.0 + SignedDuration::from_secs(i64::from(ttl));
            if s.now >= expires {
                (Action::Delete, None)
            } else {
                (Action::None, Some(until(s.now, expires)))
            }
        }
        _ => (Action::None, None),
    };
    Plan {
        labels: BTreeMap::new(),
        action,
        status: current,
        requeue_after,
    }
}

/// Ends the request as Failed; containers not finished get `container_message`, or
/// keep their state when it is empty.
fn failed(
    s: &Snapshot<'_>,
    current: ContainerRecreateRequestStatus,
    message: String,
    container_message: &str,
) -> Plan {
    let mut status = current;
    if !container_message.is_empty() {
        for state in &mut status.container_recreate_states {
            if !state.phase.is_finished() {
                state.phase = Phase::Failed;
                state.message = container_message.to_owned();
            }
        }
    }
    finish(status, Phase::Failed, message, s.now)
}

fn finish(
    status: ContainerRecreateRequestStatus,
    phase: Phase,
    message: String,
    now: Timestamp,
) -> Plan {
    Plan {
        labels: BTreeMap::new(),
        action: Action::None,
        status: ContainerRecreateRequestStatus {
            phase,
            completion_time: Some(Time(now)),
            message,
            ..status
        },
        // The next step (the TTL) is planned from the written status.
        requeue_after: Some(Duration::ZERO),
    }
}

fn with_message(
    current: ContainerRecreateRequestStatus,
    message: String,
) -> ContainerRecreateRequestStatus {
    ContainerRecreateRequestStatus { message, ..current }
}

/// The pod name, UID and node labels OpenKruise puts on a request, where missing. The
/// admission webhook (`containerrecreate::admission`) sets them at create; this is the
/// fallback for a request made before the webhook was installed. The UID is recorded
/// once, so a pod replaced under the same name is noticed.
fn missing_labels(request: &ContainerRecreateRequest, pod: &Pod) -> BTreeMap<String, String> {
    let wanted = [
        (POD_NAME_LABEL, pod.name_any()),
        (POD_UID_LABEL, pod.metadata.uid.clone().unwrap_or_default()),
        (NODE_NAME_LABEL, node_of(pod).unwrap_or_default().to_owned()),
    ];
    wanted
        .into_iter()
        .filter(|(key, _)| !request.labels().contains_key(*key))
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
}

fn deadline(request: &ContainerRecreateRequest) -> Option<Timestamp> {
    let seconds = request.spec.active_deadline_seconds?;
    let created = request.metadata.creation_timestamp.as_ref()?.0;
    Some(created + SignedDuration::from_secs(seconds))
}

fn until_deadline(s: &Snapshot<'_>) -> Option<Duration> {
    deadline(s.request).map(|d| until(s.now, d))
}

fn until(now: Timestamp, then: Timestamp) -> Duration {
    Duration::try_from(then.duration_since(now)).unwrap_or(Duration::ZERO)
}

fn waited(since: Timestamp, now: Timestamp) -> Duration {
    until(since, now)
}

fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

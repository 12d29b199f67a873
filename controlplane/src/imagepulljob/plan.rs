//! The ImagePullJob planner: from the job, the nodes (and pods, for `podSelector`), the
//! job's entry and the image's progress on each node, and the time, decide which nodes
//! get the job's ImageList entry now, which lose it, the job's status, and whether the
//! job is deleted. Pure: no client, no clock.
//!
//! A node the job has an entry on and whose pull has not finished is *active*; at most
//! `parallelism` nodes are active at once, and a node that finished (Succeeded or Failed)
//! holds no slot. With completion policy Always the job completes once every node
//! finished, or fails the rest at `activeDeadlineSeconds`; then its entries are removed
//! and, after `ttlSecondsAfterFinished`, the job itself. With Never it keeps pulling on
//! nodes as they come, and a node that has the image gets an entry that re-pulls it daily.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::api::ImagePullJob;
use crate::api::common::CompletionPolicyType;
use crate::api::imagelist::{ImageListEntry, ImagePullPhase, ImageStatus, PullSecretReference};
use crate::api::imagepulljob::{ImagePullJobStatus, ImagePullPolicy};
use crate::controller::events::PlannedEvent;
use crate::controller::job_ttl::{earlier, impl_job_plan, job_ttl, until};
use crate::imagepulljob::progress::{self, Part};
use crate::workload::node::is_ready;
pub use crate::workload::rollout::parallelism;
use crate::workload::selector::selector_matches;

/// How often a node that has the image pulls it again under completion policy Never.
pub const REPULL_INTERVAL: &str = "24h";
/// How soon to look again while selected nodes have no ImageList yet (the distributor
/// creates them; its write also triggers a reconcile, this is the safety net).
pub const MISSING_LIST_REQUEUE: Duration = Duration::from_secs(10);

pub const MESSAGE_COMPLETED: &str = "job has completed";
pub const MESSAGE_DEADLINE: &str = "job exceeded activeDeadlineSeconds";

/// The job's image on one node that has an ImageList.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeImage {
    /// The ImageList's entry for the image while this job's manager holds it.
    pub owned: Option<ImageListEntry>,
    /// The image's status, when the ImageList's status covers its current spec
    /// (`observedGeneration` caught up); `None` reads as Waiting.
    pub status: Option<ImageStatus>,
}

/// What the planner looks at.
pub struct Snapshot<'a> {
    pub job: &'a ImagePullJob,
    pub nodes: Vec<&'a Node>,
    /// Pods in the job's namespace (read only with `podSelector`).
    pub pods: Vec<&'a Pod>,
    /// Per node with an ImageList, keyed by node name.
    pub lists: BTreeMap<String, NodeImage>,
    pub now: Timestamp,
}

/// What to do.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Nodes whose ImageList gets (or updates) the job's entry.
    pub apply: Vec<(String, ImageListEntry)>,
    /// Nodes whose ImageList loses the job's entry.
    pub release: Vec<String>,
    pub status: ImagePullJobStatus,
    /// The TTL after finishing ran out.
    pub delete_job: bool,
    pub requeue_after: Option<Duration>,
    pub events: Vec<PlannedEvent>,
}

impl_job_plan!(Plan);

/// Where one selected node stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NodeState {
    /// No ImageList yet: the job cannot start there.
    NoList,
    /// Not started: the job has no entry there.
    Pending,
    Active,
    Succeeded,
    Failed,
}

/// Plans one reconcile of `s.job`.
pub fn plan(s: &Snapshot<'_>) -> Plan {
    let job = s.job;
    let old = job.status.clone().unwrap_or_default();
    let mut plan = Plan {
        status: old.clone(),
        ..Plan::default()
    };
    let start = old.start_time.as_ref().map_or(s.now, |t| t.0);
    plan.status.start_time = Some(Time(start));
    let owned: Vec<&str> = s
        .lists
        .iter()
        .filter(|(_, image)| image.owned.is_some())
        .map(|(node, _)| node.as_str())
        .collect();
    let policy = job.spec.completion_policy.policy_type();

    if policy == CompletionPolicyType::Always
        && let Some(Time(completed)) = old.completion_time
    {
        plan.release = owned.iter().map(|n| (*n).to_owned()).collect();
        plan.status.active = 0;
        let ttl_seconds = job.spec.completion_policy.ttl_seconds_after_finished;
        job_ttl(ttl_seconds, completed, s.now, "the job").apply(&mut plan);
        return plan;
    }

    let targets = targets(s);
    let nodes = Nodes(
        targets
            .iter()
            .map(|node| (*node, state(s, node, start)))
            .collect(),
    );
    plan.release = owned
        .iter()
        .filter(|n| !targets.contains(*n))
        .map(|n| (*n).to_owned())
        .collect();
    let desired = targets.len();
    let mut failed_nodes = nodes.named(NodeState::Failed);
    plan.status.progress = Some(progress::summarize(
        &nodes.parts(s),
        desired,
        old.progress.as_ref(),
        old.desired,
    ));
    plan.status.desired = to_i32(desired);
    plan.status.succeeded = to_i32(nodes.count(NodeState::Succeeded));
    plan.events
        .extend(new_failure_events(s, &failed_nodes, &old.failed_nodes));

    if finish_if_past_deadline(s, start, &nodes, &owned, &mut failed_nodes, &mut plan) {
        return plan;
    }
    run_nodes(s, (&nodes, desired), &owned, failed_nodes, plan)
}

/// Under completion policy `Always`, once `activeDeadlineSeconds` from `start` passed,
/// fails every unfinished node and finishes the job (`true`); a deadline still ahead
/// requeues the job for it.
fn finish_if_past_deadline(
    s: &Snapshot<'_>,
    start: Timestamp,
    nodes: &Nodes<'_>,
    owned: &[&str],
    failed_nodes: &mut Vec<String>,
    plan: &mut Plan,
) -> bool {
    let job = s.job;
    let policy = &job.spec.completion_policy;
    let Some(seconds) = policy.active_deadline_seconds else {
        return false;
    };
    if policy.policy_type() != CompletionPolicyType::Always {
        return false;
    }
    match start.saturating_add(SignedDuration::from_secs(seconds)) {
        Ok(deadline) if deadline <= s.now => {
            let unfinished = nodes.unfinished();
            plan.events.push(PlannedEvent {
                warning: true,
                reason: "DeadlineExceeded",
                note: format!(
                    "{MESSAGE_DEADLINE} ({seconds}s); {} nodes had not finished pulling {}",
                    unfinished.len(),
                    job.spec.image
                ),
            });
            failed_nodes.extend(unfinished);
            failed_nodes.sort();
            let failed_nodes = std::mem::take(failed_nodes);
            finish(plan, owned, failed_nodes, MESSAGE_DEADLINE, s.now, job);
            true
        }
        Ok(deadline) => {
            plan.requeue_after = until(s.now, deadline);
            false
        }
        Err(_) => false,
    }
}

/// The target nodes and where each stands.
struct Nodes<'a>(BTreeMap<&'a str, NodeState>);

impl Nodes<'_> {
    fn count(&self, wanted: NodeState) -> usize {
        self.0.values().filter(|st| **st == wanted).count()
    }

    fn named(&self, wanted: NodeState) -> Vec<String> {
        self.0
            .iter()
            .filter(|(_, st)| **st == wanted)
            .map(|(n, _)| (*n).to_owned())
            .collect()
    }

    /// The progress of each node that started: finished, or by the bytes its agent wrote.
    fn parts(&self, s: &Snapshot<'_>) -> Vec<Part> {
        self.0
            .iter()
            .filter_map(|(node, st)| {
                let status = s.lists.get(*node).and_then(|i| i.status.as_ref());
                let (done, total) = status.map_or((0, 0), |st| (st.bytes_done, st.bytes_total));
                match st {
                    NodeState::Succeeded | NodeState::Failed => {
                        Some(Part::from_bytes(true, done, total))
                    }
                    NodeState::Active => Some(Part::from_bytes(false, done, total)),
                    NodeState::NoList | NodeState::Pending => None,
                }
            })
            .collect()
    }

    /// The nodes that have neither succeeded nor failed.
    fn unfinished(&self) -> Vec<String> {
        self.0
            .iter()
            .filter(|(_, st)| !matches!(st, NodeState::Succeeded | NodeState::Failed))
            .map(|(n, _)| (*n).to_owned())
            .collect()
    }
}

/// A Warning for each node that failed since the last status.
fn new_failure_events(
    s: &Snapshot<'_>,
    failed: &[String],
    reported: &[String],
) -> Vec<PlannedEvent> {
    failed
        .iter()
        .filter(|n| !reported.contains(n))
        .map(|node| {
            let message = s
                .lists
                .get(node)
                .and_then(|image| image.status.as_ref())
                .map(|status| status.message.as_str())
                .unwrap_or_default();
            PlannedEvent {
                warning: true,
                reason: "PullFailed",
                note: format!(
                    "pulling {} failed on node {node}: {message}",
                    s.job.spec.image
                ),
            }
        })
        .collect()
}

/// A job within its deadline: starts pending nodes while slots are free, keeps the entries
/// it holds in line with its spec, and completes an Always job with nothing left to do.
fn run_nodes(
    s: &Snapshot<'_>,
    (nodes, desired): (&Nodes<'_>, usize),
    owned: &[&str],
    failed_nodes: Vec<String>,
    mut plan: Plan,
) -> Plan {
    let job = s.job;
    let policy = job.spec.completion_policy.policy_type();
    let succeeded = nodes.count(NodeState::Succeeded);
    let limit = parallelism(&job.spec.parallelism_or_default(), desired);
    let started = start_pending(&mut plan, job, nodes, limit);
    follow_spec(&mut plan, s, nodes, policy);

    let active = nodes.count(NodeState::Active) + started;
    let no_list = nodes.count(NodeState::NoList);
    let pending = nodes.count(NodeState::Pending) - started;
    plan.status.active = to_i32(active);
    plan.status.failed = to_i32(failed_nodes.len());
    plan.status.failed_nodes = failed_nodes;
    if policy == CompletionPolicyType::Always && active == 0 && pending == 0 && no_list == 0 {
        let failed = plan.status.failed_nodes.clone();
        plan.events.push(PlannedEvent {
            warning: false,
            reason: "Completed",
            note: format!(
                "{MESSAGE_COMPLETED}: {} pulled on {succeeded} of {desired} nodes, {} failed",
                job.spec.image,
                failed.len()
            ),
        });
        finish(&mut plan, owned, failed, MESSAGE_COMPLETED, s.now, job);
        return plan;
    }
    plan.status.message = running_message(desired, active, succeeded, no_list, limit);
    if no_list > 0 {
        plan.requeue_after = earlier(plan.requeue_after, MISSING_LIST_REQUEUE);
    }
    plan
}

/// Starts pending nodes while fewer than `limit` are active, in name order; returns how
/// many it started.
fn start_pending(plan: &mut Plan, job: &ImagePullJob, nodes: &Nodes<'_>, limit: usize) -> usize {
    let entry = entry_for(job, false);
    let free = limit.saturating_sub(nodes.count(NodeState::Active));
    let started: Vec<String> = nodes
        .named(NodeState::Pending)
        .into_iter()
        .take(free)
        .collect();
    for node in &started {
        plan.apply.push((node.clone(), entry.clone()));
    }
    if !started.is_empty() {
        plan.events.push(PlannedEvent {
            warning: false,
            reason: "Pulling",
            note: format!("pulling {} on {}", job.spec.image, started.join(", ")),
        });
    }
    started.len()
}

/// Entries the job holds follow its spec; under Never a node that has the image re-pulls
/// it daily.
fn follow_spec(plan: &mut Plan, s: &Snapshot<'_>, nodes: &Nodes<'_>, policy: CompletionPolicyType) {
    for (node, st) in &nodes.0 {
        let Some(current) = s.lists.get(*node).and_then(|i| i.owned.as_ref()) else {
            continue;
        };
        let repull = policy == CompletionPolicyType::Never && *st == NodeState::Succeeded;
        let wanted = entry_for(s.job, repull);
        if *current != wanted {
            plan.apply.push(((*node).to_owned(), wanted));
        }
    }
}

/// Ends an Always job: completion time, message, every entry released, then the TTL.
fn finish(
    plan: &mut Plan,
    owned: &[&str],
    failed_nodes: Vec<String>,
    message: &str,
    now: Timestamp,
    job: &ImagePullJob,
) {
    plan.apply.clear();
    plan.release = owned.iter().map(|n| (*n).to_owned()).collect();
    plan.status.active = 0;
    plan.status.failed = to_i32(failed_nodes.len());
    plan.status.failed_nodes = failed_nodes;
    plan.status.completion_time = Some(Time(now));
    // Every node finished, by pulling, failing, or running out of time.
    plan.status.progress.get_or_insert_default().percent = 100;
    message.clone_into(&mut plan.status.message);
    plan.requeue_after = None;
    let ttl_seconds = job.spec.completion_policy.ttl_seconds_after_finished;
    job_ttl(ttl_seconds, now, now, "the job").apply(plan);
}

fn running_message(
    desired: usize,
    active: usize,
    succeeded: usize,
    no_list: usize,
    limit: usize,
) -> String {
    let mut message =
        format!("job is running: {succeeded} of {desired} nodes pulled, {active} pulling");
    if limit == 0 {
        message.push_str("; paused (parallelism 0)");
    }
    if no_list > 0 {
        message.push_str(&format!("; waiting for the ImageList of {no_list} nodes"));
    }
    message
}

/// The nodes the job pulls on: the selected ones that are Ready, and selected ones the
/// job already has an entry on (a pull under way is not dropped when a node blips).
fn targets<'a>(s: &'a Snapshot<'_>) -> BTreeSet<&'a str> {
    let spec = &s.job.spec;
    let namespace = s.job.metadata.namespace.as_deref().unwrap_or_default();
    let pod_nodes: Option<BTreeSet<&str>> = spec.pod_selector.as_ref().map(|selector| {
        let empty = BTreeMap::new();
        s.pods
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let phase = p.status.as_ref().and_then(|st| st.phase.as_deref());
                !matches!(phase, Some("Succeeded" | "Failed"))
            })
            .filter(|p| {
                selector_matches(selector, p.metadata.labels.as_ref().unwrap_or(&empty))
                    == Some(true)
            })
            .filter_map(|p| p.spec.as_ref()?.node_name.as_deref())
            .collect()
    });
    s.nodes
        .iter()
        .filter(|node| {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let labels = node.metadata.labels.clone().unwrap_or_default();
            let selected = match (&pod_nodes, &spec.selector) {
                (Some(pod_nodes), _) => pod_nodes.contains(name),
                (None, Some(selector)) => match &selector.names {
                    Some(names) => names.iter().any(|n| n == name),
                    None => selector_matches(&selector.label_selector(), &labels) == Some(true),
                },
                (None, None) => true,
            };
            let has_entry = s.lists.get(name).is_some_and(|i| i.owned.is_some());
            selected && (is_ready(node) || has_entry)
        })
        .filter_map(|node| node.metadata.name.as_deref())
        .collect()
}

fn state(s: &Snapshot<'_>, node: &str, start: Timestamp) -> NodeState {
    let Some(image) = s.lists.get(node) else {
        return NodeState::NoList;
    };
    if image.owned.is_none() {
        return NodeState::Pending;
    }
    let Some(status) = &image.status else {
        // Under Never the re-pull entry marks a node that had the image: until its agent
        // reports on the changed entry, it still counts as done (not as a new pull that
        // would flip the entry back).
        let repulling = s.job.spec.completion_policy.policy_type() == CompletionPolicyType::Never
            && image.owned.as_ref() == Some(&entry_for(s.job, true));
        return if repulling {
            NodeState::Succeeded
        } else {
            NodeState::Active
        };
    };
    match status.phase {
        ImagePullPhase::Succeeded => {
            // With imagePullPolicy Always the image must have been pulled for this job,
            // not found from an earlier pull.
            let fresh = s.job.spec.pull_policy_or_default() != ImagePullPolicy::Always
                || status.last_pull_time.as_ref().is_some_and(|t| t.0 >= start);
            if fresh {
                NodeState::Succeeded
            } else {
                NodeState::Active
            }
        }
        ImagePullPhase::Failed => NodeState::Failed,
        ImagePullPhase::Waiting | ImagePullPhase::Pulling => NodeState::Active,
    }
}

/// The entry the job writes on a node; `repull` for a node that has the image under
/// completion policy Never.
pub fn entry_for(job: &ImagePullJob, repull: bool) -> ImageListEntry {
    let spec = &job.spec;
    let namespace = job.metadata.namespace.clone().unwrap_or_default();
    let pull_policy = spec.pull_policy.clone().unwrap_or_default();
    ImageListEntry {
        always_pull: repull || spec.pull_policy_or_default() == ImagePullPolicy::Always,
        pull_interval: repull.then(|| REPULL_INTERVAL.to_owned()),
        next_pull: None,
        pull_secrets: spec
            .pull_secrets
            .iter()
            .map(|name| PullSecretReference {
                namespace: namespace.clone(),
                name: name.clone(),
            })
            .collect(),
        timeout_seconds: pull_policy.timeout_seconds,
        backoff_limit: pull_policy.backoff_limit,
    }
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

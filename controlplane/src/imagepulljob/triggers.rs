//! Which ImagePullJobs a change concerns: the job itself; for an ImageList, the jobs of
//! every image in its spec or status; for a Node or a Pod, the unfinished jobs whose
//! selection it may change — and only when what selection reads changed (a node's labels
//! or readiness, a pod's node or labels), not on every heartbeat or status update, so a
//! large cluster does not turn node heartbeats into a storm of reconciles.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt as _;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::common::CompletionPolicyType;
use crate::api::{ImageList, ImagePullJob};
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::Triggers;
use crate::workload::node::is_ready;
use crate::workload::selector::selector_matches;

/// How long a job waits for more ImageList changes before it syncs. While a job pulls on
/// every node, each node's agent reports progress on its ImageList, and syncing once per
/// report was 35,485 syncs for one job over 500 nodes (`tests/bench/imagelist.sh`), each
/// reading every ImageList. A quarter second delays what the job reports by as much and
/// lets one sync read all the reports of that quarter.
pub const IMAGELIST_WINDOW: Duration = Duration::from_millis(250);

/// The jobs pulling one of the images an ImageList names.
pub fn keys_for_imagelist(list: &ImageList, jobs: &[Arc<ImagePullJob>]) -> Vec<ObjectKey> {
    let in_list = |image: &str| {
        list.spec.images.contains_key(image)
            || list
                .status
                .as_ref()
                .is_some_and(|s| s.images.contains_key(image))
    };
    jobs.iter()
        .filter(|job| in_list(&job.spec.image))
        .map(|job| ObjectKey::of(job.as_ref()))
        .collect()
}

/// Whether a job still picks nodes (finished Always jobs only release entries, which
/// ImageList events drive).
fn running(job: &ImagePullJob) -> bool {
    job.spec.completion_policy.policy_type() == CompletionPolicyType::Never
        || job
            .status
            .as_ref()
            .is_none_or(|s| s.completion_time.is_none())
}

/// The jobs a node's change may concern: running jobs that select nodes by labels, by
/// this node's name, or that select all nodes.
pub fn keys_for_node(node: &str, jobs: &[Arc<ImagePullJob>]) -> Vec<ObjectKey> {
    jobs.iter()
        .filter(|job| running(job) && job.spec.pod_selector.is_none())
        .filter(
            |job| match job.spec.selector.as_ref().and_then(|s| s.names.as_ref()) {
                Some(names) => names.iter().any(|n| n == node),
                None => true,
            },
        )
        .map(|job| ObjectKey::of(job.as_ref()))
        .collect()
}

/// The jobs in a pod's namespace whose podSelector matches it.
pub fn keys_for_pod(
    namespace: &str,
    labels: &BTreeMap<String, String>,
    jobs: &[Arc<ImagePullJob>],
) -> Vec<ObjectKey> {
    jobs.iter()
        .filter(|job| running(job) && job.metadata.namespace.as_deref() == Some(namespace))
        .filter(|job| {
            job.spec
                .pod_selector
                .as_ref()
                .is_some_and(|s| selector_matches(s, labels) == Some(true))
        })
        .map(|job| ObjectKey::of(job.as_ref()))
        .collect()
}

/// What node selection reads from a Node: labels and readiness (None: deleted).
type NodeFacts = Option<(BTreeMap<String, String>, bool)>;
/// What pod selection reads from a Pod: labels, node and whether it counts (None: gone).
type PodFacts = Option<(BTreeMap<String, String>, Option<String>, bool)>;

fn node_facts(nodes: &Store<Node>, name: &str) -> NodeFacts {
    let node = nodes.get(&ObjectRef::new(name))?;
    Some((node.labels().clone(), is_ready(&node)))
}

fn pod_facts(pod: &Pod) -> PodFacts {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let counts =
        pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"));
    Some((
        pod.labels().clone(),
        pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        counts,
    ))
}

/// The jobs a node's change concerns, if it changed what node selection reads since
/// `seen` (the store already holds the event's outcome; a deleted node is absent).
fn node_changed(
    seen: &mut HashMap<String, NodeFacts>,
    nodes: &Store<Node>,
    node: &Node,
    jobs: &Store<ImagePullJob>,
) -> Vec<ObjectKey> {
    let name = node.name_any();
    let facts = node_facts(nodes, &name);
    if seen.get(&name) == Some(&facts) {
        return Vec::new();
    }
    let keys = keys_for_node(&name, &jobs.state());
    match facts {
        Some(_) => seen.insert(name, facts),
        None => seen.remove(&name),
    };
    keys
}

/// The jobs a pod's change concerns, if it changed what pod selection reads since `seen`.
fn pod_changed(
    seen: &mut HashMap<(String, String), PodFacts>,
    pods: &Store<Pod>,
    pod: &Pod,
    jobs: &Store<ImagePullJob>,
) -> Vec<ObjectKey> {
    let namespace = pod.namespace().unwrap_or_default();
    let id = (namespace.clone(), pod.name_any());
    let gone = pods.get(&ObjectRef::new(&id.1).within(&id.0)).is_none();
    let facts = if gone { None } else { pod_facts(pod) };
    if seen.get(&id) == Some(&facts) {
        return Vec::new();
    }
    let keys = keys_for_pod(&namespace, pod.labels(), &jobs.state());
    match facts {
        Some(_) => seen.insert(id, facts),
        None => seen.remove(&id),
    };
    keys
}

/// What the ImagePullJob controller listens to: its jobs, ImageLists, and nodes and pods
/// (only a change of what selection reads).
pub fn watches(
    changes: &Changes,
    jobs: &Store<ImagePullJob>,
    nodes: Store<Node>,
    pods: Store<Pod>,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    let (for_list, for_node, for_pod) = (jobs.clone(), jobs.clone(), jobs.clone());
    let mut seen_nodes = HashMap::new();
    let mut seen_pods = HashMap::new();
    Triggers::of(jobs, queue)
        .watch_own(&changes.imagepulljobs)
        .watch_coalesced(&changes.imagelists, IMAGELIST_WINDOW, move |list| {
            keys_for_imagelist(list, &for_list.state())
        })
        .watch(&changes.nodes, move |node| {
            node_changed(&mut seen_nodes, &nodes, node, &for_node)
        })
        .watch(&changes.pods, move |pod| {
            pod_changed(&mut seen_pods, &pods, pod, &for_pod)
        })
}

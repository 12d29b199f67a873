//! Which ImagePullJobs a change concerns: the job itself; for an ImageList, the jobs of
//! every image in its spec or status; for a Node or a Pod, the unfinished jobs whose
//! selection it may change — and only when what selection reads changed (a node's labels
//! or readiness, a pod's node or labels), not on every heartbeat or status update, so a
//! large cluster does not turn node heartbeats into a storm of reconciles.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt as _;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio_util::sync::CancellationToken;

use crate::api::common::CompletionPolicyType;
use crate::api::{ImageList, ImagePullJob};
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::received;
use crate::runtime::stores::Changes;
use crate::workload::selector::selector_matches;

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
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    Some((node.labels().clone(), ready))
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

/// Feeds `queue` from the shared watches until `shutdown`.
pub async fn run(
    changes: Changes,
    jobs: Store<ImagePullJob>,
    nodes: Store<Node>,
    pods: Store<Pod>,
    queue: WorkQueue<ObjectKey>,
    shutdown: CancellationToken,
) {
    let mut job_rx = changes.imagepulljobs.subscribe();
    let mut list_rx = changes.imagelists.subscribe();
    let mut node_rx = changes.nodes.subscribe();
    let mut pod_rx = changes.pods.subscribe();
    let mut seen_nodes: HashMap<String, NodeFacts> = HashMap::new();
    let mut seen_pods: HashMap<(String, String), PodFacts> = HashMap::new();
    let all = || {
        (jobs.state().iter())
            .map(|job| ObjectKey::of(job.as_ref()))
            .collect()
    };
    loop {
        let keys = tokio::select! {
            () = shutdown.cancelled() => return,
            r = job_rx.recv() => received(r, |job| vec![ObjectKey::of(job.as_ref())]),
            r = list_rx.recv() => received(r, |list| keys_for_imagelist(list, &jobs.state())),
            r = node_rx.recv() => received(r, |node| {
                let name = node.name_any();
                // The store already holds the event's outcome; a deleted node is absent.
                let facts = node_facts(&nodes, &name);
                if seen_nodes.get(&name) == Some(&facts) {
                    return Vec::new();
                }
                let keys = keys_for_node(&name, &jobs.state());
                match facts {
                    Some(_) => seen_nodes.insert(name, facts),
                    None => seen_nodes.remove(&name),
                };
                keys
            }),
            r = pod_rx.recv() => received(r, |pod| {
                let namespace = pod.namespace().unwrap_or_default();
                let id = (namespace.clone(), pod.name_any());
                let gone = pods.get(&ObjectRef::new(&id.1).within(&id.0)).is_none();
                let facts = if gone { None } else { pod_facts(pod) };
                if seen_pods.get(&id) == Some(&facts) {
                    return Vec::new();
                }
                let keys = keys_for_pod(&namespace, pod.labels(), &jobs.state());
                match facts {
                    Some(_) => seen_pods.insert(id, facts),
                    None => seen_pods.remove(&id),
                };
                keys
            }),
        };
        if !keys.queue(&queue, "ImagePullJob", all) {
            return;
        }
    }
}

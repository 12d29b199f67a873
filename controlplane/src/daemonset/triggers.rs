//! Which DaemonSets a change concerns: the DaemonSet itself; the controller of a pod or
//! revision, and, for an orphan pod, every DaemonSet in its namespace whose selector
//! matches it (it may be adopted); for a node, every DaemonSet — but only when what node
//! evaluation reads changed (labels, taints, unschedulable, allocatable, the node coming
//! or going); for any pod event on a node a DaemonSet waits on for room, that DaemonSet.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::Store;
use tokio_util::sync::CancellationToken;

use super::unplaced::UnplacedNodes;
use crate::api::DaemonSet;
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::received;
use crate::workload::node_changes::SeenNodes;
use crate::workload::triggers::owner_keys;

/// The DaemonSet keys an owned object's change concerns.
pub fn keys_for(meta: &ObjectMeta, sets: &[Arc<DaemonSet>], orphan_lookup: bool) -> Vec<ObjectKey> {
    owner_keys(meta, sets, |s| &s.spec.selector, orphan_lookup)
}

/// Every DaemonSet: a node change may concern any of them.
fn all_keys(sets: &Store<DaemonSet>) -> Vec<ObjectKey> {
    (sets.state().iter())
        .map(|s| ObjectKey::of(s.as_ref()))
        .collect()
}

/// Feeds `queue` from the shared watches until `shutdown`.
pub async fn run(
    changes: Changes,
    sets: Store<DaemonSet>,
    nodes: Store<Node>,
    unplaced: Arc<UnplacedNodes>,
    queue: WorkQueue<ObjectKey>,
    shutdown: CancellationToken,
) {
    let mut own = changes.daemonsets.subscribe();
    let mut pods = changes.pods.subscribe();
    let mut revisions = changes.revisions.subscribe();
    let mut node_rx = changes.nodes.subscribe();
    let mut seen_nodes = SeenNodes::default();
    loop {
        let keys = tokio::select! {
            () = shutdown.cancelled() => return,
            r = own.recv() => received(r, |s| vec![ObjectKey::of(s.as_ref())]),
            r = pods.recv() => received(r, |p| {
                let mut keys = keys_for(&p.metadata, &sets.state(), true);
                if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
                    keys.extend(unplaced.waiting_on(node));
                }
                keys
            }),
            r = revisions.recv() => received(r, |r| keys_for(&r.metadata, &[], false)),
            r = node_rx.recv() => received(r, |node| {
                if seen_nodes.changed(&nodes, node) { all_keys(&sets) } else { Vec::new() }
            }),
        };
        if !keys.queue(&queue, "DaemonSet", || all_keys(&sets)) {
            return;
        }
    }
}

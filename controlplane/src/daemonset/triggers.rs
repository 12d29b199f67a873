//! Which DaemonSets a change concerns: the DaemonSet itself; the controller of a pod or
//! revision, and, for an orphan pod, every DaemonSet in its namespace whose selector
//! matches it (it may be adopted); for a node, every DaemonSet — but only when what node
//! evaluation reads changed (labels, taints, unschedulable, allocatable, the node coming
//! or going); for any pod event on a node a DaemonSet waits on for room, that DaemonSet.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::Store;

use super::unplaced::UnplacedNodes;
use crate::api::DaemonSet;
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::{Triggers, every_key};
use crate::workload::node_changes::SeenNodes;
use crate::workload::triggers::owner_keys;

/// The DaemonSet keys an owned object's change concerns.
pub fn keys_for(meta: &ObjectMeta, sets: &[Arc<DaemonSet>], orphan_lookup: bool) -> Vec<ObjectKey> {
    owner_keys(meta, sets, |s| &s.spec.selector, orphan_lookup)
}

/// What the DaemonSet controller listens to: its sets, their pods (an orphan may be
/// adopted; a pod on a node a set waits on for room wakes that set), revisions, and
/// nodes (only a change of what node evaluation reads).
pub fn watches(
    changes: &Changes,
    sets: &Store<DaemonSet>,
    nodes: Store<Node>,
    unplaced: Arc<UnplacedNodes>,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    let (pod_owners, node_owners) = (sets.clone(), sets.clone());
    let mut seen_nodes = SeenNodes::default();
    Triggers::of(sets, queue)
        .watch_own(&changes.daemonsets)
        .watch(&changes.pods, move |p| {
            let mut keys = keys_for(&p.metadata, &pod_owners.state(), true);
            if let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
                keys.extend(unplaced.waiting_on(node));
            }
            keys
        })
        .watch(&changes.revisions, |r| keys_for(&r.metadata, &[], false))
        .watch(&changes.nodes, move |node| {
            if seen_nodes.changed(&nodes, node) {
                every_key(&node_owners)
            } else {
                Vec::new()
            }
        })
}

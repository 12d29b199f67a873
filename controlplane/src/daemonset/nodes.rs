//! A DaemonSet's pods grouped by the node they are pinned to (the native controller's
//! `getNodesToDaemonPods`), and the order in which a node's pods are kept.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::workload::node_pin::pinned_node;

/// The pods pinned to one node.
#[derive(Clone, Debug, Default)]
pub struct NodePods<'a> {
    /// Every pod, except those already terminating after they finished (the native
    /// controller's `includeDeletedTerminal: false`): a terminating running pod still
    /// holds its node, so no second pod is created beside it.
    pub all: Vec<&'a Pod>,
    /// Failed and not terminating.
    pub failed: Vec<&'a Pod>,
    /// Neither failed nor succeeded, and not terminating.
    pub running: Vec<&'a Pod>,
}

impl<'a> NodePods<'a> {
    /// The pods a delete may still act on (not terminating).
    pub fn live(&self) -> impl Iterator<Item = &'a Pod> + '_ {
        self.all
            .iter()
            .copied()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
    }
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Pods by the node they are pinned to; pods pinned to no node come under `""`.
pub fn node_pods<'a>(pods: &[&'a Pod]) -> BTreeMap<String, NodePods<'a>> {
    let mut by_node: BTreeMap<String, NodePods<'a>> = BTreeMap::new();
    for &pod in pods {
        let terminating = pod.metadata.deletion_timestamp.is_some();
        let finished = matches!(phase(pod), "Succeeded" | "Failed");
        if terminating && finished {
            continue;
        }
        let entry = by_node
            .entry(pinned_node(pod).unwrap_or_default())
            .or_default();
        entry.all.push(pod);
        if terminating {
            continue;
        }
        match phase(pod) {
            "Failed" => entry.failed.push(pod),
            "Succeeded" => {}
            _ => entry.running.push(pod),
        }
    }
    by_node
}

/// Oldest first (by creation time, then name), as the native controller keeps the
/// oldest of several pods on a node and counts it in status.
pub fn oldest_first(pods: &mut [&Pod]) {
    pods.sort_by(|a, b| {
        let created = |p: &Pod| p.metadata.creation_timestamp.clone().map(|t| t.0);
        created(a)
            .cmp(&created(b))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

//! Which node changes matter to workloads that place one pod per node (BroadcastJob,
//! Advanced DaemonSet): only what node evaluation (`node_eval`, `node_resources`) reads —
//! labels, taints, `spec.unschedulable`, allocatable resources, the node coming or going —
//! not every status heartbeat.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt as _;
use kube::runtime::reflector::{ObjectRef, Store};

/// What node evaluation reads from a Node: labels, taints, unschedulable, allocatable
/// (None: gone).
type NodeFacts = Option<(
    BTreeMap<String, String>,
    Vec<Taint>,
    bool,
    Option<BTreeMap<String, Quantity>>,
)>;

fn node_facts(nodes: &Store<Node>, name: &str) -> NodeFacts {
    let node = nodes.get(&ObjectRef::new(name))?;
    let spec = node.spec.clone().unwrap_or_default();
    Some((
        node.labels().clone(),
        spec.taints.unwrap_or_default(),
        spec.unschedulable.unwrap_or(false),
        node.status.as_ref().and_then(|s| s.allocatable.clone()),
    ))
}

/// The facts last seen per node, to tell a change that matters from a heartbeat.
#[derive(Default)]
pub struct SeenNodes {
    seen: HashMap<String, NodeFacts>,
}

impl SeenNodes {
    /// Whether `node`'s event changed what node evaluation reads; the store already
    /// holds the event's outcome (a deleted node is absent from it).
    pub fn changed(&mut self, nodes: &Store<Node>, node: &Node) -> bool {
        let name = node.name_any();
        let facts = node_facts(nodes, &name);
        if self.seen.get(&name) == Some(&facts) {
            return false;
        }
        match facts {
            Some(_) => self.seen.insert(name, facts),
            None => self.seen.remove(&name),
        };
        true
    }
}

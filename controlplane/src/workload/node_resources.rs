//! Whether a node has room for one more pod: its allocatable resources minus the requests
//! of the pods already bound to it, against the pod's own requests (the scheduler's
//! `NodeResourcesFit`, which the native DaemonSet controller once ran itself as
//! "insufficient resources → wanted but not scheduled").
//!
//! Quantities are compared in thousandths (`500m` CPU → 500, `1Ki` memory → 1 024 000),
//! exact for every amount a node reports. A node that reports no allocatable resources
//! yet is not judged here: the scheduler decides when it binds.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::inplace::resize::quantity_value;

/// The allocatable entry that caps how many pods a node runs.
const PODS: &str = "pods";

/// Resource name → amount in thousandths.
pub type Amounts = BTreeMap<String, i128>;

/// What the pods bound to one node already take.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeUsage {
    pub requests: Amounts,
    pub pods: i128,
}

impl NodeUsage {
    fn add(&mut self, requests: &Amounts) {
        for (name, amount) in requests {
            *self.requests.entry(name.clone()).or_default() += amount;
        }
        self.pods += 1;
    }
}

fn thousandths(quantity: &Quantity) -> i128 {
    // A malformed quantity the apiserver let through counts as nothing, as no request.
    quantity_value(&quantity.0).map_or(0, |v| (v * 1000.0).ceil() as i128)
}

fn container_requests(container: &Container) -> Amounts {
    let resources = container.resources.as_ref();
    let requests = resources.and_then(|r| r.requests.as_ref());
    // A limit without a request is the request (the apiserver's defaulting).
    let limits = resources.and_then(|r| r.limits.as_ref());
    let mut amounts: Amounts = limits
        .into_iter()
        .flatten()
        .map(|(name, q)| (name.clone(), thousandths(q)))
        .collect();
    amounts
        .extend((requests.into_iter().flatten()).map(|(name, q)| (name.clone(), thousandths(q))));
    amounts
}

fn add_into(total: &mut Amounts, more: &Amounts) {
    for (name, amount) in more {
        *total.entry(name.clone()).or_default() += amount;
    }
}

fn max_into(total: &mut Amounts, other: &Amounts) {
    for (name, amount) in other {
        let entry = total.entry(name.clone()).or_default();
        *entry = (*entry).max(*amount);
    }
}

/// The requests the scheduler charges a pod with: its containers and restartable
/// (sidecar) init containers summed; each ordinary init container runs alone beside the
/// sidecars started before it, so the larger of the two counts; plus the pod overhead.
pub fn pod_requests(spec: &PodSpec) -> Amounts {
    let mut total = Amounts::new();
    for container in &spec.containers {
        add_into(&mut total, &container_requests(container));
    }
    let mut sidecars = Amounts::new();
    let mut init_peak = Amounts::new();
    for init in spec.init_containers.iter().flatten() {
        let requests = container_requests(init);
        if init.restart_policy.as_deref() == Some("Always") {
            add_into(&mut sidecars, &requests);
            max_into(&mut init_peak, &sidecars);
        } else {
            let mut alone = sidecars.clone();
            add_into(&mut alone, &requests);
            max_into(&mut init_peak, &alone);
        }
    }
    add_into(&mut total, &sidecars);
    max_into(&mut total, &init_peak);
    let overhead = spec.overhead.iter().flatten();
    add_into(
        &mut total,
        &overhead.map(|(n, q)| (n.clone(), thousandths(q))).collect(),
    );
    total
}

/// What the pods bound to each node take; finished pods hold nothing, and pods `skip`
/// names are left out (a DaemonSet's own pods: its new pod replaces them).
pub fn usage_by_node<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    skip: impl Fn(&Pod) -> bool,
) -> HashMap<String, NodeUsage> {
    let mut usage: HashMap<String, NodeUsage> = HashMap::new();
    for pod in pods {
        let Some(spec) = pod.spec.as_ref() else {
            continue;
        };
        let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) else {
            continue;
        };
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) || skip(pod) {
            continue;
        }
        usage
            .entry(node.to_owned())
            .or_default()
            .add(&pod_requests(spec));
    }
    usage
}

/// The first resource `node` cannot spare for a pod requesting `requests`, with the
/// amounts (thousandths) requested and free; `None` when the pod fits.
pub fn insufficient(
    requests: &Amounts,
    node: &Node,
    usage: &NodeUsage,
) -> Option<(String, i128, i128)> {
    let allocatable = node.status.as_ref()?.allocatable.as_ref()?;
    let free = |name: &str, used: i128| allocatable.get(name).map_or(0, thousandths) - used;
    if allocatable.contains_key(PODS) {
        let left = free(PODS, usage.pods * 1000);
        if left < 1000 {
            return Some((PODS.to_owned(), 1000, left.max(0)));
        }
    }
    requests
        .iter()
        .filter(|(name, amount)| **amount > 0 && name.as_str() != PODS)
        .find_map(|(name, amount)| {
            let used = usage.requests.get(name).copied().unwrap_or(0);
            let left = free(name, used);
            (*amount > left).then(|| (name.clone(), *amount, left.max(0)))
        })
}

#[cfg(test)]
#[path = "node_resources_tests.rs"]
mod tests;

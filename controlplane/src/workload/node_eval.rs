//! Whether a pod that belongs on every node (a BroadcastJob task, a DaemonSet pod) fits a
//! given node: the native DaemonSet controller's `nodeShouldRunDaemonPod` as a pure rule.
//!
//! What it checks, in the scheduler's order: `spec.nodeName`, the node selector and the
//! required node affinity, then the node's taints (and `spec.unschedulable`, which the
//! scheduler reads as the taint `node.kubernetes.io/unschedulable:NoSchedule`) against the
//! pod's tolerations. A `NoSchedule` taint the pod does not tolerate keeps a new pod off
//! the node but lets a running one stay; a `NoExecute` one does neither.
//!
//! [`evaluate_with_room`] adds resource fit (`workload::node_resources`): a node that
//! fits in every other way but lacks room is still wanted (it counts as desired) but gets
//! no new pod until room frees up, as the native controller once decided it.
//!
//! Left out (the scheduler decides them when it binds, and a pod pinned to a node that
//! cannot hold it fails there, visibly): host ports, volume topology and
//! `PreferNoSchedule` (a preference, never a refusal). A DaemonSet's pods carry the
//! tolerations upstream adds to every daemon pod ([`with_daemon_tolerations`]), in the
//! spec evaluated and in the pod created alike.

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};

use super::node_resources::{Amounts, NodeUsage, insufficient};

/// The taint the scheduler reads into a node with `spec.unschedulable: true`.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";
const NO_SCHEDULE: &str = "NoSchedule";
const NO_EXECUTE: &str = "NoExecute";

/// The tolerations the native DaemonSet controller adds to every daemon pod
/// (`AddOrUpdateDaemonPodTolerations`): a daemon keeps running on a node that is not
/// ready or unreachable, and is placed on one under disk, memory or PID pressure or
/// cordoned; a pod on the host network also on one whose network is not set up yet.
const DAEMON_TOLERATIONS: [(&str, &str); 6] = [
    ("node.kubernetes.io/not-ready", NO_EXECUTE),
    ("node.kubernetes.io/unreachable", NO_EXECUTE),
    ("node.kubernetes.io/disk-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/memory-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/pid-pressure", NO_SCHEDULE),
    (UNSCHEDULABLE_TAINT_KEY, NO_SCHEDULE),
];
/// Tolerated by daemon pods on the host network only.
const NETWORK_UNAVAILABLE_TAINT_KEY: &str = "node.kubernetes.io/network-unavailable";

/// `spec` with the daemon tolerations added (an `Exists` toleration per key and effect),
/// each only when the spec does not already carry one for that key and effect.
pub fn with_daemon_tolerations(spec: &PodSpec) -> PodSpec {
    let mut spec = spec.clone();
    let host_network = spec.host_network.unwrap_or(false);
    let network = host_network.then_some((NETWORK_UNAVAILABLE_TAINT_KEY, NO_SCHEDULE));
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for (key, effect) in DAEMON_TOLERATIONS.into_iter().chain(network) {
        let present = tolerations.iter().any(|t| {
            t.key.as_deref() == Some(key) && t.effect.as_deref().unwrap_or(effect) == effect
        });
        if !present {
            tolerations.push(Toleration {
                key: Some(key.to_owned()),
                operator: Some("Exists".to_owned()),
                effect: Some(effect.to_owned()),
                ..Toleration::default()
            });
        }
    }
    spec
}

/// The verdict on one pod spec and one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFit {
    /// The node should run the pod (it counts as desired), room or not.
    pub wanted: bool,
    /// A new pod may be placed on the node.
    pub should_run: bool,
    /// A pod already on the node may stay (only NoExecute taints evict).
    pub should_continue_running: bool,
    /// Why a new pod may not be placed, when it may not.
    pub unfit: Option<Unfit>,
}

/// Why a pod does not fit a node; the message is a sentence for events.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    #[error("the pod template names node {wanted} in spec.nodeName")]
    OtherNodeName { wanted: String },
    #[error("the node's labels do not match the pod template's nodeSelector")]
    NodeSelector,
    #[error("the node does not match the pod template's required node affinity")]
    NodeAffinity,
    #[error("the node has the taint {key}:{effect}, which the pod template does not tolerate")]
    Taint { key: String, effect: String },
    #[error(
        "the node has only {free} {resource} free beside the pods bound to it, and the pod template requests {requested}"
    )]
    Insufficient {
        resource: String,
        requested: Amount,
        free: Amount,
    },
}

/// An amount in thousandths, shown as a quantity (`1500m`, `2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Amount(pub i128);

impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 % 1000 == 0 {
            write!(f, "{}", self.0 / 1000)
        } else {
            write!(f, "{}m", self.0)
        }
    }
}

/// [`evaluate`], and a node with too little room left for `requests` (the pod's
/// requests, `node_resources::pod_requests`) beside what `usage` says its pods take:
/// still wanted, but no new pod is placed.
pub fn evaluate_with_room(
    spec: &PodSpec,
    node: &Node,
    requests: &Amounts,
    usage: &NodeUsage,
) -> NodeFit {
    let mut fit = evaluate(spec, node);
    if fit.should_run
        && let Some((resource, requested, free)) = insufficient(requests, node, usage)
    {
        fit.should_run = false;
        fit.unfit = Some(Unfit::Insufficient {
            resource,
            requested: Amount(requested),
            free: Amount(free),
        });
    }
    fit
}

/// `nodeShouldRunDaemonPod` for `spec` on `node`.
pub fn evaluate(spec: &PodSpec, node: &Node) -> NodeFit {
    let placement = placement_unfit(spec, node);
    let taints = node_taints(node);
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let untolerated = |effect: &str| {
        taints
            .iter()
            .find(|taint| taint.effect == effect && !tolerated(taint, tolerations))
    };
    let evicting = untolerated(NO_EXECUTE);
    let placed = placement.is_none();
    let unfit = placement.or_else(|| {
        evicting
            .or_else(|| untolerated(NO_SCHEDULE))
            .map(|taint| Unfit::Taint {
                key: taint.key.clone(),
                effect: taint.effect.clone(),
            })
    });
    NodeFit {
        wanted: unfit.is_none(),
        should_run: unfit.is_none(),
        should_continue_running: placed && evicting.is_none(),
        unfit,
    }
}

/// What keeps the pod off the node regardless of taints.
fn placement_unfit(spec: &PodSpec, node: &Node) -> Option<Unfit> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if let Some(wanted) = spec.node_name.as_deref().filter(|n| !n.is_empty())
        && wanted != name
    {
        return Some(Unfit::OtherNodeName {
            wanted: wanted.to_owned(),
        });
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let selector_met = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    if !selector_met {
        return Some(Unfit::NodeSelector);
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        Some(selector)
            if !selector
                .node_selector_terms
                .iter()
                .any(|t| term_matches(t, node)) =>
        {
            Some(Unfit::NodeAffinity)
        }
        _ => None,
    }
}

/// The node's taints, with `spec.unschedulable` read as the scheduler reads it.
fn node_taints(node: &Node) -> Vec<Taint> {
    let spec = node.spec.as_ref();
    let mut taints: Vec<Taint> = spec.and_then(|s| s.taints.clone()).unwrap_or_default();
    if spec.and_then(|s| s.unschedulable).unwrap_or(false) {
        taints.push(Taint {
            key: UNSCHEDULABLE_TAINT_KEY.to_owned(),
            effect: NO_SCHEDULE.to_owned(),
            ..Taint::default()
        });
    }
    taints
}

/// `v1.Toleration.ToleratesTaint` for any of `tolerations`.
fn tolerated(taint: &Taint, tolerations: &[Toleration]) -> bool {
    tolerations.iter().any(|toleration| {
        let effect = toleration.effect.as_deref().unwrap_or_default();
        let key = toleration.key.as_deref().unwrap_or_default();
        let effect_ok = effect.is_empty() || effect == taint.effect;
        let key_ok = key.is_empty() || key == taint.key;
        let value_ok = match toleration.operator.as_deref().unwrap_or("Equal") {
            "Exists" => true,
            "Equal" | "" => {
                toleration.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default()
            }
            _ => false,
        };
        effect_ok && key_ok && value_ok
    })
}

/// One node selector term: its requirements ANDed; a term with none matches no node.
fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let name = node.metadata.name.clone().unwrap_or_default();
    expressions
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key)))
        && fields.iter().all(|r| {
            // metadata.name is the one field selector nodes support.
            r.key == "metadata.name" && requirement_matches(r, Some(&name))
        })
}

/// A node selector requirement against the value found under its key.
fn requirement_matches(requirement: &NodeSelectorRequirement, value: Option<&String>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    let as_int = |s: &str| s.parse::<i64>().ok();
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [bound]) = (value.and_then(|v| as_int(v)), values) else {
                return false;
            };
            let Some(bound) = as_int(bound) else {
                return false;
            };
            if requirement.operator == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

#[cfg(test)]
#[path = "node_eval_tests.rs"]
mod tests;

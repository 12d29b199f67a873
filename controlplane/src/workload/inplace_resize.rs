//! In-place resource resize (OpenKruise 1.8 `InPlaceWorkloadVerticalScaling`, Kubernetes'
//! `resize` subresource): which container `resources` changes the kubelet can apply to a
//! running pod, and when it has applied them.
//!
//! Kubernetes resizes only `cpu` and `memory` of regular containers, never removes a
//! request or limit, and refuses a resize that would change the pod's QoS class; any other
//! resource change needs a new pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Map, Value};

/// The resources the kubelet resizes in place.
pub const RESIZABLE: [&str; 2] = ["cpu", "memory"];
/// Pod condition while a resize waits for the kubelet (reason Deferred or Infeasible).
pub const RESIZE_PENDING: &str = "PodResizePending";
/// Pod condition while the kubelet applies a resize.
pub const RESIZE_IN_PROGRESS: &str = "PodResizeInProgress";
/// Reason of `PodResizePending` when the node can never fit the new resources.
pub const REASON_INFEASIBLE: &str = "Infeasible";

/// How one container's `resources` changed between two templates.
#[derive(Clone, Debug, PartialEq)]
pub enum ResourcesChange {
    Unchanged,
    /// Resizable in place to these resources.
    Resize(ResourceRequirements),
    /// Only a new pod can carry the change.
    NotResizable,
}

/// Classifies a change of one container's `resources` (JSON as in the template).
pub fn resources_change(old: Option<&Value>, new: Option<&Value>) -> ResourcesChange {
    if old == new {
        return ResourcesChange::Unchanged;
    }
    let empty = Map::new();
    let section = |v: Option<&Value>, key: &str| -> Map<String, Value> {
        v.and_then(|v| v.get(key))
            .and_then(Value::as_object)
            .unwrap_or(&empty)
            .clone()
    };
    let other_fields = |v: Option<&Value>| -> Map<String, Value> {
        let mut m = v.and_then(Value::as_object).cloned().unwrap_or_default();
        m.remove("requests");
        m.remove("limits");
        m
    };
    if other_fields(old) != other_fields(new) {
        return ResourcesChange::NotResizable; // claims
    }
    for key in ["requests", "limits"] {
        let (o, n) = (section(old, key), section(new, key));
        for name in o.keys().chain(n.keys()) {
            let (ov, nv) = (o.get(name), n.get(name));
            let resizable = RESIZABLE.contains(&name.as_str());
            if ov != nv && (!resizable || nv.is_none()) {
                return ResourcesChange::NotResizable;
            }
        }
    }
    match new
        .cloned()
        .map(serde_json::from_value::<ResourceRequirements>)
    {
        Some(Ok(resources)) => ResourcesChange::Resize(resources),
        None => ResourcesChange::Resize(ResourceRequirements::default()),
        Some(Err(_)) => ResourcesChange::NotResizable,
    }
}

/// Kubernetes' pod QoS class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// The QoS class of a pod spec (JSON), by Kubernetes' rules: requests default to limits;
/// Guaranteed when every container limits cpu and memory with requests equal to limits,
/// BestEffort when none requests or limits either.
pub fn qos_class(pod_spec: &Value) -> QosClass {
    let containers = ["containers", "initContainers"]
        .iter()
        .filter_map(|key| pod_spec.get(*key)?.as_array())
        .flatten();
    let (mut any, mut guaranteed) = (false, true);
    for container in containers {
        let get = |section: &str, name: &str| {
            container
                .pointer(&format!("/resources/{section}/{name}"))
                .and_then(Value::as_str)
                .and_then(quantity_value)
                .filter(|v| *v != 0.0)
        };
        for name in RESIZABLE {
            let limit = get("limits", name);
            let request = get("requests", name).or(limit);
            any |= limit.is_some() || request.is_some();
            guaranteed &= limit.is_some() && request == limit;
        }
    }
    match (any, guaranteed) {
        (false, _) => QosClass::BestEffort,
        (true, true) => QosClass::Guaranteed,
        (true, false) => QosClass::Burstable,
    }
}

/// A quantity as a number (`500m` → 0.5, `64Mi` → 67108864), `None` when malformed.
pub fn quantity_value(quantity: &str) -> Option<f64> {
    let q = quantity.trim();
    let split = q.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let exponent = suffix.len() > 1 && suffix.starts_with(['e', 'E']);
    if exponent {
        return q.parse::<f64>().ok(); // 1e3, 5E-1
    }
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return None,
    };
    number.parse::<f64>().ok().map(|n| n * scale)
}

fn same_quantity(a: &Quantity, b: &Quantity) -> bool {
    match (quantity_value(&a.0), quantity_value(&b.0)) {
        (Some(x), Some(y)) => (x - y).abs() <= f64::EPSILON * x.abs().max(y.abs()).max(1.0),
        _ => a == b,
    }
}

/// The first resizable request or limit of `spec` that `status` (what the kubelet reports
/// the container runs with) does not show yet, as `"cpu request 100m"`.
pub fn unapplied_resource(
    spec: Option<&ResourceRequirements>,
    status: Option<&ResourceRequirements>,
) -> Option<String> {
    let sections = |r: Option<&ResourceRequirements>| {
        let empty = BTreeMap::new();
        let get = |m: Option<&BTreeMap<String, Quantity>>| m.cloned().unwrap_or(empty.clone());
        (
            get(r.and_then(|r| r.requests.as_ref())),
            get(r.and_then(|r| r.limits.as_ref())),
        )
    };
    let (spec_requests, spec_limits) = sections(spec);
    let (status_requests, status_limits) = sections(status);
    for (kind, wanted, seen) in [
        ("request", spec_requests, status_requests),
        ("limit", spec_limits, status_limits),
    ] {
        for name in RESIZABLE {
            let Some(want) = wanted.get(name) else {
                continue;
            };
            match seen.get(name) {
                Some(have) if same_quantity(want, have) => {}
                Some(have) => return Some(format!("{name} {kind} {} (wants {})", have.0, want.0)),
                None => return Some(format!("no {name} {kind} (wants {})", want.0)),
            }
        }
    }
    None
}

/// Why the apiserver would refuse any `resize` of `pod`, or `None` when it accepts one.
/// Kubernetes' version-skew rule: a pod whose running container reports no `resources` in
/// its status runs on a kubelet that cannot resize ("Pod running on node without support
/// for resize"); Windows pods cannot be resized either.
pub fn resize_refusal(pod: &Pod) -> Option<&'static str> {
    let spec = pod.spec.as_ref();
    if spec
        .and_then(|s| s.os.as_ref())
        .is_some_and(|os| os.name == "windows")
    {
        return Some("Windows pods cannot be resized");
    }
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    let first_running = statuses
        .iter()
        .find(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
    match first_running {
        Some(c) if c.resources.is_none() => {
            Some("its node reports no container resources, so it cannot resize the pod")
        }
        _ => None,
    }
}

/// Where the kubelet stands with a pod's resize, from the pod's conditions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ResizeStatus {
    /// No resize condition: nothing pending or in progress.
    #[default]
    Idle,
    /// Deferred or in progress: wait; the message says why.
    Busy(String),
    /// The node can never fit it: the kubelet's message.
    Infeasible(String),
}

/// The pod's resize conditions (`PodResizePending`, `PodResizeInProgress`).
pub fn resize_status(pod: &Pod) -> ResizeStatus {
    let conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let active = |type_: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
    };
    let message =
        |c: &k8s_openapi::api::core::v1::PodCondition| c.message.clone().unwrap_or_default();
    if let Some(pending) = active(RESIZE_PENDING) {
        if pending.reason.as_deref() == Some(REASON_INFEASIBLE) {
            return ResizeStatus::Infeasible(message(pending));
        }
        return ResizeStatus::Busy(format!("resize pending: {}", message(pending)));
    }
    if let Some(progress) = active(RESIZE_IN_PROGRESS) {
        return ResizeStatus::Busy(format!("resize in progress: {}", message(progress)));
    }
    ResizeStatus::Idle
}

/// The strategic-merge patch for the pod's `resize` subresource: each container's new
/// requests and limits (containers merge by name).
pub fn resize_patch(resources: &BTreeMap<String, ResourceRequirements>) -> Option<Value> {
    if resources.is_empty() {
        return None;
    }
    let containers: Vec<Value> = resources
        .iter()
        .map(|(name, r)| {
            let mut body = Map::new();
            for (key, section) in [("requests", &r.requests), ("limits", &r.limits)] {
                if let Some(section) = section {
                    body.insert(key.into(), serde_json::json!(section));
                }
            }
            serde_json::json!({ "name": name, "resources": body })
        })
        .collect();
    Some(serde_json::json!({ "spec": { "containers": containers } }))
}

#[cfg(test)]
#[path = "inplace_resize_tests.rs"]
mod tests;

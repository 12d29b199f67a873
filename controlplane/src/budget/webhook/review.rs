//! The admission review of a pod delete or eviction, read and answered (pure): which
//! requests a PodUnavailableBudget is asked about at all, whether the pod a review names
//! exists with the UID it says ([`confirm`]), and the message of a refusal.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

pub use crate::admission::review::AdmissionRequest;
use crate::admission::review::{Decision, Refusal};

/// The users whose deletes are never held: the control plane itself (its disruptions
/// went through the same check before it made them) and Kubernetes' recovery work.
#[derive(Clone, Debug)]
pub struct Exempt {
    /// `system:serviceaccount:<namespace>:<name>` of the control plane.
    pub control_plane: String,
}

/// Recovery work a budget must never hold up: the garbage collector deleting the pods of
/// a deleted owner, the namespace controller emptying a deleted namespace, the pod
/// garbage collector and the node lifecycle controller cleaning up after lost nodes, and
/// the kube-controller-manager when it runs without per-controller accounts.
const RECOVERY_USERS: [&str; 5] = [
    "system:serviceaccount:kube-system:generic-garbage-collector",
    "system:serviceaccount:kube-system:namespace-controller",
    "system:serviceaccount:kube-system:pod-garbage-collector",
    "system:serviceaccount:kube-system:node-controller",
    "system:kube-controller-manager",
];

/// The namespace whose pods no budget holds (the cluster's own machinery runs there).
const SYSTEM_NAMESPACE: &str = "kube-system";

/// What the webhook does with one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Screen {
    /// Allowed without asking any budget; the reason is for the log.
    Pass(&'static str),
    /// Ask the budgets protecting this pod.
    Check(Disruption),
}

/// A voluntary disruption of one pod by someone other than the control plane.
#[derive(Clone, Debug, PartialEq)]
pub struct Disruption {
    pub namespace: String,
    pub pod: String,
    /// The pod's UID as the review gives it: a delete's `oldObject`, an eviction's
    /// `deleteOptions.preconditions.uid` (an eviction names the pod only, mostly).
    pub uid: Option<String>,
    /// A server-side dry run: decide, record nothing.
    pub dry_run: bool,
    pub eviction: bool,
}

/// Sorts a request into one the budgets decide and one they do not.
pub fn screen(request: &AdmissionRequest, exempt: &Exempt) -> Screen {
    let is_pods = request.resource.group.is_empty() && request.resource.resource == "pods";
    let sub = request.sub_resource.as_deref().unwrap_or("");
    let eviction = match (request.operation.as_str(), sub) {
        ("DELETE", "") => false,
        ("CREATE", "eviction") => true,
        _ => return Screen::Pass("not a pod delete or eviction"),
    };
    if !is_pods {
        return Screen::Pass("not a pod delete or eviction");
    }
    let namespace = request.namespace.clone().unwrap_or_default();
    if namespace == SYSTEM_NAMESPACE {
        return Screen::Pass("pods of kube-system are never held");
    }
    let user = request.user_info.username.as_str();
    if user == exempt.control_plane {
        return Screen::Pass("the control plane checked its own disruption already");
    }
    if RECOVERY_USERS.contains(&user) || user.starts_with("system:node:") {
        return Screen::Pass("recovery work is never held");
    }
    let old: Option<Pod> =
        (request.old_object.clone()).and_then(|object| serde_json::from_value(object).ok());
    if old
        .as_ref()
        .is_some_and(|pod| pod.metadata.deletion_timestamp.is_some())
    {
        return Screen::Pass("the pod is terminating already");
    }
    // A collection delete names no pod in the request; the pod it carries has one.
    let pod = match old.as_ref().and_then(|p| p.metadata.name.clone()) {
        Some(name) if request.name.is_empty() => name,
        _ => request.name.clone(),
    };
    let uid = if eviction {
        (request.object.as_ref())
            .and_then(|e| e.pointer("/deleteOptions/preconditions/uid"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    } else {
        old.and_then(|p| p.metadata.uid)
    };
    Screen::Check(Disruption {
        namespace,
        pod,
        uid,
        dry_run: request.dry_run.unwrap_or(false),
        eviction,
    })
}

/// Why a review is answered without asking any budget: the pod it names is not one that
/// exists with that UID, so nothing is recorded (a forged review can drain no budget).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unconfirmed {
    #[error("there is no pod {pod} in namespace {namespace}")]
    NoPod { namespace: String, pod: String },
    #[error("the pod {pod} has the UID {found}, not {named} as the review says")]
    OtherUid {
        pod: String,
        found: String,
        named: String,
    },
    #[error(
        "the delete review of pod {pod} carries no oldObject UID (the apiserver always sends one)"
    )]
    NoUid { pod: String },
    #[error("the pod {pod} is terminating already")]
    Terminating { pod: String },
}

/// The pod a disruption is decided for: `found`, the pod of that name as the apiserver
/// has it now, when it exists with the UID the review gives (a delete must give one) and
/// is not terminating. Its labels, not the review's copy, choose the budgets.
pub fn confirm(disruption: &Disruption, found: Option<Pod>) -> Result<Pod, Unconfirmed> {
    let pod = || disruption.pod.clone();
    let Some(found) = found else {
        return Err(Unconfirmed::NoPod {
            namespace: disruption.namespace.clone(),
            pod: pod(),
        });
    };
    let found_uid = found.metadata.uid.clone().unwrap_or_default();
    match &disruption.uid {
        Some(named) if *named != found_uid => {
            return Err(Unconfirmed::OtherUid {
                pod: pod(),
                found: found_uid,
                named: named.clone(),
            });
        }
        None if !disruption.eviction => return Err(Unconfirmed::NoUid { pod: pod() }),
        _ => {}
    }
    if found.metadata.deletion_timestamp.is_some() {
        return Err(Unconfirmed::Terminating { pod: pod() });
    }
    Ok(found)
}

/// The budgets' answer, as the apiserver reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Refused: the message names the budget. The code is 429, as the eviction handler's
    /// for a PodDisruptionBudget, so `kubectl drain` waits and tries again.
    Deny(String),
}

impl From<Verdict> for Decision {
    fn from(verdict: Verdict) -> Self {
        match verdict {
            Verdict::Allow => Decision::Allow,
            Verdict::Deny(message) => Decision::Refuse(Refusal::too_many_requests(message)),
        }
    }
}

/// The message of a refused disruption of `pod`.
pub fn refusal(disruption: &Disruption, held: &str) -> String {
    let what = if disruption.eviction {
        "Cannot evict"
    } else {
        "Cannot delete"
    };
    format!("{what} pod {}: {held}.", disruption.pod)
}

#[cfg(test)]
#[path = "review_tests.rs"]
mod tests;

//! Whether a budget admits one more disruption of a pod, as the eviction handler's
//! check-and-decrement decides it (seed 003), and the status that records an admitted
//! one. Pure: the caller writes the new status conditional on the resourceVersion it
//! read, and decides again on a conflict.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::arithmetic::BudgetPod;
use crate::api::podunavailablebudget::PodUnavailableBudgetStatus;
pub use crate::workload::budget::DisruptionKind;

/// The budget's answer for one pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Allowed without taking from the budget: the pod is unavailable already (or marked
    /// so by an `unavailable-pod.kruise.io/` label), `pub.kruise.io/no-protect`, or its
    /// disruption was admitted before (a specified delete asked twice counts once).
    Free,
    /// Allowed: write this status (one fewer allowed, the pod recorded), then disrupt.
    Take(PodUnavailableBudgetStatus),
    /// Refused: the message says why, naming the budget.
    Refuse(String),
}

/// The budget `name` (at `generation`, with `status`) and a disruption of `pod` at `now`.
/// A delete is recorded in `disruptedPods`, an in-place update in `unavailablePods`.
pub fn decide(
    name: &str,
    generation: Option<i64>,
    status: Option<&PodUnavailableBudgetStatus>,
    pod: &BudgetPod,
    kind: DisruptionKind,
    now: Timestamp,
) -> Decision {
    let empty = PodUnavailableBudgetStatus::default();
    let status = status.unwrap_or(&empty);
    let recorded = status.disrupted_pods.contains_key(&pod.name)
        || status.unavailable_pods.contains_key(&pod.name);
    if recorded || !pod.ready || pod.terminating || pod.no_protect {
        return Decision::Free;
    }
    if status.observed_generation.unwrap_or(0) < generation.unwrap_or(0) {
        return Decision::Refuse(format!(
            "the PodUnavailableBudget {name} is still being processed by its controller"
        ));
    }
    if status.unavailable_allowed <= 0 {
        return Decision::Refuse(format!(
            "the PodUnavailableBudget {name} allows no more unavailable pods: it needs {} available and has {}",
            status.desired_available, status.current_available
        ));
    }
    let mut taken = status.clone();
    taken.unavailable_allowed -= 1;
    let entries: &mut BTreeMap<String, Time> = match kind {
        DisruptionKind::Delete => &mut taken.disrupted_pods,
        DisruptionKind::InPlaceUpdate => &mut taken.unavailable_pods,
    };
    entries.insert(pod.name.clone(), Time(now));
    Decision::Take(taken)
}

/// What the budget answers for several pods asked in turn, and the status recording every
/// disruption it admitted (`None`: nothing taken, nothing to write).
#[derive(Clone, Debug, PartialEq)]
pub struct Decisions {
    /// Per pod, in order: the refusal, or `None` when admitted or free.
    pub refusals: Vec<Option<String>>,
    pub status: Option<PodUnavailableBudgetStatus>,
}

/// [`decide`] for each of `pods` in order, each deciding on the status the ones before
/// it left, so one write records them all and admits exactly what asking one pod at a
/// time, a write each, would have.
pub fn decide_all(
    name: &str,
    generation: Option<i64>,
    status: Option<&PodUnavailableBudgetStatus>,
    pods: &[BudgetPod],
    kind: DisruptionKind,
    now: Timestamp,
) -> Decisions {
    let mut current = status.cloned();
    let mut taken = false;
    let refusals = pods
        .iter()
        .map(
            |pod| match decide(name, generation, current.as_ref(), pod, kind, now) {
                Decision::Free => None,
                Decision::Take(next) => {
                    (current, taken) = (Some(next), true);
                    None
                }
                Decision::Refuse(message) => Some(message),
            },
        )
        .collect();
    Decisions {
        refusals,
        status: current.filter(|_| taken),
    }
}

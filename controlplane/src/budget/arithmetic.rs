//! The budget arithmetic of a PodUnavailableBudget, as the Kubernetes disruption
//! controller does it for a PodDisruptionBudget (seed 003): the expected number of pods,
//! the healthy ones (ready, not terminating, not recorded as disrupted), the desired
//! number of available pods and how many more may be disrupted. Entries of
//! `disruptedPods` and `unavailablePods` expire after two minutes. Pure.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use crate::workload::inplace::INPLACE_UPDATE_READY;
use crate::workload::rollout::{IntOrPercentError, scaled_value};

/// How long a recorded disruption counts before the pod is seen going (the disruption
/// controller's `DeletionTimeout`).
pub const DISRUPTION_TIMEOUT: Duration = Duration::from_secs(120);

/// Pod annotation that takes a pod out of every PodUnavailableBudget's protection: its
/// disruptions are allowed and take nothing from a budget (OpenKruise
/// `PodPubNoProtectionAnnotation`, read by `PodUnavailableBudgetValidatePod`); the pod
/// still counts in the arithmetic.
pub const NO_PROTECT_ANNOTATION: &str = "pub.kruise.io/no-protect";
/// Prefix of pod labels that mark a pod unavailable to the budgets while one of them is
/// `"true"`, whatever its conditions say (OpenKruise `PubUnavailablePodLabelPrefix`,
/// `HasUnavailableLabel`).
pub const UNAVAILABLE_LABEL_PREFIX: &str = "unavailable-pod.kruise.io/";

/// Whether `labels` mark the pod unavailable (a key under [`UNAVAILABLE_LABEL_PREFIX`]
/// with the value `"true"`).
pub fn marked_unavailable(labels: &BTreeMap<String, String>) -> bool {
    labels
        .iter()
        .any(|(key, value)| key.starts_with(UNAVAILABLE_LABEL_PREFIX) && value == "true")
}

/// What the arithmetic reads of one pod the budget selects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BudgetPod {
    pub name: String,
    /// The Ready condition is True and no label marks the pod unavailable.
    pub ready: bool,
    /// `pub.kruise.io/no-protect: "true"`: no budget holds its disruptions.
    pub no_protect: bool,
    /// The pod has a deletionTimestamp.
    pub terminating: bool,
    /// When `InPlaceUpdateReady` last turned True (an in-place update finished then).
    pub in_place_ready_since: Option<Timestamp>,
    /// When Ready last turned True, unless an in-place update still holds the pod
    /// (`InPlaceUpdateReady` False): containers recreated in place are back then.
    pub ready_since: Option<Timestamp>,
}

impl BudgetPod {
    pub fn of(pod: &Pod) -> Self {
        let condition = |type_: &str| {
            pod.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        };
        let since = |c: &PodCondition| {
            c.last_transition_time
                .as_ref()
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
        };
        let in_place = condition(INPLACE_UPDATE_READY);
        let in_place_held = in_place.is_some_and(|c| c.status == "False");
        let ready = condition("Ready").filter(|c| c.status == "True");
        let meta = &pod.metadata;
        let marked = meta.labels.as_ref().is_some_and(marked_unavailable);
        let no_protect = (meta.annotations.as_ref())
            .and_then(|a| a.get(NO_PROTECT_ANNOTATION))
            .is_some_and(|v| v == "true");
        Self {
            name: pod.metadata.name.clone().unwrap_or_default(),
            ready: ready.is_some() && !marked,
            no_protect,
            terminating: pod.metadata.deletion_timestamp.is_some(),
            in_place_ready_since: in_place.filter(|c| c.status == "True").map(since),
            ready_since: ready.filter(|_| !in_place_held).map(since),
        }
    }
}

/// The budget as the spec states it: exactly one of the two is set (admission refuses
/// anything else; a spec with neither protects nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Amount {
    MaxUnavailable(IntOrString),
    MinAvailable(IntOrString),
}

/// What the status is computed from.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed<'a> {
    /// The target's scale, or `None` for a selector budget (the selected pods count).
    pub target_replicas: Option<i32>,
    pub amount: &'a Amount,
    pub pods: &'a [BudgetPod],
    pub disrupted: &'a BTreeMap<String, Timestamp>,
    pub unavailable: &'a BTreeMap<String, Timestamp>,
    pub now: Timestamp,
}

/// The computed status numbers and entries, and when an entry expires next.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Computed {
    pub disrupted: BTreeMap<String, Timestamp>,
    pub unavailable: BTreeMap<String, Timestamp>,
    pub total_replicas: i32,
    pub desired_available: i32,
    pub current_available: i32,
    pub unavailable_allowed: i32,
    pub recheck_after: Option<Duration>,
}

/// The status of a budget over `observed`.
pub fn compute(observed: &Observed<'_>) -> Result<Computed, IntOrPercentError> {
    let pods = observed.pods;
    let expected = observed
        .target_replicas
        .unwrap_or_else(|| i32::try_from(pods.len()).unwrap_or(i32::MAX));
    let desired_available = desired_available(observed.amount, expected)?;
    let mut recheck: Option<Duration> = None;
    let mut keep = |entries: &BTreeMap<String, Timestamp>,
                    settled: &dyn Fn(&BudgetPod, Timestamp) -> bool| {
        let mut kept = BTreeMap::new();
        for pod in pods.iter().filter(|p| !p.terminating) {
            let Some(&at) = entries.get(&pod.name) else {
                continue;
            };
            let Some(left) = remaining(at, observed.now) else {
                continue; // expired: the disruption did not happen
            };
            if settled(pod, at) {
                continue;
            }
            recheck = Some(recheck.map_or(left, |r| r.min(left)));
            kept.insert(pod.name.clone(), at);
        }
        kept
    };
    let disrupted = keep(observed.disrupted, &|_, _| false);
    // An in-place update is over once the pod is ready and InPlaceUpdateReady turned True
    // after the update was admitted; a container recreate once Ready turned True again
    // after it was admitted (strictly after: the times have whole seconds, and a pod that
    // turned ready in the second of the admission may not have gone down yet).
    let unavailable = keep(observed.unavailable, &|pod, at| {
        pod.ready
            && (pod.in_place_ready_since.is_some_and(|since| since >= at)
                || pod.ready_since.is_some_and(|since| since > at))
    });
    let current_available = pods
        .iter()
        .filter(|p| p.ready && !p.terminating)
        .filter(|p| !disrupted.contains_key(&p.name) && !unavailable.contains_key(&p.name))
        .count();
    let current_available = i32::try_from(current_available).unwrap_or(i32::MAX);
    Ok(Computed {
        disrupted,
        unavailable,
        total_replicas: expected,
        desired_available,
        current_available,
        unavailable_allowed: (current_available - desired_available).max(0),
        recheck_after: recheck,
    })
}

/// The fewest pods that must stay available of `expected`: minAvailable (a percentage
/// rounded up), or `expected` less maxUnavailable (a percentage rounded up), never below 0.
pub fn desired_available(amount: &Amount, expected: i32) -> Result<i32, IntOrPercentError> {
    Ok(match amount {
        Amount::MinAvailable(value) => scaled_value("spec.minAvailable", value, expected, true)?,
        Amount::MaxUnavailable(value) => {
            let max = scaled_value("spec.maxUnavailable", value, expected, true)?;
            (expected - max).max(0)
        }
    })
}

/// How long an entry recorded `at` still counts at `now`; `None` once it expired.
fn remaining(at: Timestamp, now: Timestamp) -> Option<Duration> {
    let expires = at.checked_add(DISRUPTION_TIMEOUT).ok()?;
    let left = expires.duration_since(now);
    Duration::try_from(left).ok().filter(|d| !d.is_zero())
}

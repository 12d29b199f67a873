//! One StatefulSet sync as a pure decision, over the shared pod-set planning: refresh
//! pods (in-place completion, lifecycle moves) through `workload::plan`, then the scale
//! step by ordinal (the kube-controller-manager's `updateStatefulSet` walk), and only a
//! sync whose scale step is settled updates pods through the shared update step, which
//! reads the adapter's partition and order.
//!
//! OrderedReady: the lowest missing ordinal is created once every lower pod is Running and
//! available; a pod that is not stops the walk (and the sync reports it); surplus and
//! reserved ordinals go one at a time from the highest down. Parallel: every missing pod
//! at once (within `scaleStrategy.maxUnavailable`), every surplus pod at once.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;

use super::missing_claims::missing_claims;
use super::ordinals::{
    OrdinalError, ReservedOrdinals, WantedOrdinals, identity_labels, layout, ordinal_of,
};
use super::retention::{ClaimOwners, claim_owner_changes};
use crate::api::StatefulSet;
use crate::api::statefulset::{PodManagementPolicy, StatefulSetUpdateStrategyType};
use crate::workload::actions::{ChangeReason, Create, Delete, DeleteReason, Plan, PodChange};
use crate::workload::adapter::PodSetWorkload as _;
use crate::workload::plan::{MAX_CREATES_PER_SYNC, PlanError, PodSet, PodSetSnapshot, plan_delete};
use crate::workload::pod_view::PodView;
use crate::workload::rollout::{
    self, IntOrPercentError, MAX_UNAVAILABLE_FIELD, SCALE_MAX_UNAVAILABLE_FIELD,
};

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "claim_resize_plan_tests.rs"]
mod claim_resize_tests;

#[cfg(test)]
#[path = "update_hold_tests.rs"]
mod update_hold_tests;

/// What the sync sees.
pub struct Snapshot<'a> {
    pub set: &'a StatefulSet,
    /// Pods the set controls (after adoption and release), terminating ones included.
    pub pods: Vec<&'a Pod>,
    /// Claims of the set's pods.
    pub claims: Vec<&'a PersistentVolumeClaim>,
    pub update_revision: &'a str,
    pub current_revision: &'a str,
    /// Revision name → its pod template.
    pub revisions: &'a BTreeMap<String, PodTemplateSpec>,
    pub now: Timestamp,
}

#[derive(Debug, thiserror::Error)]
pub enum StatefulSetPlanError {
    #[error(transparent)]
    Ordinals(#[from] OrdinalError),
    #[error(transparent)]
    IntOrPercent(#[from] IntOrPercentError),
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// Why an OrderedReady sync stopped: the pod it waits for and the rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Halt {
    /// The pod is not Running and available, so no later ordinal is created or deleted.
    NotHealthy(String),
    /// The pod is terminating; its ordinal is taken until it is gone.
    Terminating(String),
}

impl Halt {
    /// A sentence for a condition or an event (`kubectl describe` says why it is stuck).
    pub fn message(&self) -> String {
        match self {
            Self::NotHealthy(pod) => format!(
                "waiting for pod {pod} to be Running and Ready: podManagementPolicy OrderedReady creates, deletes and updates the next pod only after it"
            ),
            Self::Terminating(pod) => format!(
                "waiting for pod {pod} to finish terminating: its ordinal is taken until it is gone"
            ),
        }
    }
}

/// The decision of one sync.
#[derive(Debug, Default)]
pub struct StatefulSetPlan {
    pub plan: Plan,
    /// Set when OrderedReady waits on a pod.
    pub halted: Option<Halt>,
    /// Claims whose owner references the retention policy changes; written before the
    /// plan, so a scaled-away pod owns its claims before it is deleted.
    pub claim_owners: Vec<ClaimOwners>,
}

/// What the scale step did.
enum Scaled {
    /// Nothing to create or delete: the update step may run.
    Settled,
    /// It created or deleted pods: the next sync plans from the new state.
    Acted,
    /// OrderedReady waits on a pod.
    Halted(Halt),
}

/// Plans one sync.
pub fn plan(snap: &Snapshot<'_>) -> Result<StatefulSetPlan, StatefulSetPlanError> {
    let spec = &snap.set.spec;
    let reserved = ReservedOrdinals::parse(&spec.reserve_ordinals)?;
    let wanted = WantedOrdinals::new(spec.desired_replicas(), spec.start_ordinal(), reserved);
    let named = BTreeSet::new();
    let pod_set = PodSetSnapshot {
        workload: snap.set,
        pods: snap.pods.clone(),
        claims: snap.claims.clone(),
        update_revision: snap.update_revision,
        current_revision: snap.current_revision,
        revisions: snap.revisions,
        named_for_deletion: &named,
        now: snap.now,
    };
    let mut set = PodSet::new(&pod_set);
    let mut out = StatefulSetPlan {
        claim_owners: claim_owner_changes(snap.set, &snap.pods, &snap.claims, &wanted),
        ..StatefulSetPlan::default()
    };
    out.plan.missing_claims = missing_claims(
        snap.set,
        &snap.pods,
        &snap.claims,
        &wanted,
        snap.update_revision,
    );
    set.refresh(&mut out.plan)?;
    let views: BTreeMap<&str, &PodView<'_>> = set
        .active_views()
        .filter_map(|(pod, view)| Some((pod.metadata.name.as_deref()?, view)))
        .collect();
    let scale = ScaleStep {
        snap,
        wanted: &wanted,
        views: &views,
    };
    match scale.run(&mut out.plan)? {
        Scaled::Settled => set.update_only(&mut out.plan)?,
        Scaled::Acted => {}
        Scaled::Halted(halt) => out.halted = Some(halt),
    }
    Ok(out)
}

/// The scale step by ordinal.
struct ScaleStep<'s, 'a> {
    snap: &'s Snapshot<'a>,
    wanted: &'s WantedOrdinals,
    /// Views of the active pods by name.
    views: &'s BTreeMap<&'a str, &'s PodView<'a>>,
}

impl<'a> ScaleStep<'_, 'a> {
    fn ordered(&self) -> bool {
        self.snap.set.spec.management_policy() == PodManagementPolicy::OrderedReady
    }

    /// The set's pods by ordinal; pods whose name carries no ordinal of this set are left alone.
    fn by_ordinal(&self) -> BTreeMap<i32, &'a Pod> {
        let name = self.snap.set.name_any();
        self.snap
            .pods
            .iter()
            .filter_map(|p| Some((ordinal_of(&name, p.metadata.name.as_deref()?)?, *p)))
            .collect()
    }

    /// The pods on wanted ordinals, by ordinal.
    fn wanted_pods<'p>(
        &'p self,
        pods: &'p BTreeMap<i32, &'a Pod>,
    ) -> impl DoubleEndedIterator<Item = &'a Pod> + 'p {
        pods.iter()
            .filter(|(o, _)| self.wanted.contains(**o))
            .map(|(_, p)| *p)
    }

    /// Running and available (ready for minReadySeconds), not terminating.
    fn healthy(&self, pod: &Pod) -> bool {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        self.views
            .get(name)
            .is_some_and(|v| v.phase == "Running" && v.available && !v.terminating)
    }

    /// Walks the wanted ordinals that have a pod and the missing ones this sync may create
    /// (OrderedReady: the lowest; Parallel: the budget's worth), lowest first, so the walk
    /// costs O(pods + creates), not O(replicas).
    fn run(&self, plan: &mut Plan) -> Result<Scaled, StatefulSetPlanError> {
        let pods = self.by_ordinal();
        let existing: Vec<i32> = pods.keys().copied().collect();
        let creatable = if self.ordered() {
            1
        } else {
            self.create_budget(&pods)?.min(MAX_CREATES_PER_SYNC)
        };
        let ordinals = layout(self.wanted, &existing, creatable);
        let mut walk: Vec<i32> = existing
            .iter()
            .copied()
            .filter(|o| self.wanted.contains(*o))
            .chain(ordinals.missing.iter().copied())
            .collect();
        walk.sort_unstable();
        let before = plan.creates.len() + plan.deletes.len() + plan.pod_changes.len();
        for ordinal in walk {
            let Some(pod) = pods.get(&ordinal) else {
                plan.creates.push(self.create(ordinal));
                if self.ordered() {
                    return Ok(Scaled::Acted);
                }
                continue;
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            if pod.metadata.deletion_timestamp.is_some() {
                if self.ordered() {
                    return Ok(Scaled::Halted(Halt::Terminating(name)));
                }
                continue;
            }
            if is_finished(pod) {
                plan.deletes.push(delete_now(pod, DeleteReason::Failed));
                if self.ordered() {
                    return Ok(Scaled::Acted);
                }
                continue;
            }
            self.restore_identity(pod, ordinal, plan);
            if !self.healthy(pod) && self.ordered() {
                return Ok(Scaled::Halted(Halt::NotHealthy(name)));
            }
        }
        if let Some(halt) = self.condemn(&pods, &ordinals.condemned, plan) {
            return Ok(Scaled::Halted(halt));
        }
        if plan.creates.len() + plan.deletes.len() + plan.pod_changes.len() == before {
            self.delete_specified(&pods, plan)?;
        }
        let after = plan.creates.len() + plan.deletes.len() + plan.pod_changes.len();
        Ok(if after > before {
            Scaled::Acted
        } else {
            Scaled::Settled
        })
    }

    /// How many pods a Parallel scale-up may create now: `scaleStrategy.maxUnavailable`
    /// less the wanted pods already unavailable (unlimited when unset or OrderedReady).
    fn create_budget(&self, pods: &BTreeMap<i32, &'a Pod>) -> Result<usize, IntOrPercentError> {
        let spec = &self.snap.set.spec;
        let limit = spec
            .scale_strategy
            .as_ref()
            .and_then(|s| s.max_unavailable.as_ref());
        let Some(limit) = limit.filter(|_| !self.ordered()) else {
            return Ok(usize::MAX);
        };
        let limit = rollout::scaled_share(
            SCALE_MAX_UNAVAILABLE_FIELD,
            limit,
            spec.desired_replicas(),
            true,
        )?;
        let unavailable = self.wanted_pods(pods).filter(|p| !self.healthy(p)).count();
        Ok(usize::try_from(limit)
            .unwrap_or(0)
            .saturating_sub(unavailable))
    }

    /// The pod for `ordinal`: on the current revision below the partition (while it
    /// exists), else on the update revision (the native `newVersionedStatefulSetPod`).
    fn create(&self, ordinal: i32) -> Create {
        let spec = &self.snap.set.spec;
        let below_partition = spec.update_type() == StatefulSetUpdateStrategyType::RollingUpdate
            && (self.wanted).below_partition(ordinal, spec.rolling_update().partition_or_default());
        let current = self.snap.current_revision;
        let revision = if below_partition && self.snap.revisions.contains_key(current) {
            current
        } else {
            self.snap.update_revision
        };
        Create {
            instance_id: ordinal.to_string(),
            revision: revision.to_owned(),
        }
    }

    /// Puts back identity labels a pod lost (its name, hostname and subdomain cannot
    /// change on a live pod).
    fn restore_identity(&self, pod: &Pod, ordinal: i32, plan: &mut Plan) {
        let wanted = identity_labels(&self.snap.set.name_any(), ordinal);
        let labels = pod.metadata.labels.as_ref();
        if wanted
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        {
            return;
        }
        let mut change = PodChange::new(pod, ChangeReason::Identity);
        change.merge_patch(serde_json::json!({ "metadata": { "labels": wanted } }));
        plan.pod_changes.push(change);
    }

    /// Deletes pods labelled `apps.kruise.io/specified-delete` (their ordinal gets a new
    /// pod) within the update's maxUnavailable, pods not available counted against it;
    /// OrderedReady one at a time.
    fn delete_specified(
        &self,
        pods: &BTreeMap<i32, &'a Pod>,
        plan: &mut Plan,
    ) -> Result<(), IntOrPercentError> {
        let set = self.snap.set;
        let params = set.rollout_params(self.snap.current_revision, self.snap.update_revision);
        let limit = params.max_unavailable.unwrap_or(IntOrString::Int(1));
        let replicas = set.spec.desired_replicas();
        let limit = rollout::scaled_share(MAX_UNAVAILABLE_FIELD, &limit, replicas, false)?.max(1);
        let unavailable = self.wanted_pods(pods).filter(|p| !self.healthy(p)).count();
        let mut budget = usize::try_from(limit)
            .unwrap_or(0)
            .saturating_sub(unavailable);
        let specified = self.wanted_pods(pods).filter(|p| {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            self.views
                .get(name)
                .is_some_and(|v| v.specified_delete && !v.preparing_delete())
        });
        for pod in specified.rev() {
            if budget == 0 {
                break;
            }
            budget -= 1;
            self.delete(pod, DeleteReason::Specified, plan);
        }
        Ok(())
    }

    /// Deletes `pod` (or prepares its deletion, under lifecycle hooks); its claims go with
    /// it only through owner references (`persistentVolumeClaimRetentionPolicy`).
    fn delete(&self, pod: &Pod, reason: DeleteReason, plan: &mut Plan) {
        let (set, now) = (self.snap.set, self.snap.now);
        plan_delete(set, pod, Vec::new(), reason, String::new(), now, plan);
    }

    /// The lowest-ordinal condemned pod that is not healthy: under OrderedReady the only
    /// unhealthy pod a scale-down may delete (the wanted pods are all healthy by the time
    /// it runs, or the walk halted on one).
    fn first_unhealthy(
        &self,
        pods: &BTreeMap<i32, &'a Pod>,
        condemned: &[i32],
    ) -> Option<(i32, String)> {
        (condemned.iter())
            .filter_map(|o| Some((*o, *pods.get(o)?)))
            .filter(|(_, pod)| !self.healthy(pod))
            .min_by_key(|(o, _)| *o)
            .map(|(o, pod)| (o, pod.metadata.name.clone().unwrap_or_default()))
    }

    /// Deletes pods on ordinals that should have none (beyond replicas, or reserved),
    /// highest first; OrderedReady one at a time, and, as the native controller and
    /// OpenKruise's `processCondemned` do, never an unhealthy pod other than the
    /// lowest-ordinal unhealthy one: scaling down waits for that pod to be healthy again.
    fn condemn(
        &self,
        pods: &BTreeMap<i32, &'a Pod>,
        condemned: &[i32],
        plan: &mut Plan,
    ) -> Option<Halt> {
        let first_unhealthy = self
            .ordered()
            .then(|| self.first_unhealthy(pods, condemned))
            .flatten();
        for ordinal in condemned {
            let Some(pod) = pods.get(ordinal) else {
                continue;
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            if pod.metadata.deletion_timestamp.is_some() {
                if self.ordered() {
                    return Some(Halt::Terminating(name));
                }
                continue;
            }
            if let Some((first, waited_on)) = &first_unhealthy
                && first != ordinal
                && !self.healthy(pod)
            {
                return Some(Halt::NotHealthy(waited_on.clone()));
            }
            self.delete(pod, DeleteReason::ScaleDown, plan);
            if self.ordered() {
                return None;
            }
        }
        None
    }
}

/// Failed or Succeeded: the ordinal's pod must be replaced.
fn is_finished(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Failed" | "Succeeded"))
}

/// A delete without hooks or claims (a failed pod is replaced at once).
fn delete_now(pod: &Pod, reason: DeleteReason) -> Delete {
    Delete {
        pod: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        pvcs: Vec::new(),
        reason,
        detail: String::new(),
    }
}

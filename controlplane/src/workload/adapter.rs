//! What a pod-set workload says about itself, so the shared planning in
//! [`super::plan`] can run it: the one trait a CloneSet, an Advanced StatefulSet or an
//! Advanced DaemonSet implements (OpenKruise keeps the same differences in
//! `revisionadapter`, `inplaceupdate.Interface` and `cloneset/core.Control`).
//!
//! Everything here is read from the workload's spec; nothing does I/O.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, Pod, PodReadinessGate, PodSpec, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};

use super::actions::Create;
use super::claim_resize::PodClaims;
use super::inplace::{
    INPLACE_UPDATE_READY, InPlaceError, InPlaceUpdateSpec, UpdateMethod, choose_update_method,
};
use super::lifecycle::KRUISE_POD_READY;
use super::pod_view::PodView;
use super::revision_adapter::RevisionAdapter;
use super::rollout::RolloutParams;
use crate::api::common::{Lifecycle, PodUpdatePolicy, UpdatePriorityStrategy, UpdateScatterTerm};

/// Whether the controller moves live pods to the update revision (`updateStrategy.type`
/// of Kubernetes' StatefulSet and DaemonSet, OpenKruise's CloneSet since 1.9).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpdateStrategyType {
    /// The controller updates pods itself, in update order within maxUnavailable, as the
    /// update policy says (in place or by recreating).
    #[default]
    RollingUpdate,
    /// The controller updates no live pod: a template change reaches only the pods deleted
    /// from outside (or named for deletion), whose replacements are created at the update
    /// revision. Partition and surge, which only shape a rolling update, are ignored.
    OnDelete,
}

/// A workload that runs a set of pods from revisions of a pod template.
pub trait PodSetWorkload {
    /// What one revision records (CloneSet: the pod template and the claim templates).
    type Revision;

    /// The selector its pods must match to be claimed.
    fn selector(&self) -> &LabelSelector;

    /// The controller reference its pods, claims and revisions carry.
    fn owner_reference(&self) -> OwnerReference;

    /// ReCreate, InPlaceIfPossible or InPlaceOnly.
    fn update_policy(&self) -> PodUpdatePolicy;

    /// RollingUpdate, or OnDelete to leave live pods alone.
    fn update_strategy_type(&self) -> UpdateStrategyType {
        UpdateStrategyType::RollingUpdate
    }

    /// The lifecycle hooks (preNormal, inPlaceUpdate, preDelete), if any.
    fn lifecycle(&self) -> Option<&Lifecycle>;

    /// Where the claims of `pod` (among `claims`) stand against their templates, for a
    /// workload whose rolling update grows claims before it moves the pod (StatefulSet's
    /// `volumeClaimUpdateStrategy: OnPodRollingUpdate`); by default nothing to grow.
    fn pod_claims(&self, _pod: &Pod, _claims: &[&PersistentVolumeClaim]) -> PodClaims {
        PodClaims::READY
    }

    /// Whether a new pod without a preNormal hook stays PreparingNormal until it is bound
    /// to a node (CloneSet, as OpenKruise 1.9's since kruise#2087; the StatefulSet and
    /// DaemonSet of OpenKruise move it to Normal at once).
    fn normal_waits_for_scheduling(&self) -> bool {
        false
    }

    /// Seconds between marking a pod not ready and changing its images in place.
    fn in_place_grace_seconds(&self) -> i32;

    /// How long a pod must be ready before it counts as available.
    fn min_ready_seconds(&self) -> i32;

    /// How its pods name their revision.
    fn revision_adapter(&self) -> RevisionAdapter {
        RevisionAdapter::FullName
    }

    /// The rollout settings (replicas, partition, surge, unavailability) as plain values.
    fn rollout_params(&self, current_revision: &str, update_revision: &str) -> RolloutParams;

    /// `updateStrategy.priorityStrategy`, if any.
    fn update_priority(&self) -> Option<&UpdatePriorityStrategy> {
        None
    }

    /// `updateStrategy.scatterStrategy`.
    fn update_scatter(&self) -> &[UpdateScatterTerm] {
        &[]
    }

    /// Pods the rollout leaves on their revision whatever the counts say (StatefulSet:
    /// the first `partition` pods from the start ordinal).
    fn holds_back(&self, pod: &PodView<'_>) -> bool {
        let _ = pod;
        false
    }

    /// The order in which the `waiting` pods (indexes into `pods`) are updated, when the
    /// workload keeps one of its own (StatefulSet: highest ordinal first); `None` takes the
    /// shared order (`ordering::update_order` with `update_priority` and `update_scatter`).
    fn update_order(&self, pods: &[PodView<'_>], waiting: &[usize]) -> Option<Vec<usize>> {
        let _ = (pods, waiting);
        None
    }

    /// The readiness gates a new pod carries.
    fn readiness_gates(&self) -> Vec<&'static str> {
        readiness_gates(self.update_policy(), self.lifecycle())
    }

    /// The pod template of `revision`.
    fn template<'r>(&self, revision: &'r Self::Revision) -> &'r PodTemplateSpec;

    /// How a pod moves from `old` to `new`: by default in place when only images and
    /// metadata changed (a relabel when the templates are equal), as the policy allows.
    /// `Err(InPlaceOnlyRefused)` refuses the update for every pod alike.
    fn update_method(
        &self,
        old: &Self::Revision,
        new: &Self::Revision,
    ) -> Result<UpdateMethod, InPlaceError> {
        let (old, new) = (self.template(old), self.template(new));
        if old == new {
            return Ok(UpdateMethod::InPlace(InPlaceUpdateSpec::default()));
        }
        choose_update_method(self.update_policy(), old, new)
    }

    /// A new pod for `create` from `revision` (its name, labels, owner and gates).
    fn new_pod(&self, create: &Create, revision: &Self::Revision) -> Pod;

    /// The claims a new pod for `create` needs, created before it.
    fn new_claims(&self, create: &Create, revision: &Self::Revision) -> Vec<PersistentVolumeClaim> {
        let _ = (create, revision);
        Vec::new()
    }

    /// The names of `pod`'s claims among `claims`, deleted with it.
    fn claims_of(&self, pod: &Pod, claims: &[&PersistentVolumeClaim]) -> Vec<String> {
        let _ = (pod, claims);
        Vec::new()
    }
}

/// Adds the readiness `gates` a new pod needs to those its template lists, each once; an
/// empty list stays absent.
pub fn add_readiness_gates(spec: &mut PodSpec, gates: &[&str]) {
    let mut listed = spec.readiness_gates.take().unwrap_or_default();
    for &gate in gates {
        if !listed.iter().any(|g| g.condition_type == gate) {
            listed.push(PodReadinessGate {
                condition_type: gate.to_owned(),
            });
        }
    }
    spec.readiness_gates = (!listed.is_empty()).then_some(listed);
}

/// The pod and claims to create for `create`, from the revision it names; `None` when that
/// revision is not known. What the shared executor asks for when it creates pods.
pub fn new_pod_and_claims<W: PodSetWorkload>(
    workload: &W,
    revisions: &BTreeMap<String, W::Revision>,
    create: &Create,
) -> Option<(Pod, Vec<PersistentVolumeClaim>)> {
    let revision = revisions.get(&create.revision)?;
    Some((
        workload.new_pod(create, revision),
        workload.new_claims(create, revision),
    ))
}

/// Container name → new image when pods move from `old` to `new` in place (what an image
/// pre-download pulls ahead); `None` when they are recreated, which pulls on start. The
/// same rule the update step follows (`PodSetWorkload::update_method`).
pub fn in_place_images<W: PodSetWorkload>(
    workload: &W,
    old: &W::Revision,
    new: &W::Revision,
) -> Option<BTreeMap<String, String>> {
    if workload.update_policy() == PodUpdatePolicy::ReCreate {
        return None;
    }
    match workload.update_method(old, new) {
        Ok(UpdateMethod::InPlace(spec)) => Some(spec.container_images),
        _ => None,
    }
}

/// The readiness gates OpenKruise injects: `InPlaceUpdateReady` unless every update
/// recreates, `KruisePodReady` when a lifecycle hook marks pods not ready.
pub fn readiness_gates(
    policy: PodUpdatePolicy,
    lifecycle: Option<&Lifecycle>,
) -> Vec<&'static str> {
    let mut gates = Vec::new();
    if policy != PodUpdatePolicy::ReCreate {
        gates.push(INPLACE_UPDATE_READY);
    }
    if marks_pods_not_ready(lifecycle) {
        gates.push(KRUISE_POD_READY);
    }
    gates
}

/// Some lifecycle hook marks its pods not ready (so they need the `KruisePodReady` gate).
pub fn marks_pods_not_ready(lifecycle: Option<&Lifecycle>) -> bool {
    lifecycle.is_some_and(|l| {
        [&l.pre_delete, &l.in_place_update, &l.pre_normal]
            .into_iter()
            .flatten()
            .any(|hook| hook.mark_pod_not_ready)
    })
}

//! What an Advanced StatefulSet says about itself to the shared pod-set planning: a
//! revision is its pod template (claim templates are neither added nor removed after
//! creation, see `api::statefulset`; a larger storage request reaches existing claims only
//! under `volumeClaimUpdateStrategy: OnPodRollingUpdate`, see `pod_claims`), pods are
//! named by ordinal (a `Create`'s `instance_id` is the ordinal), the update goes from the
//! highest ordinal down and never into the first `partition` pods, and an update never
//! deletes a claim.

use std::cmp::Reverse;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt as _;

use super::ordinals::{ReservedOrdinals, WantedOrdinals, apply_identity, claim_name, ordinal_of};
use crate::api::StatefulSet;
use crate::api::common::{Lifecycle, PodUpdatePolicy, UpdatePriorityStrategy};
use crate::api::statefulset::{
    PodManagementPolicy, PvcRetentionPolicyType, StatefulSetUpdateStrategyType,
    VolumeClaimUpdateStrategyType,
};
use crate::workload::actions::Create;
use crate::workload::adapter::{PodSetWorkload, UpdateStrategyType, add_readiness_gates};
use crate::workload::claim_resize::{self, PodClaims};
use crate::workload::lifecycle::{self, STATE_LABEL};
use crate::workload::pod_view::PodView;
use crate::workload::rollout::RolloutParams;

/// The API version its owner references name.
pub const API_VERSION: &str = "apps.kruise.io/v1beta1";
/// The kind its owner references name.
pub const KIND: &str = "StatefulSet";

/// The ordinal a `Create` names (its `instance_id`).
pub fn create_ordinal(create: &Create) -> Option<i32> {
    create.instance_id.parse().ok()
}

/// The set's wanted ordinals; an unparsable `reserveOrdinals` counts as none here (the
/// planner reports it and plans nothing).
pub fn wanted_ordinals(set: &StatefulSet) -> WantedOrdinals {
    let spec = &set.spec;
    let reserved = ReservedOrdinals::parse(&spec.reserve_ordinals).unwrap_or_default();
    WantedOrdinals::new(spec.desired_replicas(), spec.start_ordinal(), reserved)
}

impl PodSetWorkload for StatefulSet {
    type Revision = PodTemplateSpec;

    fn selector(&self) -> &LabelSelector {
        &self.spec.selector
    }

    fn owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: API_VERSION.to_owned(),
            kind: KIND.to_owned(),
            name: self.name_any(),
            uid: self.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn update_policy(&self) -> PodUpdatePolicy {
        self.spec.rolling_update().policy()
    }

    fn lifecycle(&self) -> Option<&Lifecycle> {
        self.spec.lifecycle.as_ref()
    }

    /// Under `volumeClaimUpdateStrategy: OnPodRollingUpdate`: the pod's claims
    /// (`<template>-<pod>`) against the set's claim templates as they are now (OpenKruise
    /// keeps no claim templates in its revisions either); under OnDelete nothing to grow.
    fn pod_claims(&self, pod: &Pod, claims: &[&PersistentVolumeClaim]) -> PodClaims {
        let templates = &self.spec.volume_claim_templates;
        let on_rolling =
            self.spec.claim_update_type() == VolumeClaimUpdateStrategyType::OnPodRollingUpdate;
        if !on_rolling || templates.is_empty() {
            return PodClaims::READY;
        }
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        let pairs = templates.iter().map(|template| {
            let name = format!("{}-{pod_name}", template.name_any());
            let claim = (claims.iter().copied())
                .find(|c| c.metadata.name.as_deref() == Some(name.as_str()));
            (template, claim)
        });
        claim_resize::pod_claims(pod_name, pairs)
    }

    fn in_place_grace_seconds(&self) -> i32 {
        let rolling = self.spec.rolling_update();
        rolling
            .in_place_update_strategy
            .map_or(0, |s| s.grace_period_seconds)
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec.effective_min_ready_seconds()
    }

    fn update_strategy_type(&self) -> UpdateStrategyType {
        match self.spec.update_type() {
            StatefulSetUpdateStrategyType::RollingUpdate => UpdateStrategyType::RollingUpdate,
            StatefulSetUpdateStrategyType::OnDelete => UpdateStrategyType::OnDelete,
        }
    }

    /// The partition is by ordinal (`holds_back`), not by count; OrderedReady updates one
    /// pod at a time; `paused` holds the rolling update (OnDelete: `update_strategy_type`).
    fn rollout_params(&self, current_revision: &str, update_revision: &str) -> RolloutParams {
        let rolling = self.spec.rolling_update();
        let parallel = self.spec.management_policy() == PodManagementPolicy::Parallel;
        RolloutParams {
            replicas: self.spec.desired_replicas(),
            max_unavailable: Some(if parallel {
                rolling.max_unavailable_or_default()
            } else {
                IntOrString::Int(1)
            }),
            scale_max_unavailable: self
                .spec
                .scale_strategy
                .as_ref()
                .and_then(|s| s.max_unavailable.clone()),
            paused: rolling.paused,
            revisions_consistent: current_revision == update_revision,
            ..RolloutParams::default()
        }
    }

    fn update_priority(&self) -> Option<&UpdatePriorityStrategy> {
        self.spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.rolling_update.as_ref())
            .and_then(|r| r.unordered_update.as_ref())
            .and_then(|u| u.priority_strategy.as_ref())
    }

    fn holds_back(&self, pod: &PodView<'_>) -> bool {
        let partition = self.spec.rolling_update().partition_or_default();
        let wanted = wanted_ordinals(self);
        ordinal_of(&self.name_any(), &pod.name).is_none_or(|o| wanted.below_partition(o, partition))
    }

    /// Highest ordinal first (pods already in PreparingUpdate before the rest), unless
    /// `unorderedUpdate` asks for the priority order.
    fn update_order(&self, pods: &[PodView<'_>], waiting: &[usize]) -> Option<Vec<usize>> {
        if self.update_priority().is_some() {
            return None;
        }
        let name = self.name_any();
        let mut order: Vec<usize> = waiting
            .iter()
            .copied()
            .filter(|&i| i < pods.len())
            .collect();
        order.sort_by_key(|&i| {
            let pod = &pods[i];
            (
                !pod.preparing_update(),
                Reverse(ordinal_of(&name, &pod.name)),
            )
        });
        Some(order)
    }

    fn template<'r>(&self, revision: &'r PodTemplateSpec) -> &'r PodTemplateSpec {
        revision
    }

    fn new_pod(&self, create: &Create, revision: &PodTemplateSpec) -> Pod {
        let set = self.name_any();
        let ordinal = create_ordinal(create).unwrap_or_default();
        let template_meta = revision.metadata.clone().unwrap_or_default();
        let mut labels = template_meta.labels.unwrap_or_default();
        labels.extend(self.revision_adapter().pod_labels(&create.revision));
        // Every new pod starts in PreparingNormal; the shared refresh makes it Normal
        // (at once without a preNormal hook), as for CloneSet.
        labels.insert(
            STATE_LABEL.to_owned(),
            lifecycle::CREATED_STATE.as_str().to_owned(),
        );
        let mut spec = revision.spec.clone().unwrap_or_default();
        add_readiness_gates(&mut spec, &self.readiness_gates());
        spec.volumes = claim_volumes(spec.volumes.take(), self, ordinal);
        let mut pod = Pod {
            metadata: ObjectMeta {
                namespace: self.namespace(),
                labels: Some(labels),
                annotations: template_meta.annotations,
                finalizers: template_meta.finalizers,
                owner_references: Some(vec![self.owner_reference()]),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
            status: None,
        };
        apply_identity(&mut pod, &set, ordinal, self.spec.service_name.as_deref());
        pod
    }

    /// One claim per template, `<template>-<set>-<ordinal>`, labelled with the selector's
    /// labels (as the native controller does), owned by the set only when
    /// `whenDeleted: Delete` (so the garbage collector removes them with it).
    fn new_claims(&self, create: &Create, _: &PodTemplateSpec) -> Vec<PersistentVolumeClaim> {
        let set = self.name_any();
        let ordinal = create_ordinal(create).unwrap_or_default();
        let (when_deleted, _) = self.spec.retention();
        let owner = (when_deleted == PvcRetentionPolicyType::Delete).then(|| OwnerReference {
            controller: None,
            ..self.owner_reference()
        });
        self.spec
            .volume_claim_templates
            .iter()
            .map(|template| {
                let mut claim = template.clone();
                let mut labels = claim.metadata.labels.take().unwrap_or_default();
                labels.extend(self.spec.selector.match_labels.clone().unwrap_or_default());
                claim.metadata = ObjectMeta {
                    name: Some(claim_name(&template.name_any(), &set, ordinal)),
                    namespace: self.namespace(),
                    labels: Some(labels),
                    annotations: claim.metadata.annotations.take(),
                    owner_references: owner.clone().map(|o| vec![o]),
                    ..ObjectMeta::default()
                };
                claim.status = None;
                claim
            })
            .collect()
    }
}

/// The pod's volumes with one claim volume per claim template, replacing a template
/// volume of the same name (the native `updateStorage`).
fn claim_volumes(
    volumes: Option<Vec<Volume>>,
    set: &StatefulSet,
    ordinal: i32,
) -> Option<Vec<Volume>> {
    let mut volumes = volumes.unwrap_or_default();
    let name = set.name_any();
    for template in &set.spec.volume_claim_templates {
        let template_name = template.name_any();
        volumes.retain(|v| v.name != template_name);
        volumes.push(Volume {
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(&template_name, &name, ordinal),
                read_only: None,
            }),
            name: template_name,
            ..Volume::default()
        });
    }
    (!volumes.is_empty()).then_some(volumes)
}

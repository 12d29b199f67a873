//! The CloneSet as a [`PodSetWorkload`]: its spec fields mapped onto what the shared pod
//! planning asks, its pods and claims built by `pods`, and its update rule for claim
//! templates.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};

use super::pods::{self, instance_id};
use super::status::PARTITION_FIELD;
use crate::api::CloneSet;
use crate::api::common::{Lifecycle, PodUpdatePolicy, UpdatePriorityStrategy, UpdateScatterTerm};
use crate::workload::actions::Create;
use crate::workload::adapter::{PodSetWorkload, UpdateStrategyType};
use crate::workload::inplace::{
    InPlaceError, InPlaceUpdateSpec, UpdateMethod, choose_update_method, claim_templates_recreate,
};
use crate::workload::revision_spec::RevisionSpec;
use crate::workload::rollout::RolloutParams;
use crate::workload::template_defaults;

impl PodSetWorkload for CloneSet {
    type Revision = RevisionSpec;

    fn selector(&self) -> &LabelSelector {
        &self.spec.selector
    }

    fn owner_reference(&self) -> OwnerReference {
        pods::owner_reference(self)
    }

    fn update_policy(&self) -> PodUpdatePolicy {
        self.spec.update_strategy.policy()
    }

    fn update_strategy_type(&self) -> UpdateStrategyType {
        if self.spec.update_strategy.on_delete() {
            UpdateStrategyType::OnDelete
        } else {
            UpdateStrategyType::RollingUpdate
        }
    }

    fn lifecycle(&self) -> Option<&Lifecycle> {
        self.spec.lifecycle.as_ref()
    }

    fn normal_waits_for_scheduling(&self) -> bool {
        true
    }

    fn in_place_grace_seconds(&self) -> i32 {
        self.spec
            .update_strategy
            .in_place_update_strategy
            .as_ref()
            .map_or(0, |s| s.grace_period_seconds)
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec.min_ready_seconds
    }

    fn rollout_params(&self, current_revision: &str, update_revision: &str) -> RolloutParams {
        let update = &self.spec.update_strategy;
        RolloutParams {
            replicas: self.spec.desired_replicas(),
            partition: update.partition.clone(),
            partition_field: PARTITION_FIELD,
            max_unavailable: update.max_unavailable.clone(),
            max_surge: update.max_surge.clone(),
            scale_max_unavailable: self.spec.scale_strategy.max_unavailable.clone(),
            paused: update.paused,
            revisions_consistent: current_revision == update_revision,
            partition_rollback: false,
            exclude_preparing_delete: self.excludes_preparing_delete(),
        }
    }

    fn update_priority(&self) -> Option<&UpdatePriorityStrategy> {
        self.spec.update_strategy.priority_strategy.as_ref()
    }

    fn update_scatter(&self) -> &[UpdateScatterTerm] {
        &self.spec.update_strategy.scatter_strategy
    }

    fn template<'r>(&self, revision: &'r RevisionSpec) -> &'r PodTemplateSpec {
        &revision.template
    }

    /// Equal templates relabel only, whatever else changed. Changed claim templates
    /// recreate the pod with new claims when the policy says so (`claim_templates_recreate`:
    /// InPlaceIfPossible, not InPlaceOnly); anything else as the update policy allows.
    fn update_method(
        &self,
        old: &RevisionSpec,
        new: &RevisionSpec,
    ) -> Result<UpdateMethod, InPlaceError> {
        let policy = self.update_policy();
        // Revision data is stored without defaults; the update revision's spec may be the
        // object's own, defaulted: compare both without them.
        if template_defaults::same_template(&old.template, &new.template) {
            Ok(UpdateMethod::InPlace(InPlaceUpdateSpec::default()))
        } else if claim_templates_recreate(
            policy,
            !template_defaults::same_claim_templates(
                &old.volume_claim_templates,
                &new.volume_claim_templates,
            ),
        ) {
            Ok(UpdateMethod::Recreate {
                changed: vec!["spec.volumeClaimTemplates".to_owned()],
            })
        } else {
            choose_update_method(policy, &old.template, &new.template)
        }
    }

    fn new_pod(&self, create: &Create, revision: &RevisionSpec) -> Pod {
        pods::new_pod(self, &create.revision, revision, &create.instance_id)
    }

    fn new_claims(&self, create: &Create, revision: &RevisionSpec) -> Vec<PersistentVolumeClaim> {
        pods::new_pvcs(self, revision, &create.instance_id)
    }

    /// The claims carrying the pod's instance id.
    fn claims_of(&self, pod: &Pod, claims: &[&PersistentVolumeClaim]) -> Vec<String> {
        let Some(id) = instance_id(pod.metadata.labels.as_ref()) else {
            return Vec::new();
        };
        claims
            .iter()
            .filter(|pvc| instance_id(pvc.metadata.labels.as_ref()) == Some(id))
            .filter_map(|pvc| pvc.metadata.name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::*;
    use crate::api::cloneset::CloneSetSpec;

    fn int(value: i32) -> IntOrString {
        IntOrString::Int(value)
    }

    fn pct(value: &str) -> IntOrString {
        IntOrString::String(value.to_owned())
    }

    #[test]
    fn params_from_a_cloneset_spec() {
        let spec = CloneSetSpec {
            replicas: Some(4),
            update_strategy: crate::api::cloneset::CloneSetUpdateStrategy {
                partition: Some(pct("50%")),
                max_surge: Some(int(1)),
                paused: true,
                ..Default::default()
            },
            scale_strategy: crate::api::cloneset::CloneSetScaleStrategy {
                max_unavailable: Some(int(2)),
                ..Default::default()
            },
            ..Default::default()
        };
        let cs = CloneSet::new("web", spec);
        let params = cs.rollout_params("web-a", "web-b");
        assert_eq!(params.replicas, 4);
        assert_eq!(params.partition, Some(pct("50%")));
        assert_eq!(params.max_unavailable, None);
        assert_eq!(params.scale_max_unavailable, Some(int(2)));
        assert!(params.paused && !params.revisions_consistent);
        assert!(cs.rollout_params("web-b", "web-b").revisions_consistent);
    }

    #[test]
    fn update_strategy_type_chooses_on_delete_and_how_pods_come_back() {
        use crate::api::cloneset::CloneSetUpdateStrategyType as Type;
        use crate::workload::inplace::INPLACE_UPDATE_READY;
        // (type, shared strategy type, policy, InPlaceUpdateReady gate on new pods)
        let cases = [
            (
                None,
                UpdateStrategyType::RollingUpdate,
                PodUpdatePolicy::ReCreate,
                false,
            ),
            (
                Some(Type::ReCreate),
                UpdateStrategyType::RollingUpdate,
                PodUpdatePolicy::ReCreate,
                false,
            ),
            (
                Some(Type::InPlaceIfPossible),
                UpdateStrategyType::RollingUpdate,
                PodUpdatePolicy::InPlaceIfPossible,
                true,
            ),
            (
                Some(Type::InPlaceOnly),
                UpdateStrategyType::RollingUpdate,
                PodUpdatePolicy::InPlaceOnly,
                true,
            ),
            // Replacements of deleted pods are new pods: no in-place gate that nothing
            // would ever set (kruise #2291).
            (
                Some(Type::OnDelete),
                UpdateStrategyType::OnDelete,
                PodUpdatePolicy::ReCreate,
                false,
            ),
        ];
        for (type_, strategy, policy, gate) in cases {
            let mut spec = CloneSetSpec::default();
            spec.update_strategy.type_ = type_;
            let cs = CloneSet::new("web", spec);
            assert_eq!(cs.update_strategy_type(), strategy, "{type_:?}");
            assert_eq!(cs.update_policy(), policy, "{type_:?}");
            assert_eq!(
                cs.readiness_gates().contains(&INPLACE_UPDATE_READY),
                gate,
                "{type_:?}"
            );
        }
    }
}

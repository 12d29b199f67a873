//! A CloneSet's rollout as the pre-download decision sees it (`crate::predownload`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::status::PARTITION_FIELD;
use crate::api::CloneSet;
use crate::predownload::workload::{PreDownloadRollout, RolloutCounts};
use crate::workload::rollout::{IntOrPercentError, partition_replicas, scaled_share};

impl PreDownloadRollout for CloneSet {
    fn annotations(&self) -> Option<&BTreeMap<String, String>> {
        self.metadata.annotations.as_ref()
    }

    fn spec_template(&self) -> &PodTemplateSpec {
        &self.spec.template
    }

    /// The partition may be a percentage; maxUnavailable defaults to 20%.
    fn rollout_counts(&self, _: &str, _: &str) -> Result<RolloutCounts, IntOrPercentError> {
        let spec = &self.spec;
        let replicas = spec.desired_replicas();
        let strategy = &spec.update_strategy;
        let max_unavailable = strategy.max_unavailable_or_default();
        Ok(RolloutCounts {
            replicas,
            partition: partition_replicas(PARTITION_FIELD, strategy.partition.as_ref(), replicas)?,
            max_unavailable: scaled_share(
                "spec.updateStrategy.maxUnavailable",
                &max_unavailable,
                replicas,
                false,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};

    use super::*;
    use crate::api::cloneset::CloneSetSpec;
    use crate::api::common::PodUpdatePolicy;
    use crate::workload::revision_spec::RevisionSpec;

    /// CloneSet's pre-download images under `policy` (the shared rule over its adapter).
    fn in_place_images(
        policy: PodUpdatePolicy,
        old: &RevisionSpec,
        new: &RevisionSpec,
    ) -> Option<BTreeMap<String, String>> {
        let mut spec = CloneSetSpec::default();
        spec.update_strategy.type_ = Some(policy.into());
        let cloneset = CloneSet::new("web", spec);
        crate::workload::adapter::in_place_images(&cloneset, old, new)
    }

    fn spec(image: &str, env: Option<&str>) -> RevisionSpec {
        RevisionSpec {
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "web".to_owned(),
                        image: Some(image.to_owned()),
                        env: env.map(|value| {
                            vec![k8s_openapi::api::core::v1::EnvVar {
                                name: "MODE".to_owned(),
                                value: Some(value.to_owned()),
                                value_from: None,
                            }]
                        }),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            volume_claim_templates: Vec::new(),
        }
    }

    #[test]
    fn only_in_place_image_changes_pre_download() {
        let v1 = spec("web:v1", None);
        let v2 = spec("web:v2", None);
        let v2_env = spec("web:v2", Some("x"));
        let expected = BTreeMap::from([("web".to_owned(), "web:v2".to_owned())]);
        let cases = [
            (
                PodUpdatePolicy::InPlaceIfPossible,
                &v1,
                &v2,
                Some(expected.clone()),
            ),
            (PodUpdatePolicy::InPlaceOnly, &v1, &v2, Some(expected)),
            (PodUpdatePolicy::ReCreate, &v1, &v2, None),
            (PodUpdatePolicy::InPlaceIfPossible, &v1, &v2_env, None),
        ];
        for (policy, old, new, want) in cases {
            assert_eq!(in_place_images(policy, old, new), want, "{policy:?}");
        }
        let mut with_claims = v2.clone();
        with_claims.volume_claim_templates.push(Default::default());
        assert_eq!(
            in_place_images(PodUpdatePolicy::InPlaceIfPossible, &v1, &with_claims),
            None,
            "a claim template change recreates"
        );
    }
}

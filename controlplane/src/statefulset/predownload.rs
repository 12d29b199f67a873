//! An Advanced StatefulSet's rollout as the pre-download decision sees it
//! (`crate::predownload`), with CloneSet's annotations: the pods kept back are those below
//! the partition ordinal, and OrderedReady updates one pod at a time.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;

use crate::api::StatefulSet;
use crate::api::statefulset::StatefulSetUpdateStrategyType;
use crate::predownload::workload::{PreDownloadRollout, RolloutCounts};
use crate::workload::adapter::{PodSetWorkload as _, UpdateStrategyType};
use crate::workload::rollout::{IntOrPercentError, scaled_share};

impl PreDownloadRollout for StatefulSet {
    /// `updateStrategy.type`: the adapter carries OnDelete as a paused rollout.
    fn rollout_strategy(&self) -> UpdateStrategyType {
        match self.spec.update_type() {
            StatefulSetUpdateStrategyType::RollingUpdate => UpdateStrategyType::RollingUpdate,
            StatefulSetUpdateStrategyType::OnDelete => UpdateStrategyType::OnDelete,
        }
    }

    fn annotations(&self) -> Option<&BTreeMap<String, String>> {
        self.metadata.annotations.as_ref()
    }

    fn spec_template(&self) -> &PodTemplateSpec {
        &self.spec.template
    }

    /// maxUnavailable as the adapter reads it (1 under OrderedReady).
    fn rollout_counts(
        &self,
        current: &str,
        update: &str,
    ) -> Result<RolloutCounts, IntOrPercentError> {
        let replicas = self.spec.desired_replicas();
        let params = self.rollout_params(current, update);
        let max_unavailable = match &params.max_unavailable {
            Some(value) => scaled_share(
                "spec.updateStrategy.rollingUpdate.maxUnavailable",
                value,
                replicas,
                false,
            )?,
            None => 1,
        };
        Ok(RolloutCounts {
            replicas,
            partition: kept_below_partition(self),
            max_unavailable,
        })
    }
}

/// How many pods the partition keeps on the current revision: the first `partition` of
/// the wanted ordinals (`WantedOrdinals::below_partition`), at most all of them.
fn kept_below_partition(set: &StatefulSet) -> i32 {
    let spec = &set.spec;
    spec.rolling_update()
        .partition_or_default()
        .clamp(0, spec.desired_replicas().max(0))
}

#[cfg(test)]
#[path = "predownload_tests.rs"]
mod tests;

//! An Advanced DaemonSet's rollout as the pre-download decision sees it
//! (`crate::predownload`), with CloneSet's annotations: the replicas are the nodes that
//! should run the pod; kept back are the `partition` pods and those on nodes outside
//! `rollingUpdate.selector`; maxUnavailable scales against the desired nodes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::adapter::DaemonSetWorkload;
use crate::predownload::workload::{PreDownloadRollout, RolloutCounts};
use crate::workload::rollout::{IntOrPercentError, MAX_UNAVAILABLE_FIELD, scaled_share};

impl PreDownloadRollout for DaemonSetWorkload<'_> {
    fn annotations(&self) -> Option<&BTreeMap<String, String>> {
        self.ds.metadata.annotations.as_ref()
    }

    fn spec_template(&self) -> &PodTemplateSpec {
        &self.ds.spec.template
    }

    fn rollout_counts(&self, _: &str, _: &str) -> Result<RolloutCounts, IntOrPercentError> {
        let rolling = self.ds.spec.rolling_update();
        let max_unavailable = scaled_share(
            MAX_UNAVAILABLE_FIELD,
            &rolling.max_unavailable_or_default(),
            self.desired,
            true,
        )?;
        let held = i32::try_from(self.held_back.len()).unwrap_or(i32::MAX);
        let kept = (rolling.partition_or_default())
            .saturating_add(held)
            .min(self.desired);
        Ok(RolloutCounts {
            replicas: self.desired,
            partition: kept,
            max_unavailable,
        })
    }
}

#[cfg(test)]
#[path = "predownload_tests.rs"]
mod tests;

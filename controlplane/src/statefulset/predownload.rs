//! An Advanced StatefulSet's rollout as the pre-download decision sees it
//! (`crate::predownload`), with CloneSet's annotations: the pods kept back are those below
//! the partition ordinal, and OrderedReady updates one pod at a time.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;

use crate::api::StatefulSet;
use crate::api::statefulset::StatefulSetUpdateStrategyType;
use crate::predownload::plan::{CREATED_LABEL, Rollout};
use crate::predownload::workload::PreDownloadRollout;
use crate::workload::adapter::PodSetWorkload as _;
use crate::workload::revision::REVISION_HASH_LABEL;
use crate::workload::rollout::{IntOrPercentError, scaled_share};

impl PreDownloadRollout for StatefulSet {
    fn pre_download_rollout<'a>(
        &'a self,
        current: &'a str,
        update: &'a ControllerRevision,
        updated_ready: i32,
        images: Option<&'a BTreeMap<String, String>>,
    ) -> Result<Rollout<'a>, IntOrPercentError> {
        let spec = &self.spec;
        let replicas = spec.desired_replicas();
        let params = self.rollout_params(current, update.metadata.name.as_deref().unwrap_or(""));
        let max_unavailable = match &params.max_unavailable {
            Some(value) => scaled_share(
                "spec.updateStrategy.rollingUpdate.maxUnavailable",
                value,
                replicas,
                false,
            )?,
            None => 1,
        };
        // Under OnDelete or paused the controller moves no pod: nothing to pull ahead of it.
        let rolls =
            spec.update_type() == StatefulSetUpdateStrategyType::RollingUpdate && !params.paused;
        let labels = update.metadata.labels.as_ref();
        Ok(Rollout {
            annotations: self.metadata.annotations.as_ref().unwrap_or(&EMPTY),
            replicas,
            partition: kept_below_partition(self),
            max_unavailable,
            updated_ready_replicas: updated_ready,
            current_revision: current,
            update_revision: update.metadata.name.as_deref().unwrap_or_default(),
            update_revision_hash: labels
                .and_then(|l| l.get(REVISION_HASH_LABEL))
                .map(String::as_str),
            already_created: labels
                .is_some_and(|l| l.get(CREATED_LABEL).is_some_and(|v| v == "true")),
            in_place_images: images.filter(|_| rolls),
            selector: &spec.selector,
            pull_secrets: (spec.template.spec.iter())
                .flat_map(|pod| pod.image_pull_secrets.iter().flatten())
                .map(|secret| secret.name.clone())
                .filter(|name| !name.is_empty())
                .collect(),
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

static EMPTY: BTreeMap<String, String> = BTreeMap::new();

#[cfg(test)]
#[path = "predownload_tests.rs"]
mod tests;

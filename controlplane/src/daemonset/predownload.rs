//! An Advanced DaemonSet's rollout as the pre-download decision sees it
//! (`crate::predownload`), with CloneSet's annotations: the replicas are the nodes that
//! should run the pod; kept back are the `partition` pods and those on nodes outside
//! `rollingUpdate.selector`; maxUnavailable scales against the desired nodes.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;

use super::adapter::DaemonSetWorkload;
use crate::predownload::plan::{CREATED_LABEL, Rollout};
use crate::predownload::workload::PreDownloadRollout;
use crate::workload::revision::REVISION_HASH_LABEL;
use crate::workload::rollout::{IntOrPercentError, MAX_UNAVAILABLE_FIELD, scaled_share};

impl PreDownloadRollout for DaemonSetWorkload<'_> {
    fn pre_download_rollout<'a>(
        &'a self,
        current: &'a str,
        update: &'a ControllerRevision,
        updated_ready: i32,
        images: Option<&'a BTreeMap<String, String>>,
    ) -> Result<Rollout<'a>, IntOrPercentError> {
        let spec = &self.ds.spec;
        let rolling = spec.rolling_update();
        let max_unavailable = scaled_share(
            MAX_UNAVAILABLE_FIELD,
            &rolling.max_unavailable_or_default(),
            self.desired,
            true,
        )?;
        let held = i32::try_from(self.held_back.len()).unwrap_or(i32::MAX);
        let kept = rolling
            .partition_or_default()
            .saturating_add(held)
            .min(self.desired);
        let labels = update.metadata.labels.as_ref();
        Ok(Rollout {
            annotations: self.ds.metadata.annotations.as_ref().unwrap_or(&EMPTY),
            replicas: self.desired,
            partition: kept,
            max_unavailable,
            updated_ready_replicas: updated_ready,
            current_revision: current,
            update_revision: update.metadata.name.as_deref().unwrap_or_default(),
            update_revision_hash: labels
                .and_then(|l| l.get(REVISION_HASH_LABEL))
                .map(String::as_str),
            already_created: labels
                .is_some_and(|l| l.get(CREATED_LABEL).is_some_and(|v| v == "true")),
            in_place_images: images,
            selector: &spec.selector,
            pull_secrets: (spec.template.spec.iter())
                .flat_map(|pod| pod.image_pull_secrets.iter().flatten())
                .map(|secret| secret.name.clone())
                .filter(|name| !name.is_empty())
                .collect(),
        })
    }
}

static EMPTY: BTreeMap<String, String> = BTreeMap::new();

#[cfg(test)]
#[path = "predownload_tests.rs"]
mod tests;

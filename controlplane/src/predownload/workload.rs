//! Pre-download for any pod-set kind mid-rollout: the kind says how its rollout reads
//! ([`PreDownloadRollout`]); this finds the update revision and the images an in-place
//! update changes, and hands the decision to [`super::jobs::sync`].

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec};

use super::jobs;
use super::plan::{CREATED_LABEL, Rollout};
use crate::workload::adapter::{PodSetWorkload, UpdateStrategyType, in_place_images};
use crate::workload::history::History;
use crate::workload::revision::REVISION_HASH_LABEL;
use crate::workload::rollout::IntOrPercentError;
use crate::workload::set_controller::PodSetParts;

/// A rollout's counts as the pre-download decision reads them, already scaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RolloutCounts {
    pub replicas: i32,
    /// Pods the rollout keeps on the current revision.
    pub partition: i32,
    /// Pods that may be unavailable during the update.
    pub max_unavailable: i32,
}

/// A pod-set kind whose in-place rollouts pre-download their new images: what it says of
/// its rollout; the rest of the [`Rollout`] is read the same way for every kind.
pub trait PreDownloadRollout: PodSetWorkload {
    /// Whether the controller moves live pods (`updateStrategy.type`), as the pre-download
    /// reads it; the adapter's by default (the StatefulSet's adapter carries its OnDelete
    /// as a paused rollout, so it says it here).
    fn rollout_strategy(&self) -> UpdateStrategyType {
        self.update_strategy_type()
    }

    /// The workload's annotations, where the pre-download settings are.
    fn annotations(&self) -> Option<&BTreeMap<String, String>>;

    /// The pod template of its spec (the jobs pull with its `imagePullSecrets`).
    fn spec_template(&self) -> &PodTemplateSpec;

    /// The counts of the rollout from `current` to `update`.
    fn rollout_counts(
        &self,
        current: &str,
        update: &str,
    ) -> Result<RolloutCounts, IntOrPercentError>;

    /// The rollout from `current` to `update` (the revision object from the cache), with
    /// `updated_ready` updated pods ready and `images` the in-place image changes.
    fn pre_download_rollout<'a>(
        &'a self,
        current: &'a str,
        update: &'a ControllerRevision,
        updated_ready: i32,
        images: Option<&'a BTreeMap<String, String>>,
    ) -> Result<Rollout<'a>, IntOrPercentError> {
        let update_revision = update.metadata.name.as_deref().unwrap_or_default();
        let counts = self.rollout_counts(current, update_revision)?;
        let labels = update.metadata.labels.as_ref();
        let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
        Ok(Rollout {
            annotations: self.annotations().unwrap_or(&EMPTY),
            replicas: counts.replicas,
            partition: counts.partition,
            max_unavailable: counts.max_unavailable,
            updated_ready_replicas: updated_ready,
            current_revision: current,
            update_revision,
            update_revision_hash: label(REVISION_HASH_LABEL),
            already_created: label(CREATED_LABEL) == Some("true"),
            in_place_images: images,
            selector: self.selector(),
            pull_secrets: pull_secret_names(self.spec_template()),
        })
    }
}

static EMPTY: BTreeMap<String, String> = BTreeMap::new();

/// The names of `template`'s `imagePullSecrets`, empty ones left out.
fn pull_secret_names(template: &PodTemplateSpec) -> Vec<String> {
    (template.spec.iter())
        .flat_map(|pod| pod.image_pull_secrets.iter().flatten())
        .map(|secret| secret.name.clone())
        .filter(|name| !name.is_empty())
        .collect()
}

/// Whether a rollout under `strategy` pre-pulls its update revision's images: the one
/// rule of every pod-set kind, as OpenKruise's kinds read it together. Under OnDelete the
/// controller moves no live pod (OpenKruise's Advanced StatefulSet skips it by name); a
/// replacement pulls its image when it starts, so nothing is worth pulling ahead. A
/// paused rollout still pre-pulls (none of OpenKruise's CloneSet, Advanced StatefulSet
/// and Advanced DaemonSet checks `paused`): the pause is the time the pull has, and the
/// resume then updates pods whose images are already on their nodes.
pub fn pre_pulls(strategy: UpdateStrategyType) -> bool {
    strategy == UpdateStrategyType::RollingUpdate
}

/// Pre-pulls the update revision's new images on the nodes of pods still to update, and
/// removes the pre-download jobs once they are not needed. Never fails the sync.
pub async fn sync<W: PreDownloadRollout>(
    parts: &PodSetParts,
    namespace: &str,
    workload: &W,
    reference: &ObjectReference,
    history: &History,
    revisions: &BTreeMap<String, W::Revision>,
    updated_ready: i32,
) {
    let (current, update) = (
        history.current_revision.as_str(),
        history.update_revision.as_str(),
    );
    // A revision created in this sync is not cached yet; the next sync sees it.
    let Some(update_object) =
        (history.objects.iter()).find(|r| r.metadata.name.as_deref() == Some(update))
    else {
        return;
    };
    // A converged rollout only cleans up: no template diff on every steady-state sync.
    let images = match (revisions.get(current), revisions.get(update)) {
        _ if current == update || !pre_pulls(workload.rollout_strategy()) => None,
        (Some(old), Some(new)) => in_place_images(workload, old, new),
        _ => None,
    };
    let rollout =
        match workload.pre_download_rollout(current, update_object, updated_ready, images.as_ref())
        {
            Ok(rollout) => rollout,
            // The planner reported the same error as a failed update already.
            Err(err) => {
                tracing::debug!(%err, "no image pre-download");
                return;
            }
        };
    let owner = jobs::Workload {
        namespace,
        owner: workload.owner_reference(),
        reference,
    };
    jobs::sync(
        &parts.client,
        &parts.stores,
        &parts.events,
        &owner,
        &rollout,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_rollout_that_moves_live_pods_pre_pulls() {
        let cases = [
            (UpdateStrategyType::RollingUpdate, true),
            (UpdateStrategyType::OnDelete, false),
        ];
        for (strategy, pulls) in cases {
            assert_eq!(pre_pulls(strategy), pulls, "{strategy:?}");
        }
    }
}

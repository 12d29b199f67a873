//! The revision-history step every pod-set workload takes before it plans (Kubernetes'
//! `controller_history`, OpenKruise's `getActiveRevisions` / `truncateHistory`): make
//! sure a ControllerRevision holds the current template (create it, renumber an older one
//! that holds it, or count a hash collision), and after the sync delete revisions no pod
//! uses beyond the history limit. The decisions are `workload::revision`'s; this is the
//! thin layer that writes them.

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::controller::api_error::{ApiError, api_error};
use crate::workload::adapter::PodSetWorkload;
use crate::workload::revision::{
    self, REVISION_HASH_LABEL, Revision, RevisionError, UpdateRevisionPlan, current_revision_name,
    revisions_to_truncate,
};

/// Why the history step failed; the sync is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Revision(#[from] RevisionError),
}

/// The workload's revisions once the update revision exists.
#[derive(Clone, Debug)]
pub struct History {
    /// The cached ControllerRevisions the workload controls.
    pub objects: Vec<Arc<ControllerRevision>>,
    pub revisions: Vec<Revision>,
    pub update_revision: String,
    pub current_revision: String,
    /// The collision count the update revision's name was computed with.
    pub collision_count: i32,
}

/// What the step found.
#[derive(Debug)]
pub enum HistoryStep {
    Ready(History),
    /// Another template already has the update revision's name: the higher collision
    /// count was written to the workload's status; sync again at once.
    Collided,
}

/// One workload's revision history: the API it is written through, and the workload's
/// own API (whose `status.collisionCount` a hash collision moves).
pub struct HistoryWriter<'a, K> {
    pub revisions: Api<ControllerRevision>,
    pub owner: Api<K>,
    /// The workload's name: the prefix of its revisions' names.
    pub owner_name: &'a str,
}

impl<K> HistoryWriter<'_, K>
where
    K: Clone + DeserializeOwned + Debug,
{
    /// Makes sure a revision holds `data`. `cached` are the revisions the workload
    /// controls; `status_current` its `status.currentRevision`; `build` makes the
    /// ControllerRevision object for a name, hash, number and data.
    pub async fn sync_update_revision(
        &self,
        cached: Vec<Arc<ControllerRevision>>,
        data: &[u8],
        collision_count: i32,
        status_current: &str,
        build: impl FnOnce(&str, &str, i64, Vec<u8>) -> Result<ControllerRevision, RevisionError>,
    ) -> Result<HistoryStep, HistoryError> {
        let revisions: Vec<Revision> = cached.iter().map(|r| to_revision(r)).collect();
        let plan =
            revision::plan_update_revision(self.owner_name, &revisions, data, collision_count);
        let mut collision_count = collision_count;
        match &plan {
            UpdateRevisionPlan::Unchanged { .. } => {}
            UpdateRevisionPlan::Renumber { name, number } => self.renumber(name, *number).await?,
            UpdateRevisionPlan::Create {
                name,
                hash,
                number,
                collision_count: count,
            } => {
                collision_count = *count;
                let object = build(name, hash, *number, data.to_vec())?;
                if !self.create(name, &object, data).await? {
                    self.write_collision_count(collision_count + 1).await?;
                    return Ok(HistoryStep::Collided);
                }
            }
        }
        let update_revision = plan.name().to_owned();
        let current_revision =
            current_revision_name(&revisions, status_current, &update_revision).to_owned();
        Ok(HistoryStep::Ready(History {
            objects: cached,
            revisions,
            update_revision,
            current_revision,
            collision_count,
        }))
    }

    async fn renumber(&self, name: &str, number: i64) -> Result<(), ApiError> {
        let patch = Patch::Merge(json!({ "revision": number }));
        self.revisions
            .patch(name, &PatchParams::default(), &patch)
            .await
            .map_err(api_error(format!("renumbering revision {name}")))?;
        Ok(())
    }

    /// Creates the revision; `false` when one with the name but other data exists (a hash
    /// collision). One with the same data is our own earlier write the cache has not
    /// shown yet, and fine.
    async fn create(
        &self,
        name: &str,
        object: &ControllerRevision,
        data: &[u8],
    ) -> Result<bool, ApiError> {
        match self.revisions.create(&PostParams::default(), object).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let existing = self
                    .revisions
                    .get(name)
                    .await
                    .map_err(api_error(format!("reading revision {name}")))?;
                Ok(to_revision(&existing).data == data)
            }
            Err(err) => Err(api_error(format!("creating revision {name}"))(err)),
        }
    }

    async fn write_collision_count(&self, count: i32) -> Result<(), ApiError> {
        let patch = Patch::Merge(json!({ "status": { "collisionCount": count } }));
        self.owner
            .patch_status(self.owner_name, &PatchParams::default(), &patch)
            .await
            .map_err(api_error("writing status.collisionCount"))?;
        Ok(())
    }

    /// Deletes the revisions beyond `history_limit` that neither the current nor the
    /// update revision is and no pod (by its revision label) uses.
    pub async fn truncate(
        &self,
        history: &History,
        pod_revision_labels: &[Option<&str>],
        history_limit: i32,
    ) -> Result<(), ApiError> {
        let dead = revisions_to_truncate(
            &history.revisions,
            &history.current_revision,
            &history.update_revision,
            pod_revision_labels,
            history_limit,
        );
        for revision in dead {
            let result = self
                .revisions
                .delete(&revision.name, &DeleteParams::default())
                .await;
            if let Err(err) = result
                && !matches!(&err, kube::Error::Api(status) if status.code == 404)
            {
                return Err(api_error(format!(
                    "deleting old revision {}",
                    revision.name
                ))(err));
            }
        }
        Ok(())
    }
}

/// What the revision rules read of a ControllerRevision.
pub fn to_revision(r: &ControllerRevision) -> Revision {
    Revision {
        name: r.name_any(),
        number: r.revision,
        hash_label: r.labels().get(REVISION_HASH_LABEL).cloned(),
        data: r
            .data
            .as_ref()
            .and_then(|d| serde_json::to_vec(&d.0).ok())
            .unwrap_or_default(),
        created: r
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second()),
    }
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;

/// The ControllerRevision `name` holding `data` (JSON), labelled with `selector`'s labels
/// and `hash`, numbered `number`, controlled through `owner`.
pub fn revision_object(
    selector: &LabelSelector,
    namespace: Option<String>,
    owner: &OwnerReference,
    name: &str,
    hash: &str,
    number: i64,
    data: Vec<u8>,
) -> Result<ControllerRevision, RevisionError> {
    let value: serde_json::Value =
        serde_json::from_slice(&data).map_err(|source| RevisionError::Serialize { source })?;
    let mut labels = selector.match_labels.clone().unwrap_or_default();
    labels.insert(REVISION_HASH_LABEL.to_owned(), hash.to_owned());
    Ok(ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace,
            labels: Some(labels),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(value)),
        revision: number,
    })
}

/// The ControllerRevision `name` of `workload` (an API type that is its own adapter).
pub fn new_revision<W: PodSetWorkload + kube::Resource>(
    workload: &W,
    name: &str,
    hash: &str,
    number: i64,
    data: Vec<u8>,
) -> Result<ControllerRevision, RevisionError> {
    let (selector, owner) = (workload.selector(), workload.owner_reference());
    revision_object(
        selector,
        workload.namespace(),
        &owner,
        name,
        hash,
        number,
        data,
    )
}

//! The ImageListPullJob reconciler: reads the job and its ImagePullJobs from the shared
//! caches, plans with `plan::plan`, and carries the plan out: creates the missing
//! ImagePullJobs (an AlreadyExists answer means an earlier sync or another leader created
//! it: the cache will show it), replaces the spec of edited ones (optimistic concurrency
//! on the cached resourceVersion), deletes the ones no longer wanted (UID precondition),
//! publishes Events, writes status, and deletes the job once its TTL ran out. The
//! ImagePullJobs go with the job through garbage collection (controller references).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Resource as _;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::Store;

use super::plan::{self, Plan, Snapshot};
use crate::api::{ImageListPullJob, ImagePullJob};
use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::{ApiError, api_error, status_code};
use crate::controller::events::EventSink;
use crate::controller::expectations::{
    EXPECTATION_TIMEOUT, Expectation, Expectations, resource_version,
};
use crate::controller::object::ObjectReconciler;
use crate::controller::runner::Outcome;
use crate::controller::status_patch::write_changed_status;
use crate::runtime::stores::SyncState;
use crate::workload::ownership::{delete_params, is_controlled_by};

const ACTION: &str = "ImageListPull";

/// Why an ImageListPullJob sync failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// The ImageListPullJob controller's state, shared by its workers.
pub struct ImageListPullJobController {
    client: kube::Client,
    stores: Stores,
    events: EventSink,
    expectations: Expectations<ObjectKey>,
}

impl ImageListPullJobController {
    pub fn new(client: kube::Client, stores: Stores, events: EventSink) -> Self {
        Self {
            client,
            stores,
            events,
            expectations: Expectations::new(EXPECTATION_TIMEOUT),
        }
    }
}

impl ObjectReconciler for ImageListPullJobController {
    type Object = ImageListPullJob;
    type Error = SyncError;
    const KIND: &'static str = "ImageListPullJob";
    const READS: &'static [&'static str] = &["ImagePullJob", "ImageListPullJob"];
    const EXPECTATIONS_RECHECK: Duration = Duration::from_secs(1);

    fn objects(&self) -> &Store<ImageListPullJob> {
        &self.stores.imagelistpulljobs
    }

    fn expectations(&self) -> &Expectations<ObjectKey> {
        &self.expectations
    }

    fn caches(&self) -> &SyncState {
        &self.stores.sync
    }

    fn needs_no_sync(&self, job: &ImageListPullJob) -> bool {
        // Garbage collection takes its ImagePullJobs.
        job.metadata.deletion_timestamp.is_some()
    }

    async fn sync(
        &self,
        key: &ObjectKey,
        job: Arc<ImageListPullJob>,
    ) -> Result<Outcome, SyncError> {
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let in_namespace: Vec<Arc<ImagePullJob>> = (self.stores.imagepulljobs.state())
            .into_iter()
            .filter(|j| j.metadata.namespace.as_deref() == Some(&key.namespace))
            .collect();
        let (ours, others): (Vec<_>, Vec<_>) = in_namespace
            .iter()
            .partition(|j| is_controlled_by(&j.metadata, &uid));
        let planned = plan::plan(&Snapshot {
            job: &job,
            children: ours
                .iter()
                .filter(|j| j.metadata.deletion_timestamp.is_none())
                .map(|j| j.as_ref())
                .collect(),
            taken: others
                .iter()
                .filter_map(|j| j.metadata.name.as_deref())
                .collect::<BTreeSet<_>>(),
            now: Timestamp::now(),
        });
        tracing::debug!(
            create = planned.create.len(),
            update = planned.update.len(),
            delete = planned.delete.len(),
            "planned"
        );
        self.events
            .publish_planned(&job.object_ref(&()), ACTION, &planned.events)
            .await;
        self.write_children(key, &ours, &planned).await?;
        self.write_status(key, &job, &planned).await?;
        if planned.delete_job {
            self.delete_job(key, &job).await?;
        }
        Ok(planned.requeue_after.map_or(Outcome::Done, |wait| {
            Outcome::RequeueAfter(wait.max(Duration::from_secs(1)))
        }))
    }
}

impl ImageListPullJobController {
    fn children_api(&self, key: &ObjectKey) -> Api<ImagePullJob> {
        Api::namespaced(self.client.clone(), &key.namespace)
    }

    async fn write_children(
        &self,
        key: &ObjectKey,
        ours: &[&Arc<ImagePullJob>],
        planned: &Plan,
    ) -> Result<(), SyncError> {
        let api = self.children_api(key);
        for (name, uid) in &planned.delete {
            match api.delete(name, &delete_params(uid)).await {
                Ok(_) => self.expectations.expect(
                    key,
                    Expectation::Delete {
                        kind: "ImagePullJob",
                        name: name.clone(),
                        uid: uid.clone(),
                    },
                ),
                Err(err) if matches!(status_code(&err), Some(404 | 409)) => {}
                Err(err) => {
                    return Err(api_error(format!("deleting ImagePullJob {name}"))(err).into());
                }
            }
        }
        for (name, spec) in &planned.update {
            let Some(current) = ours.iter().find(|j| j.metadata.name.as_ref() == Some(name)) else {
                continue;
            };
            let mut edited = ImagePullJob::clone(current);
            edited.spec = spec.clone();
            // The cached resourceVersion goes along: a concurrent change answers 409 and
            // the sync is retried on what the cache shows next.
            let written = api
                .replace(name, &PostParams::default(), &edited)
                .await
                .map_err(api_error(format!(
                    "updating the spec of ImagePullJob {name}"
                )))?;
            self.expectations.expect(
                key,
                Expectation::Update {
                    kind: "ImagePullJob",
                    name: name.clone(),
                    resource_version: resource_version(&written.metadata),
                },
            );
        }
        for child in &planned.create {
            let name = child.metadata.name.clone().unwrap_or_default();
            match api.create(&PostParams::default(), child).await {
                Ok(_) => self.expectations.expect(
                    key,
                    Expectation::Create {
                        kind: "ImagePullJob",
                        name,
                    },
                ),
                // Created before (a lost answer, another leader): the cache will show it.
                Err(err) if status_code(&err) == Some(409) => {}
                Err(err) => {
                    return Err(api_error(format!("creating ImagePullJob {name}"))(err).into());
                }
            }
        }
        Ok(())
    }

    /// Writes the status when it changed.
    async fn write_status(
        &self,
        key: &ObjectKey,
        job: &ImageListPullJob,
        planned: &Plan,
    ) -> Result<(), SyncError> {
        let api: Api<ImageListPullJob> = Api::namespaced(self.client.clone(), &key.namespace);
        let (old, new) = (job.status.as_ref(), &planned.status);
        if let Some(written) = write_changed_status(&api, &key.name, old, new).await? {
            self.expect_own_write(key, &written.metadata);
        }
        Ok(())
    }

    /// Deletes the job (only the one with its UID) once its TTL after finishing ran out.
    async fn delete_job(&self, key: &ObjectKey, job: &ImageListPullJob) -> Result<(), SyncError> {
        let api: Api<ImageListPullJob> = Api::namespaced(self.client.clone(), &key.namespace);
        let params = delete_params(job.metadata.uid.as_deref().unwrap_or_default());
        match api.delete(&key.name, &params).await {
            Ok(_) => Ok(()),
            Err(err) if matches!(status_code(&err), Some(404 | 409)) => Ok(()),
            Err(err) => Err(api_error("deleting the job after its TTL")(err).into()),
        }
    }
}

//! The ImagePullJob reconciler: reads the shared caches into a `plan::Snapshot`, applies
//! or releases the job's ImageList entries with server-side apply under the job's own
//! field manager, writes status and Events, and deletes the job when its TTL runs out. A
//! finalizer (`controller::finalizer`) makes sure a deleted job's entries are released
//! first. The runner's shared preamble (`controller::object`) has already found the job
//! in the cache and waited out the writes of earlier syncs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Resource as _, ResourceExt as _};
use serde_json::json;

use super::entries::{CONCURRENT_WRITES, apply_body, field_manager, owned_images, write_bounded};
use super::plan::{self, NodeImage, Snapshot};
use crate::api::{ImageList, ImagePullJob};
use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::{ApiError, api_error};
use crate::controller::events::EventSink;
use crate::controller::expectations::{
    EXPECTATION_TIMEOUT, Expectation, Expectations, resource_version,
};
use crate::controller::finalizer::{self, FinalizerState};
use crate::controller::object::ObjectReconciler;
use crate::controller::runner::Outcome;
use crate::runtime::stores::SyncState;
use crate::workload::ownership::delete_params;

/// Holds a deleted job until its entries are released from every ImageList.
pub const FINALIZER: &str = "apps.kruise.io/imagepulljob-cleanup";

/// Why an ImagePullJob sync failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// The ImagePullJob controller's state, shared by its workers.
pub struct ImagePullJobController {
    client: kube::Client,
    stores: Stores,
    events: EventSink,
    expectations: Expectations<ObjectKey>,
}

impl ImagePullJobController {
    pub fn new(client: kube::Client, stores: Stores, events: EventSink) -> Self {
        Self {
            client,
            stores,
            events,
            expectations: Expectations::new(EXPECTATION_TIMEOUT),
        }
    }
}

impl ObjectReconciler for ImagePullJobController {
    type Object = ImagePullJob;
    type Error = SyncError;
    const KIND: &'static str = "ImagePullJob";
    const READS: &'static [&'static str] = &["Node", "Pod", "ImageList", "ImagePullJob"];
    const EXPECTATIONS_RECHECK: Duration = Duration::from_secs(1);

    fn objects(&self) -> &Store<ImagePullJob> {
        &self.stores.imagepulljobs
    }

    fn expectations(&self) -> &Expectations<ObjectKey> {
        &self.expectations
    }

    fn caches(&self) -> &SyncState {
        &self.stores.sync
    }

    async fn sync(&self, key: &ObjectKey, job: Arc<ImagePullJob>) -> Result<Outcome, SyncError> {
        let manager = field_manager(&key.namespace, &key.name);
        match FinalizerState::of(&job.metadata, FINALIZER) {
            FinalizerState::Cleanup => self.clean_up(key, &job, &manager).await,
            FinalizerState::Released => Ok(Outcome::Done),
            FinalizerState::Add => {
                let written = finalizer::add(
                    &self.jobs(&key.namespace),
                    &key.name,
                    &job.metadata,
                    FINALIZER,
                )
                .await?;
                self.expect_own_write(key, &written.metadata);
                // The update triggers the next reconcile.
                Ok(Outcome::Done)
            }
            FinalizerState::Apply => self.sync_live(key, &job, &manager).await,
        }
    }
}

impl ImagePullJobController {
    fn jobs(&self, namespace: &str) -> Api<ImagePullJob> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// A live job: plan from the caches, then write entries, events, status, and delete
    /// the job once its TTL ran out.
    async fn sync_live(
        &self,
        key: &ObjectKey,
        job: &ImagePullJob,
        manager: &str,
    ) -> Result<Outcome, SyncError> {
        let lists = self.stores.imagelists.state();
        let by_node: BTreeMap<String, &Arc<ImageList>> =
            lists.iter().map(|l| (l.name_any(), l)).collect();
        let planned = self.plan(key, job, manager, &by_node);
        tracing::debug!(
            apply = ?planned.apply.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            release = ?planned.release,
            delete = planned.delete_job,
            "planned"
        );
        let outcome = self
            .write_entries(key, job, manager, &by_node, &planned)
            .await?;
        self.events
            .publish_planned(&job.object_ref(&()), "ImagePull", &planned.events)
            .await;
        self.write_status(key, job, &planned.status).await?;
        if planned.delete_job {
            self.delete_after_ttl(key, job).await?;
        }
        Ok(outcome)
    }

    fn plan(
        &self,
        key: &ObjectKey,
        job: &ImagePullJob,
        manager: &str,
        by_node: &BTreeMap<String, &Arc<ImageList>>,
    ) -> plan::Plan {
        let node_images = by_node
            .iter()
            .map(|(name, list)| (name.clone(), node_image(list, &job.spec.image, manager)))
            .collect();
        let nodes: Vec<Arc<Node>> = self.stores.nodes.state();
        let pods: Vec<Arc<Pod>> = if job.spec.pod_selector.is_some() {
            self.stores
                .pods
                .state()
                .into_iter()
                .filter(|p| p.metadata.namespace.as_deref() == Some(&key.namespace))
                .collect()
        } else {
            Vec::new()
        };
        plan::plan(&Snapshot {
            job,
            nodes: nodes.iter().map(AsRef::as_ref).collect(),
            pods: pods.iter().map(AsRef::as_ref).collect(),
            lists: node_images,
            now: Timestamp::now(),
        })
    }

    /// Applies and releases the planned entries; the outcome asks to look again soon when
    /// an ImageList went away under us.
    async fn write_entries(
        &self,
        key: &ObjectKey,
        job: &ImagePullJob,
        manager: &str,
        by_node: &BTreeMap<String, &Arc<ImageList>>,
        planned: &plan::Plan,
    ) -> Result<Outcome, SyncError> {
        let mut outcome = planned
            .requeue_after
            .map_or(Outcome::Done, Outcome::RequeueAfter);
        let writes = planned
            .apply
            .iter()
            .map(|(node, entry)| (node, Some(entry)))
            .chain(planned.release.iter().map(|node| (node, None)))
            .filter_map(|(node, entry)| Some((*by_node.get(node)?, entry)))
            // Collected: an iterator of closures held across the writes' awaits would
            // make the reconcile future not provably `Send`.
            .collect::<Vec<_>>();
        let present = write_bounded(writes, CONCURRENT_WRITES, |(list, entry)| {
            self.write_entry(key, list, &job.spec.image, entry, manager)
        });
        if !present.await? {
            // An ImageList went away under us: look again once the cache shows it.
            outcome = outcome.min(Outcome::RequeueAfter(plan::MISSING_LIST_REQUEUE));
        }
        Ok(outcome)
    }

    /// Writes the status when it changed.
    async fn write_status(
        &self,
        key: &ObjectKey,
        job: &ImagePullJob,
        status: &crate::api::imagepulljob::ImagePullJobStatus,
    ) -> Result<(), SyncError> {
        if job.status.as_ref() == Some(status) {
            return Ok(());
        }
        // A merge patch leaves out what serializes to nothing; an emptied list must
        // still replace the old one.
        let mut body = json!(status);
        body["failedNodes"] = json!(status.failed_nodes);
        let written = self
            .jobs(&key.namespace)
            .patch_status(
                &key.name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": body })),
            )
            .await
            .map_err(api_error("writing status"))?;
        self.expect_own_write(key, &written.metadata);
        Ok(())
    }

    /// Deletes the job (only the one with its UID) once its TTL after finishing ran out.
    async fn delete_after_ttl(&self, key: &ObjectKey, job: &ImagePullJob) -> Result<(), SyncError> {
        let params = delete_params(job.metadata.uid.as_deref().unwrap_or_default());
        match self.jobs(&key.namespace).delete(&key.name, &params).await {
            Ok(_) => Ok(()),
            Err(err) if is_status(&err, 404) || is_status(&err, 409) => Ok(()),
            Err(err) => Err(api_error("deleting the job after its TTL")(err).into()),
        }
    }

    /// Applies (or with `None` releases) the job's entry on one ImageList; `false` when
    /// the ImageList no longer exists.
    async fn write_entry(
        &self,
        key: &ObjectKey,
        list: &ImageList,
        image: &str,
        entry: Option<&crate::api::imagelist::ImageListEntry>,
        manager: &str,
    ) -> Result<bool, SyncError> {
        let name = list.name_any();
        let uid = list.metadata.uid.clone().unwrap_or_default();
        let api: Api<ImageList> = Api::all(self.client.clone());
        let params = PatchParams::apply(manager).force();
        let body = apply_body(&name, &uid, image, entry);
        let verb = if entry.is_some() {
            "applying"
        } else {
            "releasing"
        };
        match api.patch(&name, &params, &Patch::Apply(body)).await {
            Ok(written) => {
                tracing::debug!(node = %name, image, verb, "wrote ImageList entry");
                self.expectations.expect(
                    key,
                    Expectation::Update {
                        kind: "ImageList",
                        name,
                        resource_version: resource_version(&written.metadata),
                    },
                );
                Ok(true)
            }
            // 409: the UID no longer matches (the ImageList was deleted, maybe recreated).
            Err(err) if is_status(&err, 404) || is_status(&err, 409) => {
                tracing::debug!(node = %name, image, verb, "ImageList gone");
                Ok(false)
            }
            Err(err) => Err(SyncError::from(api_error(format!(
                "{verb} the entry of {image} on ImageList {name}"
            ))(err))),
        }
    }

    /// A deleted job: release its entries everywhere, then let it go.
    async fn clean_up(
        &self,
        key: &ObjectKey,
        job: &ImagePullJob,
        manager: &str,
    ) -> Result<Outcome, SyncError> {
        let held: Vec<Arc<ImageList>> = self
            .stores
            .imagelists
            .state()
            .into_iter()
            .filter(|list| !owned_images(&list.metadata, manager).is_empty())
            .collect();
        // A gone ImageList took the entry with it.
        write_bounded(&held, CONCURRENT_WRITES, |list| {
            self.write_entry(key, list, &job.spec.image, None, manager)
        })
        .await?;
        let released = held.len();
        finalizer::remove(
            &self.jobs(&key.namespace),
            &key.name,
            &job.metadata,
            FINALIZER,
        )
        .await?;
        self.events
            .normal(
                &job.object_ref(&()),
                "Cleaned",
                "ImagePull",
                format!(
                    "released the entry of {} from {released} ImageLists",
                    job.spec.image
                ),
            )
            .await;
        self.expectations.forget(key);
        Ok(Outcome::Done)
    }
}

/// The job's image on one ImageList: the entry if this job's manager holds it, and the
/// image's status if the status covers the current spec.
fn node_image(list: &ImageList, image: &str, manager: &str) -> NodeImage {
    let owned = owned_images(&list.metadata, manager)
        .contains(image)
        .then(|| list.spec.images.get(image).cloned())
        .flatten();
    let generation = list.metadata.generation.unwrap_or(0);
    let status = list
        .status
        .as_ref()
        .filter(|s| s.observed_generation >= generation)
        .and_then(|s| s.images.get(image).cloned());
    NodeImage { owned, status }
}

fn is_status(err: &kube::Error, code: u16) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == code)
}

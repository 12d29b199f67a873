//! The BroadcastJob reconciler: reads the shared caches into a `plan::Snapshot`, then
//! carries the plan out: creates pods (each node's failed creates back off on their own,
//! so a template the apiserver refuses never floods it), deletes pods with UID
//! preconditions, pauses the job, writes status and Events, and deletes the job when its
//! TTL runs out (its pods go with it through their owner references). The runner's shared
//! preamble (`controller::object`) has already found the job in the cache and waited out
//! the writes of earlier syncs.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Resource as _;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;
use serde_json::json;
use tokio::time::Instant;

use super::plan::{self, Plan, Snapshot};
use super::pods::new_pod;
use crate::api::BroadcastJob;
use crate::api::broadcastjob::BroadcastJobStatus;
use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::{ApiError, api_error, api_message, status_code};
use crate::controller::create_backoff::CreateBackoff;
use crate::controller::events::EventSink;
use crate::controller::expectations::{EXPECTATION_TIMEOUT, Expectation, Expectations};
use crate::controller::object::ObjectReconciler;
use crate::controller::runner::Outcome;
use crate::controller::status_patch::write_changed_status;
use crate::runtime::stores::SyncState;
use crate::workload::ownership::{delete_params, is_controlled_by};

const ACTION: &str = "BroadcastJob";

/// Why a BroadcastJob sync failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// The BroadcastJob controller's state, shared by its workers.
pub struct BroadcastJobController {
    client: kube::Client,
    stores: Stores,
    events: EventSink,
    expectations: Expectations<ObjectKey>,
    /// Failed pod creates, per job and node.
    backoff: CreateBackoff<(ObjectKey, String)>,
}

impl BroadcastJobController {
    pub fn new(client: kube::Client, stores: Stores, events: EventSink) -> Self {
        Self {
            client,
            stores,
            events,
            expectations: Expectations::new(EXPECTATION_TIMEOUT),
            backoff: CreateBackoff::default(),
        }
    }
}

impl ObjectReconciler for BroadcastJobController {
    type Object = BroadcastJob;
    type Error = SyncError;
    const KIND: &'static str = "BroadcastJob";
    const READS: &'static [&'static str] = &["Node", "Pod", "BroadcastJob"];
    const EXPECTATIONS_RECHECK: Duration = Duration::from_secs(1);

    fn objects(&self) -> &Store<BroadcastJob> {
        &self.stores.broadcastjobs
    }

    fn expectations(&self) -> &Expectations<ObjectKey> {
        &self.expectations
    }

    fn caches(&self) -> &SyncState {
        &self.stores.sync
    }

    fn needs_no_sync(&self, job: &BroadcastJob) -> bool {
        // Being deleted: the garbage collector takes its pods.
        job.metadata.deletion_timestamp.is_some()
    }

    async fn sync(&self, key: &ObjectKey, job: Arc<BroadcastJob>) -> Result<Outcome, SyncError> {
        let planned = self.plan(key, &job);
        tracing::debug!(create_on = ?planned.create_on, delete = planned.delete.len(), pause = planned.pause, delete_job = planned.delete_job, "planned");
        let mut outcome = planned
            .requeue_after
            .map_or(Outcome::Done, Outcome::RequeueAfter);
        if let Some(wait) = self.create_pods(key, &job, &planned.create_on).await {
            outcome = outcome.min(Outcome::RequeueAfter(wait));
        }
        self.delete_pods(key, &planned).await?;
        self.events
            .publish_planned(&job.object_ref(&()), ACTION, &planned.events)
            .await;
        if planned.pause {
            self.pause(key).await?;
        }
        self.write_status(key, &job, &planned.status).await?;
        if planned.delete_job {
            self.delete_job(key, &job).await?;
        }
        Ok(outcome)
    }

    fn forget(&self, key: &ObjectKey) {
        for node in self.stores.nodes.state() {
            let name = node.metadata.name.clone().unwrap_or_default();
            self.backoff.forget(&(key.clone(), name));
        }
    }
}

impl BroadcastJobController {
    fn jobs(&self, namespace: &str) -> Api<BroadcastJob> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn plan(&self, key: &ObjectKey, job: &BroadcastJob) -> Plan {
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let pods: Vec<Pod> = self
            .stores
            .pods
            .state()
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(&key.namespace))
            .filter(|p| is_controlled_by(&p.metadata, &uid))
            .map(|p| p.as_ref().clone())
            .collect();
        let nodes: Vec<Node> = self
            .stores
            .nodes
            .state()
            .iter()
            .map(|n| n.as_ref().clone())
            .collect();
        let generation = job.metadata.generation.unwrap_or_default();
        let now = Instant::now();
        let backing_off: BTreeSet<String> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .filter(|n| {
                let entry = (key.clone(), n.clone());
                self.backoff.waiting(&entry, generation, now).is_some()
            })
            .collect();
        let default_status = BroadcastJobStatus::default();
        plan::plan(&Snapshot {
            spec: &job.spec,
            status: job.status.as_ref().unwrap_or(&default_status),
            nodes: &nodes,
            pods: &pods,
            backing_off: &backing_off,
            now: Timestamp::now(),
        })
    }

    /// Creates one pod per planned node; a refused create backs that node off (quoting the
    /// apiserver in a Warning). Returns how soon the earliest backed-off node may retry.
    async fn create_pods(
        &self,
        key: &ObjectKey,
        job: &BroadcastJob,
        nodes: &[String],
    ) -> Option<Duration> {
        let generation = job.metadata.generation.unwrap_or_default();
        let reference = job.object_ref(&());
        let mut retry: Option<Duration> = None;
        for node in nodes {
            let Some(pod) = new_pod(job, node) else {
                continue;
            };
            let entry = (key.clone(), node.clone());
            match self
                .pods(&key.namespace)
                .create(&PostParams::default(), &pod)
                .await
            {
                Ok(created) => {
                    self.backoff.succeeded(&entry);
                    let name = created.metadata.name.clone().unwrap_or_default();
                    self.expectations.expect(
                        key,
                        Expectation::Create {
                            kind: "Pod",
                            name: name.clone(),
                        },
                    );
                    let note = format!("created pod {name} on node {node}");
                    self.events
                        .normal(&reference, "SuccessfulCreate", ACTION, note)
                        .await;
                }
                Err(err) => {
                    let message = api_message(&err);
                    let wait =
                        self.backoff
                            .failed(&entry, generation, message.clone(), Instant::now());
                    retry = Some(retry.map_or(wait, |r| r.min(wait)));
                    let note = format!("could not create the pod for node {node}: {message}");
                    self.events
                        .warning(&reference, "FailedCreate", ACTION, note)
                        .await;
                }
            }
        }
        retry
    }

    /// Deletes the planned pods, each only if it still has the UID the plan saw.
    async fn delete_pods(&self, key: &ObjectKey, planned: &Plan) -> Result<(), SyncError> {
        for pod in &planned.delete {
            match self
                .pods(&key.namespace)
                .delete(&pod.name, &delete_params(&pod.uid))
                .await
            {
                Ok(_) => {}
                Err(err) if matches!(status_code(&err), Some(404 | 409)) => continue,
                Err(err) => {
                    return Err(api_error(format!("deleting pod {}", pod.name))(err).into());
                }
            }
            self.expectations.expect(
                key,
                Expectation::Delete {
                    kind: "Pod",
                    name: pod.name.clone(),
                    uid: pod.uid.clone(),
                },
            );
        }
        Ok(())
    }

    /// Sets `spec.paused` (failure policy Pause).
    async fn pause(&self, key: &ObjectKey) -> Result<(), SyncError> {
        let body = Patch::Merge(json!({ "spec": { "paused": true } }));
        let written = self
            .jobs(&key.namespace)
            .patch(&key.name, &PatchParams::default(), &body)
            .await
            .map_err(api_error("pausing the job"))?;
        self.expect_own_write(key, &written.metadata);
        Ok(())
    }

    /// Writes the status when it changed.
    async fn write_status(
        &self,
        key: &ObjectKey,
        job: &BroadcastJob,
        status: &BroadcastJobStatus,
    ) -> Result<(), SyncError> {
        let api = self.jobs(&key.namespace);
        if let Some(written) =
            write_changed_status(&api, &key.name, job.status.as_ref(), status).await?
        {
            self.expect_own_write(key, &written.metadata);
        }
        Ok(())
    }

    /// Deletes the job (only the one with its UID) once its TTL after finishing ran out.
    async fn delete_job(&self, key: &ObjectKey, job: &BroadcastJob) -> Result<(), SyncError> {
        let params = delete_params(job.metadata.uid.as_deref().unwrap_or_default());
        match self.jobs(&key.namespace).delete(&key.name, &params).await {
            Ok(_) => Ok(()),
            Err(err) if matches!(status_code(&err), Some(404 | 409)) => Ok(()),
            Err(err) => Err(api_error("deleting the job after its TTL")(err).into()),
        }
    }
}

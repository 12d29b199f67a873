//! The ContainerRecreateRequest reconciler: reads the request's pod, node and the other
//! requests of the pod from the shared caches, reads the agent's progress when a restart
//! runs, plans a step (`plan`), and carries it out: labels, the budget check and the
//! restart, the status, an Event when the request starts and ends, and the TTL delete.
//!
//! The agent's operation ID is kept in memory and in an annotation on the request, so a
//! new leader follows the same operation instead of starting another.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource as _, ResourceExt as _};
use serde_json::json;

use super::agent::{AgentFailure, ContainerRestarts, view_of};
use super::plan::{self, Action, AgentView, Plan, Snapshot, earlier_request};
use crate::api::ContainerRecreateRequest;
use crate::api::containerrecreaterequest::{
    ContainerRecreateRequestPhase as Phase, ContainerRecreateRequestStatus,
};
use crate::budget::admission::KubeBudgets;
use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::{ApiError, api_error, status_code};
use crate::controller::events::EventSink;
use crate::controller::expectations::{EXPECTATION_TIMEOUT, Expectations};
use crate::controller::object::ObjectReconciler;
use crate::controller::runner::Outcome;
use crate::controller::status_patch::write_changed_status;
use crate::runtime::stores::SyncState;
use crate::workload::ownership::delete_params;

/// The annotation holding the agent's restart operation ID of a started request.
pub const OPERATION_ANNOTATION: &str = "crr.stevedore.dev/operation-id";

const ACTION: &str = "ContainerRecreateRequest";
const KIND: &str = "ContainerRecreateRequest";

/// Why a sync failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// What the controller remembers about one request between reconciles.
#[derive(Clone, Debug, Default)]
struct Tracking {
    /// The request's UID: a request re-created under the same name starts afresh.
    uid: String,
    operation: Option<String>,
    /// When the agent first failed to answer, in the current run of failures.
    unreachable_since: Option<Timestamp>,
    /// The answer to the last start, while no operation runs.
    start_answer: Option<AgentView>,
}

/// The ContainerRecreateRequest controller's state, shared by its workers.
pub struct ContainerRecreateController {
    client: kube::Client,
    stores: Stores,
    restarts: Arc<dyn ContainerRestarts>,
    events: EventSink,
    expectations: Expectations<ObjectKey>,
    tracking: Mutex<HashMap<ObjectKey, Tracking>>,
}

impl ContainerRecreateController {
    pub fn new(
        client: kube::Client,
        stores: Stores,
        restarts: Arc<dyn ContainerRestarts>,
        events: EventSink,
    ) -> Self {
        Self {
            client,
            stores,
            restarts,
            events,
            expectations: Expectations::new(EXPECTATION_TIMEOUT),
            tracking: Mutex::default(),
        }
    }
}

impl ObjectReconciler for ContainerRecreateController {
    type Object = ContainerRecreateRequest;
    type Error = SyncError;
    const KIND: &'static str = KIND;
    const READS: &'static [&'static str] = &["Node", "Pod", KIND];
    const EXPECTATIONS_RECHECK: Duration = Duration::from_secs(1);

    fn objects(&self) -> &Store<ContainerRecreateRequest> {
        &self.stores.containerrecreaterequests
    }

    fn expectations(&self) -> &Expectations<ObjectKey> {
        &self.expectations
    }

    fn caches(&self) -> &SyncState {
        &self.stores.sync
    }

    fn needs_no_sync(&self, request: &ContainerRecreateRequest) -> bool {
        request.metadata.deletion_timestamp.is_some()
    }

    async fn sync(
        &self,
        key: &ObjectKey,
        request: Arc<ContainerRecreateRequest>,
    ) -> Result<Outcome, SyncError> {
        let pod = self.pod(&request);
        let node = pod.as_deref().and_then(|p| self.node_of(p));
        let tracking = self.tracking(key, &request);
        let operation = tracking
            .operation
            .clone()
            .or_else(|| request.annotations().get(OPERATION_ANNOTATION).cloned());
        let finished = request
            .status
            .as_ref()
            .is_some_and(|s| s.phase.is_finished());
        let agent = match (&operation, &node, finished) {
            (Some(operation), Some(node), false) => {
                let answer = self.restarts.progress(node, operation).await;
                let since = self.agent_answered(key, answer.as_ref().err());
                view_of(answer, since.unwrap_or_else(Timestamp::now))
            }
            _ => tracking.start_answer.clone().unwrap_or(AgentView::Silent),
        };
        let others = self.stores.containerrecreaterequests.state();
        let snapshot = Snapshot {
            request: &request,
            pod: pod.as_deref(),
            node_exists: node.is_some(),
            earlier: earlier_request(&request, others.iter().map(AsRef::as_ref)),
            operation: operation.as_deref(),
            agent: &agent,
            now: Timestamp::now(),
        };
        let mut planned = plan::plan(&snapshot);
        tracing::debug!(action = ?planned.action, phase = ?planned.status.phase, "planned");
        self.label(key, &planned.labels).await?;
        match planned.action.clone() {
            Action::None => {}
            Action::Delete => return self.delete(key, &request).await.map(|()| Outcome::Done),
            Action::Start(restart) => {
                if let Some(node) = &node {
                    planned = self.start(key, &snapshot, node, &restart).await?;
                }
            }
        }
        self.write_status(key, &request, &planned.status).await?;
        Ok(planned
            .requeue_after
            .map_or(Outcome::Done, Outcome::RequeueAfter))
    }

    fn forget(&self, key: &ObjectKey) {
        self.lock().remove(key);
    }
}

impl ContainerRecreateController {
    fn requests(&self, namespace: &str) -> Api<ContainerRecreateRequest> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Tracking>> {
        self.tracking.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn pod(&self, request: &ContainerRecreateRequest) -> Option<Arc<Pod>> {
        let namespace = request.namespace().unwrap_or_default();
        let reference = ObjectRef::new(&request.spec.pod_name).within(&namespace);
        self.stores.pods.get(&reference)
    }

    fn node_of(&self, pod: &Pod) -> Option<Arc<Node>> {
        let name = pod.spec.as_ref()?.node_name.as_deref()?;
        self.stores.nodes.get(&ObjectRef::new(name))
    }

    /// What is remembered of the request (reset when it is a new object of that name).
    fn tracking(&self, key: &ObjectKey, request: &ContainerRecreateRequest) -> Tracking {
        let uid = request.metadata.uid.clone().unwrap_or_default();
        let mut all = self.lock();
        let entry = all.entry(key.clone()).or_default();
        if entry.uid != uid {
            *entry = Tracking {
                uid,
                ..Tracking::default()
            };
        }
        entry.clone()
    }

    /// Records whether the agent answered; returns since when it has not, if it did not.
    fn agent_answered(&self, key: &ObjectKey, failure: Option<&AgentFailure>) -> Option<Timestamp> {
        let mut all = self.lock();
        let entry = all.entry(key.clone()).or_default();
        match failure {
            Some(AgentFailure::Unreachable(_)) => {
                Some(*entry.unreachable_since.get_or_insert_with(Timestamp::now))
            }
            _ => {
                entry.unreachable_since = None;
                None
            }
        }
    }

    /// Asks the disruption budgets (the shared check the executor asks), then the agent.
    /// On success the request is Recreating; otherwise the step is planned again with the
    /// agent's answer (without starting again).
    async fn start(
        &self,
        key: &ObjectKey,
        snapshot: &Snapshot<'_>,
        node: &Node,
        restart: &plan::RestartRequest,
    ) -> Result<Plan, SyncError> {
        let status = snapshot.request.status.clone().unwrap_or_default();
        let budgets = KubeBudgets {
            client: &self.client,
            stores: &self.stores,
            namespace: &key.namespace,
        };
        if let Some(held) = super::budget::admit(&budgets, &restart.pod_name, &status).await? {
            return Ok(held);
        }
        let answer = self.restarts.start(node, restart).await;
        let since = self.agent_answered(key, answer.as_ref().err());
        match answer {
            Ok(operation) => {
                {
                    let mut all = self.lock();
                    let entry = all.entry(key.clone()).or_default();
                    entry.operation = Some(operation.clone());
                    entry.start_answer = None;
                }
                self.annotate(key, &operation).await?;
                let reference = snapshot.request.object_ref(&());
                let note = format!(
                    "Asked the agent of node {} to recreate containers {} of pod {} (operation {operation}).",
                    restart.node,
                    restart.containers.join(", "),
                    restart.pod_name
                );
                self.events
                    .normal(&reference, "Recreating", ACTION, note)
                    .await;
                Ok(Plan {
                    labels: BTreeMap::new(),
                    action: Action::None,
                    status: plan::recreating(snapshot.request, &restart.node),
                    requeue_after: Some(plan::POLL_EVERY),
                })
            }
            Err(failure) => {
                let view = view_of(Err(failure), since.unwrap_or_else(Timestamp::now));
                self.lock().entry(key.clone()).or_default().start_answer = Some(view.clone());
                let mut again = plan::plan(&Snapshot {
                    agent: &view,
                    ..snapshot.clone()
                });
                if matches!(again.action, Action::Start(_)) {
                    again.action = Action::None;
                }
                Ok(again)
            }
        }
    }

    async fn label(
        &self,
        key: &ObjectKey,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), SyncError> {
        if labels.is_empty() {
            return Ok(());
        }
        let body = Patch::Merge(json!({ "metadata": { "labels": labels } }));
        let written = self
            .requests(&key.namespace)
            .patch(&key.name, &PatchParams::default(), &body)
            .await
            .map_err(api_error("labelling the request with its pod and node"))?;
        self.expect_own_write(key, &written.metadata);
        Ok(())
    }

    async fn annotate(&self, key: &ObjectKey, operation: &str) -> Result<(), SyncError> {
        let body = Patch::Merge(json!({
            "metadata": { "annotations": { OPERATION_ANNOTATION: operation } }
        }));
        let written = self
            .requests(&key.namespace)
            .patch(&key.name, &PatchParams::default(), &body)
            .await
            .map_err(api_error("recording the agent's restart operation"))?;
        self.expect_own_write(key, &written.metadata);
        Ok(())
    }

    /// Writes the status when it changed, with an Event when the request finishes.
    async fn write_status(
        &self,
        key: &ObjectKey,
        request: &ContainerRecreateRequest,
        status: &ContainerRecreateRequestStatus,
    ) -> Result<(), SyncError> {
        let old = request.status.as_ref();
        let api = self.requests(&key.namespace);
        let Some(written) = write_changed_status(&api, &key.name, old, status).await? else {
            return Ok(());
        };
        self.expect_own_write(key, &written.metadata);
        let was_finished = old.is_some_and(|s| s.phase.is_finished());
        if status.phase.is_finished() && !was_finished {
            let reference = request.object_ref(&());
            let note = status.message.clone();
            if status.phase == Phase::Failed {
                self.events
                    .warning(&reference, "Failed", ACTION, note)
                    .await;
            } else {
                self.events
                    .normal(&reference, "Completed", ACTION, note)
                    .await;
            }
        }
        Ok(())
    }

    /// Deletes the request (only the one with its UID) once its TTL ran out.
    async fn delete(
        &self,
        key: &ObjectKey,
        request: &ContainerRecreateRequest,
    ) -> Result<(), SyncError> {
        let params = delete_params(request.metadata.uid.as_deref().unwrap_or_default());
        match self
            .requests(&key.namespace)
            .delete(&key.name, &params)
            .await
        {
            Ok(_) => Ok(()),
            Err(err) if matches!(status_code(&err), Some(404 | 409)) => Ok(()),
            Err(err) => Err(api_error("deleting the request after its TTL")(err).into()),
        }
    }
}

//! The narrow traits the shared executor acts through: `PodWrites` (every write one sync
//! makes to pods, claims, agents and events, and the one cache read those writes depend
//! on) and `NewPods` (how the workload builds a pod and its claims). The real `PodWrites`
//! is `kube_writes::KubePodWrites`; unit tests use a recording double.

use std::collections::BTreeSet;
use std::future::Future;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use crate::controller::pod_conditions::{ConditionError, ConditionRequest};
use crate::workload::actions::Create;

/// A pod and the claims it mounts, as the workload builds them for one `Create`.
#[derive(Clone, Debug, PartialEq)]
pub struct NewPod {
    pub pod: Pod,
    pub claims: Vec<PersistentVolumeClaim>,
}

/// How a workload builds what the executor creates.
pub trait NewPods: Send + Sync {
    /// The selector the workload claims its pods by: a pod it does not select is never
    /// created (no default, so no kind can leave the check out).
    fn selector(&self) -> &LabelSelector;

    /// An instance id no pod or claim of the workload has, nor any create of this batch
    /// (`taken`).
    fn fresh_instance_id(&self, taken: &BTreeSet<String>) -> String;

    /// The pod (and its claims) of `create`; `None` when its revision is not known.
    fn new_pod(&self, create: &Create) -> Option<NewPod>;
}

/// Why a condition could not be set through the pod's agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConditionWriteError {
    /// The pod's node is not in the cache.
    UnknownNode,
    /// The agent refused or could not be reached.
    Agent(ConditionError),
}

/// A Kubernetes Event about the workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub action: &'static str,
    pub note: String,
    /// The pod the event is about, if it is about one (the event's `related` object). The
    /// event recorder folds events that differ only in their note into one series, so
    /// without it the creates of a sync would show as one event with a count.
    pub pod: Option<String>,
}

impl WorkloadEvent {
    pub fn normal(reason: &'static str, action: &'static str, note: String) -> Self {
        Self {
            warning: false,
            reason,
            action,
            note,
            pod: None,
        }
    }

    pub fn warning(reason: &'static str, action: &'static str, note: String) -> Self {
        Self {
            warning: true,
            reason,
            action,
            note,
            pod: None,
        }
    }

    /// The same event, about the pod `name`.
    pub fn about_pod(self, name: &str) -> Self {
        Self {
            pod: Some(name.to_owned()),
            ..self
        }
    }
}

/// Every write the executor makes for one workload object, in its namespace. Errors are
/// the client's own, so the executor can tell 404 and 409 apart as it does today.
pub trait PodWrites: Send + Sync {
    fn create_pod(&self, pod: &Pod) -> impl Future<Output = Result<(), kube::Error>> + Send;

    fn create_claim(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;

    /// Deletes a pod only if it still has `uid` (a UID precondition).
    fn delete_pod(
        &self,
        name: &str,
        uid: &str,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;

    /// Evicts a pod (the Eviction API, so the apiserver checks the native
    /// PodDisruptionBudgets selecting it) only if it still has `uid`; 429 when a budget
    /// refuses.
    fn evict_pod(
        &self,
        name: &str,
        uid: &str,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;

    /// Deletes a claim only if it still has `uid`.
    fn delete_claim(
        &self,
        name: &str,
        uid: &str,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;

    /// A strategic-merge patch of a pod; the resourceVersion the apiserver answered with.
    fn patch_pod(
        &self,
        name: &str,
        body: Value,
    ) -> impl Future<Output = Result<u64, kube::Error>> + Send;

    /// A strategic-merge patch of a pod's `resize` subresource (container resources); the
    /// resourceVersion the apiserver answered with.
    fn resize_pod(
        &self,
        name: &str,
        body: Value,
    ) -> impl Future<Output = Result<u64, kube::Error>> + Send;

    /// A merge patch of a claim (its storage request); the resourceVersion the apiserver
    /// answered with.
    fn patch_claim(
        &self,
        name: &str,
        body: Value,
    ) -> impl Future<Output = Result<u64, kube::Error>> + Send;

    /// Sets one condition of a pod through the agent of `node`.
    fn set_condition(
        &self,
        node: &str,
        pod: &str,
        uid: &str,
        request: ConditionRequest<'_>,
    ) -> impl Future<Output = Result<(), ConditionWriteError>> + Send;

    /// Restarts `containers` of a pod through the agent of `node`; returns once the agent
    /// accepted.
    fn restart_containers(
        &self,
        node: &str,
        pod: &str,
        uid: &str,
        containers: &[String],
    ) -> impl Future<Output = Result<(), ConditionWriteError>> + Send;

    /// Publishes an Event on the workload (best effort).
    fn publish(&self, event: WorkloadEvent) -> impl Future<Output = ()> + Send;

    /// The UID of the claim named `name` in the cache, if it is there.
    fn cached_claim_uid(&self, name: &str) -> Option<String>;
}

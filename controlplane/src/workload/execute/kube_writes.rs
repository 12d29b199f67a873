//! `PodWrites` over the apiserver, the shared caches and the node agents: the only
//! implementation outside unit tests.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, ObjectReference, PersistentVolumeClaim, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;

use super::writes::{ConditionWriteError, PodWrites, WorkloadEvent};
use crate::controller::events::EventSink;
use crate::controller::expectations::resource_version;
use crate::controller::pod_conditions::{ConditionRequest, PodConditions, PodTarget};
use crate::workload::ownership::delete_params;

/// The writes of one workload object in `namespace`; Events go on `reference`. The
/// shared caches of claims and nodes answer what a write depends on.
pub struct KubePodWrites<'a> {
    pods: Api<Pod>,
    claims: Api<PersistentVolumeClaim>,
    namespace: &'a str,
    cached_claims: &'a Store<PersistentVolumeClaim>,
    nodes: &'a Store<Node>,
    agents: &'a Arc<dyn PodConditions>,
    events: &'a EventSink,
    reference: &'a ObjectReference,
}

/// What `KubePodWrites` writes through and reads from.
pub struct KubeParts<'a> {
    pub client: &'a kube::Client,
    pub claims: &'a Store<PersistentVolumeClaim>,
    pub nodes: &'a Store<Node>,
    pub agents: &'a Arc<dyn PodConditions>,
    pub events: &'a EventSink,
}

impl<'a> KubePodWrites<'a> {
    pub fn new(parts: KubeParts<'a>, namespace: &'a str, reference: &'a ObjectReference) -> Self {
        let KubeParts {
            client,
            claims,
            nodes,
            agents,
            events,
        } = parts;
        Self {
            pods: Api::namespaced(client.clone(), namespace),
            claims: Api::namespaced(client.clone(), namespace),
            namespace,
            cached_claims: claims,
            nodes,
            agents,
            events,
            reference,
        }
    }
}

impl PodWrites for KubePodWrites<'_> {
    async fn create_pod(&self, pod: &Pod) -> Result<(), kube::Error> {
        self.pods
            .create(&PostParams::default(), pod)
            .await
            .map(drop)
    }

    async fn create_claim(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        self.claims
            .create(&PostParams::default(), claim)
            .await
            .map(drop)
    }

    async fn delete_pod(&self, name: &str, uid: &str) -> Result<(), kube::Error> {
        self.pods.delete(name, &delete_params(uid)).await.map(drop)
    }

    async fn delete_claim(&self, name: &str, uid: &str) -> Result<(), kube::Error> {
        self.claims
            .delete(name, &delete_params(uid))
            .await
            .map(drop)
    }

    async fn patch_pod(&self, name: &str, body: Value) -> Result<u64, kube::Error> {
        let pod = self
            .pods
            .patch(name, &PatchParams::default(), &Patch::Strategic(body))
            .await?;
        Ok(resource_version(&pod.metadata))
    }

    async fn set_condition(
        &self,
        node: &str,
        pod: &str,
        uid: &str,
        request: ConditionRequest<'_>,
    ) -> Result<(), ConditionWriteError> {
        let Some(node) = self.nodes.get(&ObjectRef::new(node)) else {
            return Err(ConditionWriteError::UnknownNode);
        };
        let target = PodTarget {
            namespace: self.namespace.to_owned(),
            name: pod.to_owned(),
            uid: uid.to_owned(),
        };
        self.agents
            .set_condition(&node, target, request)
            .await
            .map_err(ConditionWriteError::Agent)
    }

    async fn publish(&self, event: WorkloadEvent) {
        let WorkloadEvent {
            warning,
            reason,
            action,
            note,
        } = event;
        if warning {
            self.events
                .warning(self.reference, reason, action, note)
                .await;
        } else {
            self.events
                .normal(self.reference, reason, action, note)
                .await;
        }
    }

    fn cached_claim_uid(&self, name: &str) -> Option<String> {
        self.cached_claims
            .get(&ObjectRef::new(name).within(self.namespace))
            .map(|claim| claim.metadata.uid.clone().unwrap_or_default())
    }
}

//! `PodWrites` over the apiserver, the shared caches and the node agents: the only
//! implementation outside unit tests.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, ObjectReference, PersistentVolumeClaim, Pod};
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
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

impl KubePodWrites<'_> {
    /// The cached node whose agent acts on the pod `pod` (uid `uid`), and the pod as that
    /// agent is told of it.
    fn agent_target(
        &self,
        node: &str,
        pod: &str,
        uid: &str,
    ) -> Result<(Arc<Node>, PodTarget), ConditionWriteError> {
        let Some(node) = self.nodes.get(&ObjectRef::new(node)) else {
            return Err(ConditionWriteError::UnknownNode);
        };
        let target = PodTarget {
            namespace: self.namespace.to_owned(),
            name: pod.to_owned(),
            uid: uid.to_owned(),
        };
        Ok((node, target))
    }
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

    async fn evict_pod(&self, name: &str, uid: &str) -> Result<(), kube::Error> {
        let params = EvictParams {
            delete_options: Some(delete_params(uid)),
            post_options: PostParams::default(),
        };
        self.pods.evict(name, &params).await.map(drop)
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

    async fn resize_pod(&self, name: &str, body: Value) -> Result<u64, kube::Error> {
        let pod = self
            .pods
            .patch_subresource(
                "resize",
                name,
                &PatchParams::default(),
                &Patch::Strategic(body),
            )
            .await?;
        Ok(resource_version(&pod.metadata))
    }

    async fn patch_claim(&self, name: &str, body: Value) -> Result<u64, kube::Error> {
        let claim = self
            .claims
            .patch(name, &PatchParams::default(), &Patch::Merge(body))
            .await?;
        Ok(resource_version(&claim.metadata))
    }

    async fn set_condition(
        &self,
        node: &str,
        pod: &str,
        uid: &str,
        request: ConditionRequest<'_>,
    ) -> Result<(), ConditionWriteError> {
        let (node, target) = self.agent_target(node, pod, uid)?;
        self.agents
            .set_condition(&node, target, request)
            .await
            .map_err(ConditionWriteError::Agent)
    }

    async fn restart_containers(
        &self,
        node: &str,
        pod: &str,
        uid: &str,
        containers: &[String],
    ) -> Result<(), ConditionWriteError> {
        let (node, target) = self.agent_target(node, pod, uid)?;
        self.agents
            .restart_containers(&node, target, containers)
            .await
            .map_err(ConditionWriteError::Agent)
    }

    async fn publish(&self, event: WorkloadEvent) {
        let WorkloadEvent {
            warning,
            reason,
            action,
            note,
            pod,
        } = event;
        let related = pod.map(|name| ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            namespace: self.reference.namespace.clone(),
            name: Some(name),
            ..ObjectReference::default()
        });
        self.events
            .publish_about(self.reference, related, warning, reason, action, note)
            .await;
    }

    fn cached_claim_uid(&self, name: &str) -> Option<String> {
        self.cached_claims
            .get(&ObjectRef::new(name).within(self.namespace))
            .map(|claim| claim.metadata.uid.clone().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::runtime::reflector::store::Writer;
    use serde_json::json;

    use super::*;
    use crate::controller::pod_conditions::{ConditionFuture, PodTarget};
    use crate::workload::scripted_api::{ScriptedApi, failure};

    struct NoAgents;

    impl PodConditions for NoAgents {
        fn set_condition<'a>(
            &'a self,
            _node: &'a Node,
            _pod: PodTarget,
            _request: ConditionRequest<'a>,
        ) -> ConditionFuture<'a> {
            Box::pin(async { unreachable!("no condition in these tests") })
        }
    }

    fn pod_json(name: &str, resource_version: &str) -> serde_json::Value {
        json!(Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ns".to_owned()),
                resource_version: Some(resource_version.to_owned()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        })
    }

    #[tokio::test]
    async fn deletes_carry_the_uid_precondition_and_patches_are_strategic() {
        let api = ScriptedApi::new(vec![
            (200, pod_json("web-a", "9")),
            (200, pod_json("web-a", "12")),
            (409, failure(409, "the UID precondition failed")),
        ]);
        let client = api.client();
        let claims = Writer::<PersistentVolumeClaim>::default().as_reader();
        let nodes = Writer::<Node>::default().as_reader();
        let agents: Arc<dyn PodConditions> = Arc::new(NoAgents);
        let events = EventSink::new(client.clone(), "test");
        let reference = ObjectReference::default();
        let parts = KubeParts {
            client: &client,
            claims: &claims,
            nodes: &nodes,
            agents: &agents,
            events: &events,
        };
        let writes = KubePodWrites::new(parts, "ns", &reference);

        writes.delete_pod("web-a", "uid-a").await.expect("deleted");
        let patch = json!({ "metadata": { "labels": { "a": "1" } } });
        let version = writes.patch_pod("web-a", patch.clone()).await;
        assert_eq!(version.expect("patched"), 12);
        let refused = writes.delete_claim("data-web-a", "uid-c").await;
        assert!(matches!(refused, Err(kube::Error::Api(s)) if s.code == 409));

        let sent = api.sent();
        assert_eq!(sent[0].method, "DELETE");
        assert_eq!(sent[0].uri, "/api/v1/namespaces/ns/pods/web-a?");
        assert_eq!(sent[0].body["preconditions"], json!({ "uid": "uid-a" }));
        assert_eq!(sent[1].method, "PATCH");
        assert_eq!(sent[1].body, patch);
        assert_eq!(
            sent[1].content_type,
            "application/strategic-merge-patch+json"
        );
        assert_eq!(
            sent[2].uri,
            "/api/v1/namespaces/ns/persistentvolumeclaims/data-web-a?"
        );
        assert_eq!(sent[2].body["preconditions"], json!({ "uid": "uid-c" }));
        assert_eq!(writes.cached_claim_uid("data-web-a"), None);
    }
}

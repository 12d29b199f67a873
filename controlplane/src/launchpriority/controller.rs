//! The launch-priority controller: for each pod with containers waiting on a barrier (from
//! the pods cache), reads its `<pod>-barrier` ConfigMap and carries out the step
//! `barrier::barrier_step` decides: create it owned by the pod (so it goes with the pod),
//! add the keys that fell due, or replace a former pod's. ConfigMaps are read one at a
//! time from the apiserver, only for pods still starting their containers; no ConfigMap
//! cache (the cluster's ConfigMaps are many and large, the barriers few and small).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource as _, ResourceExt as _};
use serde_json::json;

use super::barrier::{BarrierStep, barrier_step};
use super::plan::{KEY_VALUE, barrier_name, is_waiting};
use crate::caches::{Changes, Stores};
use crate::controller::ObjectKey;
use crate::controller::api_error::{ApiError, api_error, status_code};
use crate::controller::events::EventSink;
use crate::controller::queue::WorkQueue;
use crate::controller::runner::{Outcome, Reconciler};
use crate::controller::triggers::Triggers;

/// How soon to look again after a create raced another or a stale ConfigMap was deleted.
const RETRY_SOON: Duration = Duration::from_secs(1);

/// The controller's state, shared by its workers.
pub struct LaunchPriorityController {
    pub client: kube::Client,
    pub stores: Stores,
    pub events: EventSink,
}

impl Reconciler for LaunchPriorityController {
    type Key = ObjectKey;
    type Error = ApiError;
    const KIND: &'static str = "ContainerLaunchPriority";
    const READS: &'static [&'static str] = &["Pod"];

    async fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, ApiError> {
        let found = ObjectRef::new(&key.name).within(&key.namespace);
        let Some(pod) = self.stores.pods.get(&found) else {
            return Ok(Outcome::Done);
        };
        if !is_waiting(&pod) {
            return Ok(Outcome::Done);
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.namespace);
        let name = barrier_name(&key.name);
        let barrier = (api.get_opt(&name).await).map_err(api_error(format!(
            "reading ConfigMap {}/{name}",
            key.namespace
        )))?;
        let step = barrier_step(&pod, barrier.as_ref());
        tracing::debug!(?step, "barrier step");
        match step {
            BarrierStep::Create(keys) => create(&api, &pod, &name, &keys).await,
            BarrierStep::Add(keys) => add_keys(&api, &name, &keys).await,
            BarrierStep::ReplaceStale { former_pod } => {
                let uid = barrier.and_then(|b| b.metadata.uid);
                delete_stale(&api, &name, uid, &former_pod).await
            }
            BarrierStep::Foreign => {
                let note = format!(
                    "ConfigMap {name} belongs to no pod, so its launch-priority keys are not written; the containers waiting on it stay waiting until it is deleted."
                );
                let object = pod.object_ref(&());
                (self.events)
                    .warning(&object, "BarrierNotOwned", "LaunchPriority", note)
                    .await;
                Ok(Outcome::Done)
            }
            BarrierStep::Nothing => Ok(Outcome::Done),
        }
    }

    fn all_keys(&self) -> Vec<ObjectKey> {
        waiting_pods(&self.stores.pods)
    }

    fn caches_synced(&self) -> bool {
        self.stores.sync.synced(Self::READS)
    }
}

/// Creates the pod's barrier ConfigMap holding `keys`, owned by the pod; one a racing
/// write made first is looked at again.
async fn create(
    api: &Api<ConfigMap>,
    pod: &Pod,
    name: &str,
    keys: &[String],
) -> Result<Outcome, ApiError> {
    let Some(uid) = pod.metadata.uid.clone() else {
        return Ok(Outcome::Done);
    };
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.name_any(),
        uid,
        ..OwnerReference::default()
    };
    let data: BTreeMap<String, String> = (keys.iter())
        .map(|k| (k.clone(), KEY_VALUE.to_owned()))
        .collect();
    let barrier = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    };
    match api.create(&PostParams::default(), &barrier).await {
        Ok(_) => {
            tracing::info!(configmap = name, ?keys, "created the pod's launch barrier");
            Ok(Outcome::Done)
        }
        Err(err) if status_code(&err) == Some(409) => Ok(Outcome::RequeueAfter(RETRY_SOON)),
        Err(err) => Err(api_error(format!("creating ConfigMap {name}"))(err)),
    }
}

/// Adds `keys` to the barrier (a merge patch: keys only added, never removed).
async fn add_keys(api: &Api<ConfigMap>, name: &str, keys: &[String]) -> Result<Outcome, ApiError> {
    let data: serde_json::Map<String, serde_json::Value> = (keys.iter())
        .map(|k| (k.clone(), json!(KEY_VALUE)))
        .collect();
    let patch = json!({ "data": data });
    (api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await)
        .map_err(api_error(format!("adding {keys:?} to ConfigMap {name}")))?;
    tracing::info!(configmap = name, ?keys, "let the next containers start");
    Ok(Outcome::Done)
}

/// Deletes a former pod's barrier (only that object: UID precondition), so the next look
/// creates the pod's own.
async fn delete_stale(
    api: &Api<ConfigMap>,
    name: &str,
    uid: Option<String>,
    former_pod: &str,
) -> Result<Outcome, ApiError> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => {
            tracing::info!(
                configmap = name,
                former_pod,
                "deleted a former pod's launch barrier"
            );
            Ok(Outcome::RequeueAfter(RETRY_SOON))
        }
        Err(err) if matches!(status_code(&err), Some(404 | 409)) => {
            Ok(Outcome::RequeueAfter(RETRY_SOON))
        }
        Err(err) => Err(api_error(format!(
            "deleting the former pod's ConfigMap {name}"
        ))(err)),
    }
}

/// The pods the controller has work for.
fn waiting_pods(pods: &Store<Pod>) -> Vec<ObjectKey> {
    (pods.state().iter())
        .filter(|pod| is_waiting(pod))
        .map(|pod| ObjectKey::of(pod.as_ref()))
        .collect()
}

/// What wakes the controller: a change of a pod waiting on a barrier (a container becoming
/// ready lets the next start).
pub fn watches(
    changes: &Changes,
    pods: &Store<Pod>,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    let all = pods.clone();
    Triggers::new("ContainerLaunchPriority", queue, move || waiting_pods(&all)).watch(
        &changes.pods,
        |pod| {
            if is_waiting(pod) {
                vec![ObjectKey::of(pod.as_ref())]
            } else {
                Vec::new()
            }
        },
    )
}

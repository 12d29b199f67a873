//! The PodProbeMarkers' status, keyed by marker: `observedGeneration` and `matchedPods`
//! (`plan::marker_status`), written whenever they change. Apart from the node-keyed
//! controller, which never looks at one marker alone: a pod's change queues the markers
//! of its namespace, a marker's change queues itself.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;

use super::plan::marker_status;
use crate::api::podprobemarker::PodProbeMarker;
use crate::caches::{Changes, Stores};
use crate::controller::ObjectKey;
use crate::controller::api_error::ApiError;
use crate::controller::queue::WorkQueue;
use crate::controller::runner::{Outcome, Reconciler};
use crate::controller::status_patch::write_changed_status;
use crate::controller::triggers::Triggers;

/// Writes each PodProbeMarker's status.
pub struct PodProbeMarkerStatusController {
    pub client: kube::Client,
    pub stores: Stores,
}

impl Reconciler for PodProbeMarkerStatusController {
    type Key = ObjectKey;
    type Error = ApiError;
    const KIND: &'static str = "PodProbeMarkerStatus";
    const READS: &'static [&'static str] = &["Pod", "PodProbeMarker"];

    async fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, ApiError> {
        let reference = ObjectRef::new(&key.name).within(&key.namespace);
        let Some(marker) = self.stores.podprobemarkers.get(&reference) else {
            return Ok(Outcome::Done);
        };
        if marker.metadata.deletion_timestamp.is_some() {
            return Ok(Outcome::Done);
        }
        let pods: Vec<Arc<Pod>> = (self.stores.pods.state().into_iter())
            .filter(|pod| pod.metadata.namespace.as_deref() == Some(key.namespace.as_str()))
            .collect();
        let pods: Vec<&Pod> = pods.iter().map(AsRef::as_ref).collect();
        let status = marker_status(&marker, &pods);
        let api: Api<PodProbeMarker> = Api::namespaced(self.client.clone(), &key.namespace);
        write_changed_status(&api, &key.name, marker.status.as_ref(), &status).await?;
        Ok(Outcome::Done)
    }

    fn all_keys(&self) -> Vec<ObjectKey> {
        marker_keys(&self.stores, None)
    }

    fn caches_synced(&self) -> bool {
        self.stores.sync.synced(Self::READS)
    }
}

/// The keys of the PodProbeMarkers, of `namespace` only when given.
fn marker_keys(stores: &Stores, namespace: Option<&str>) -> Vec<ObjectKey> {
    (stores.podprobemarkers.state().iter())
        .filter(|marker| namespace.is_none() || marker.metadata.namespace.as_deref() == namespace)
        .map(|marker| marker_key(marker))
        .collect()
}

fn marker_key(marker: &PodProbeMarker) -> ObjectKey {
    ObjectKey::new(
        marker.metadata.namespace.clone().unwrap_or_default(),
        marker.metadata.name.clone().unwrap_or_default(),
    )
}

/// A pod's change queues the markers of its namespace (it may have joined or left any
/// of their selections); a marker's change queues itself.
pub fn watches(
    changes: &Changes,
    stores: &Stores,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    let by_namespace = stores.clone();
    let on_lag = stores.clone();
    Triggers::new("PodProbeMarkerStatus", queue, move || {
        marker_keys(&on_lag, None)
    })
    .watch(&changes.pods, move |pod| {
        marker_keys(&by_namespace, pod.metadata.namespace.as_deref())
    })
    .watch(&changes.podprobemarkers, |marker| vec![marker_key(marker)])
}

//! Which CloneSets a change concerns: the set itself, the controller of a pod, claim or
//! revision, and, for an orphan pod, every set in its namespace whose selector matches it
//! (it may be adopted).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::Store;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;

use crate::api::CloneSet;
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::workload::ownership::controller_of;
use crate::workload::selector::selector_matches;

/// The CloneSet keys an object's change concerns.
pub fn keys_for(
    meta: &ObjectMeta,
    clonesets: &[Arc<CloneSet>],
    orphan_lookup: bool,
) -> Vec<ObjectKey> {
    let namespace = meta.namespace.clone().unwrap_or_default();
    if let Some(owner) = controller_of(meta) {
        if owner.kind == "CloneSet" && owner.api_version.starts_with("apps.kruise.io/") {
            return vec![ObjectKey::new(namespace, owner.name.clone())];
        }
        return Vec::new();
    }
    if !orphan_lookup {
        return Vec::new();
    }
    let empty = Default::default();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    clonesets
        .iter()
        .filter(|cs| cs.metadata.namespace.as_deref() == Some(&namespace))
        .filter(|cs| selector_matches(&cs.spec.selector, labels) == Some(true))
        .map(|cs| ObjectKey::of(cs.as_ref()))
        .collect()
}

/// Feeds `queue` from the shared watches until `shutdown`.
pub async fn run(
    changes: Changes,
    clonesets: Store<CloneSet>,
    queue: WorkQueue<ObjectKey>,
    shutdown: CancellationToken,
) {
    let mut sets = changes.clonesets.subscribe();
    let mut pods = changes.pods.subscribe();
    let mut pvcs = changes.pvcs.subscribe();
    let mut revisions = changes.revisions.subscribe();
    let resync_all = |queue: &WorkQueue<ObjectKey>| {
        for cs in clonesets.state() {
            queue.add(ObjectKey::of(cs.as_ref()));
        }
    };
    loop {
        let keys = tokio::select! {
            () = shutdown.cancelled() => return,
            r = sets.recv() => mapped(r, |cs| vec![ObjectKey::of(cs.as_ref())]),
            r = pods.recv() => mapped(r, |p| keys_for(&p.metadata, &clonesets.state(), true)),
            r = pvcs.recv() => mapped(r, |p| keys_for(&p.metadata, &[], false)),
            r = revisions.recv() => mapped(r, |r| keys_for(&r.metadata, &[], false)),
        };
        match keys {
            Mapped::Keys(keys) => keys.into_iter().for_each(|k| queue.add(k)),
            Mapped::Lagged => {
                tracing::warn!("fell behind the watch events; queueing every CloneSet");
                resync_all(&queue);
            }
            Mapped::Closed => return,
        }
    }
}

enum Mapped {
    Keys(Vec<ObjectKey>),
    Lagged,
    Closed,
}

fn mapped<T>(
    received: Result<Arc<T>, RecvError>,
    map: impl FnOnce(&Arc<T>) -> Vec<ObjectKey>,
) -> Mapped {
    match received {
        Ok(object) => Mapped::Keys(map(&object)),
        Err(broadcast::error::RecvError::Lagged(_)) => Mapped::Lagged,
        Err(broadcast::error::RecvError::Closed) => Mapped::Closed,
    }
}

//! Which CloneSets a change concerns: the set itself, the controller of a pod, claim or
//! revision, and, for an orphan pod, every set in its namespace whose selector matches it
//! (it may be adopted).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::Store;
use tokio_util::sync::CancellationToken;

use crate::api::CloneSet;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::received;
use crate::runtime::stores::Changes;
use crate::workload::triggers::owner_keys;

/// The CloneSet keys an object's change concerns.
pub fn keys_for(
    meta: &ObjectMeta,
    clonesets: &[Arc<CloneSet>],
    orphan_lookup: bool,
) -> Vec<ObjectKey> {
    owner_keys(meta, clonesets, |cs| &cs.spec.selector, orphan_lookup)
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
    let all = || {
        (clonesets.state().iter())
            .map(|cs| ObjectKey::of(cs.as_ref()))
            .collect()
    };
    loop {
        let keys = tokio::select! {
            () = shutdown.cancelled() => return,
            r = sets.recv() => received(r, |cs| vec![ObjectKey::of(cs.as_ref())]),
            r = pods.recv() => received(r, |p| keys_for(&p.metadata, &clonesets.state(), true)),
            r = pvcs.recv() => received(r, |p| keys_for(&p.metadata, &[], false)),
            r = revisions.recv() => received(r, |r| keys_for(&r.metadata, &[], false)),
        };
        if !keys.queue(&queue, "CloneSet", all) {
            return;
        }
    }
}

//! Which CloneSets a change concerns: the set itself, the controller of a pod, claim or
//! revision, and, for an orphan pod, every set in its namespace whose selector matches it
//! (it may be adopted).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::Store;

use crate::api::CloneSet;
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::Triggers;
use crate::workload::triggers::owner_keys;

/// The CloneSet keys an object's change concerns.
pub fn keys_for(
    meta: &ObjectMeta,
    clonesets: &[Arc<CloneSet>],
    orphan_lookup: bool,
) -> Vec<ObjectKey> {
    owner_keys(meta, clonesets, |cs| &cs.spec.selector, orphan_lookup)
}

/// What the CloneSet controller listens to: its sets, their pods (an orphan may be
/// adopted), claims and revisions.
pub fn watches(
    changes: &Changes,
    clonesets: &Store<CloneSet>,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    let owners = clonesets.clone();
    Triggers::of(clonesets, queue)
        .watch_own(&changes.clonesets)
        .watch(&changes.pods, move |p| {
            keys_for(&p.metadata, &owners.state(), true)
        })
        .watch(&changes.pvcs, |p| keys_for(&p.metadata, &[], false))
        .watch(&changes.revisions, |r| keys_for(&r.metadata, &[], false))
}

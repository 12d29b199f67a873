//! Which StatefulSets a change concerns: the set itself, the controller of a pod or
//! revision, and, for an orphan pod, every set in its namespace whose selector matches it
//! (it may be adopted). A claim carries no controller reference but the selector's labels
//! (`adapter::new_claims`): its change concerns the sets that select it, so a deleted
//! claim of a Pending pod is made again at once (`missing_claims`).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::Store;

use crate::api::StatefulSet;
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::Triggers;
use crate::workload::triggers::owner_keys;

/// The StatefulSet keys an object's change concerns.
pub fn keys_for(
    meta: &ObjectMeta,
    sets: &[Arc<StatefulSet>],
    orphan_lookup: bool,
) -> Vec<ObjectKey> {
    owner_keys(meta, sets, |s| &s.spec.selector, orphan_lookup)
}

/// What the StatefulSet controller listens to: its sets, their pods (an orphan may be
/// adopted), revisions, and claims (found by the selector's labels they carry).
pub fn watches(
    changes: &Changes,
    sets: &Store<StatefulSet>,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    let (pod_owners, claim_owners) = (sets.clone(), sets.clone());
    Triggers::of(sets, queue)
        .watch_own(&changes.statefulsets)
        .watch(&changes.pods, move |p| {
            keys_for(&p.metadata, &pod_owners.state(), true)
        })
        .watch(&changes.revisions, |r| keys_for(&r.metadata, &[], false))
        .watch(&changes.pvcs, move |c| {
            keys_for(&c.metadata, &claim_owners.state(), true)
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};

    use super::*;
    use crate::api::StatefulSetSpec;
    use crate::workload::adapter::PodSetWorkload as _;

    fn web() -> Arc<StatefulSet> {
        let mut set = StatefulSet::new(
            "web",
            StatefulSetSpec {
                selector: LabelSelector {
                    match_labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
                    ..LabelSelector::default()
                },
                ..StatefulSetSpec::default()
            },
        );
        set.metadata.namespace = Some("default".to_owned());
        set.metadata.uid = Some("web-uid".to_owned());
        Arc::new(set)
    }

    fn pod(labels: &[(&str, &str)], owner: Option<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            name: Some("web-0".to_owned()),
            namespace: Some("default".to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn an_owned_or_adoptable_pod_wakes_its_set() {
        let set = web();
        let sets = [set.clone()];
        let key = ObjectKey::of(set.as_ref());
        let owned = pod(&[], Some(set.owner_reference()));
        assert_eq!(keys_for(&owned, &sets, true), std::slice::from_ref(&key));
        let orphan = pod(&[("app", "web")], None);
        assert_eq!(keys_for(&orphan, &sets, true), [key]);
        let stranger = pod(&[("app", "db")], None);
        assert!(keys_for(&stranger, &sets, true).is_empty());
    }

    #[test]
    fn a_claim_wakes_the_set_whose_selector_labels_it_carries() {
        let set = web();
        let sets = [set.clone()];
        // A claim as `new_claims` labels it, owned by the set only as a non-controller
        // (whenDeleted: Delete).
        let mut owner = set.owner_reference();
        owner.controller = None;
        let claim = pod(&[("app", "web")], Some(owner));
        assert_eq!(keys_for(&claim, &sets, true), [ObjectKey::of(set.as_ref())]);
        let stranger = pod(&[("app", "db")], None);
        assert!(keys_for(&stranger, &sets, true).is_empty());
    }
}

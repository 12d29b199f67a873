//! What the status of each undecodable object should say, waiting for the leader to write
//! it: the stores put a change here for every object of a kind whose status has
//! `conditions` that stops or starts decoding again (see [`super::decode`]), and the
//! wiring's writer (`controller::undecodable_condition`) takes them while it leads.
//!
//! It holds the latest change per object, not a queue of them: what matters is where an
//! object ends up, and the outbox stays as small as the number of undecodable objects
//! however often they change or however long this replica waits without leading. A
//! replica that does not lead keeps collecting, so when it takes the Lease it writes what
//! its own caches saw, with no relist or report needed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use kube::api::ApiResource;
use tokio::sync::Notify;

use super::decode::Undecodable;

/// The condition one object should carry.
#[derive(Clone, Debug)]
pub struct ConditionChange {
    /// The object's kind, as the store reads it.
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub name: String,
    /// The object's uid when the change was seen: one created again under the same name
    /// is another object, and gets nothing written from this change.
    pub uid: Option<String>,
    /// `Some`: the object does not decode, for the reason given; `None`: it decodes again.
    pub undecodable: Option<Undecodable>,
}

impl ConditionChange {
    fn key(&self) -> Key {
        (
            self.resource.group.clone(),
            self.resource.kind.clone(),
            self.namespace.clone(),
            self.name.clone(),
        )
    }
}

/// group, kind, namespace, name.
type Key = (String, String, Option<String>, String);

/// The latest [`ConditionChange`] per object. Cloning is cheap; every clone is the same
/// outbox.
#[derive(Clone, Default)]
pub struct ConditionOutbox {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    pending: Mutex<HashMap<Key, ConditionChange>>,
    /// Holds one permit when something was put since the last wait.
    put: Notify,
}

impl ConditionOutbox {
    /// Records `change`, replacing any change of the same object not taken yet.
    pub fn put(&self, change: ConditionChange) {
        self.pending().insert(change.key(), change);
        self.inner.put.notify_one();
    }

    /// Puts back a change that could not be written, unless a newer one came meanwhile.
    pub fn put_back(&self, change: ConditionChange) {
        self.pending().entry(change.key()).or_insert(change);
        self.inner.put.notify_one();
    }

    /// Every change waiting, leaving none.
    pub fn take_all(&self) -> Vec<ConditionChange> {
        self.pending().drain().map(|(_, change)| change).collect()
    }

    /// How many objects have a change waiting.
    pub fn len(&self) -> usize {
        self.pending().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns once something was put since the last call returned (at once if it was).
    pub async fn wait_put(&self) {
        self.inner.put.notified().await;
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<Key, ConditionChange>> {
        // Nothing panics while holding the lock; a poisoned map is still consistent.
        self.inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;

    use super::*;

    fn change(name: &str, field: Option<&str>) -> ConditionChange {
        ConditionChange {
            resource: ApiResource {
                group: "apps.kruise.io".to_owned(),
                version: "v1alpha1".to_owned(),
                api_version: "apps.kruise.io/v1alpha1".to_owned(),
                kind: "CloneSet".to_owned(),
                plural: "clonesets".to_owned(),
            },
            namespace: Some("default".to_owned()),
            name: name.to_owned(),
            uid: None,
            undecodable: field.map(|field| Undecodable {
                object: ObjectReference::default(),
                field: field.to_owned(),
                error: "invalid".to_owned(),
                last_good_kept: false,
            }),
        }
    }

    fn taken(outbox: &ConditionOutbox) -> Vec<(String, Option<String>)> {
        let mut taken: Vec<_> = outbox
            .take_all()
            .into_iter()
            .map(|c| (c.name, c.undecodable.map(|u| u.field)))
            .collect();
        taken.sort();
        taken
    }

    #[test]
    fn the_latest_change_of_each_object_wins_and_a_put_back_never_overwrites_a_newer_one() {
        let outbox = ConditionOutbox::default();
        outbox.put(change("a", Some("spec.replicas")));
        outbox.put(change("a", None));
        outbox.put(change("b", Some("spec.replicas")));
        assert_eq!(outbox.len(), 2);
        assert_eq!(
            taken(&outbox),
            [
                ("a".to_owned(), None),
                ("b".to_owned(), Some("spec.replicas".to_owned()))
            ]
        );
        assert!(outbox.is_empty());

        // A write of `a` failed while a newer change of it came: the newer one stays.
        outbox.put(change("a", None));
        outbox.put_back(change("a", Some("spec.replicas")));
        outbox.put_back(change("c", Some("spec.parallelism")));
        assert_eq!(
            taken(&outbox),
            [
                ("a".to_owned(), None),
                ("c".to_owned(), Some("spec.parallelism".to_owned()))
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_put_before_the_wait_is_not_missed() {
        let outbox = ConditionOutbox::default();
        outbox.put(change("a", None));
        tokio::time::timeout(std::time::Duration::from_secs(1), outbox.wait_put())
            .await
            .expect("the put wakes a wait that starts after it");
    }
}

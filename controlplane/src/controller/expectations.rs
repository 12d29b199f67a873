//! Expectations (Kubernetes' `ControllerExpectations`, OpenKruise's scale and update
//! expectations): what a reconcile wrote and the shared cache has not shown yet.
//!
//! The caches lag behind the apiserver. A reconcile that runs before its own creates show
//! up would create the same pods again; one that runs before its own patch shows up would
//! plan from the old pod. So every write is recorded here, and a workload is only planned
//! again once the cache has caught up with all of them — or after a timeout, so that a
//! write that silently never lands (the object was removed by someone else) cannot wedge
//! the workload forever.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::time::Instant;

/// How long to wait for the cache before planning anyway (Kubernetes uses 5 minutes).
pub const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(300);

/// One write the cache must show.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expectation {
    /// An object of `kind` named `name` was created.
    Create { kind: &'static str, name: String },
    /// The object with this name and UID was deleted (gone, replaced by another UID, or
    /// terminating in the cache).
    Delete {
        kind: &'static str,
        name: String,
        uid: String,
    },
    /// The object was written and the apiserver answered with this resourceVersion.
    Update {
        kind: &'static str,
        name: String,
        resource_version: u64,
    },
}

/// What the cache says about one object, as far as expectations need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub uid: String,
    pub resource_version: u64,
    pub terminating: bool,
}

/// An object's resourceVersion as a number (0 when absent or not numeric). Kubernetes
/// calls it opaque, but every apiserver backed by etcd hands out increasing integers, and
/// comparing them is how OpenKruise's update expectations work too.
pub fn resource_version(meta: &ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

impl Seen {
    /// What the cache shows of an object with `meta`.
    pub fn of(meta: &ObjectMeta) -> Self {
        Self {
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: resource_version(meta),
            terminating: meta.deletion_timestamp.is_some(),
        }
    }
}

impl Expectation {
    /// Whether the cache shows this write. `lookup(kind, name)` finds the object by name.
    pub fn observed(&self, lookup: &dyn Fn(&str, &str) -> Option<Seen>) -> bool {
        match self {
            Self::Create { kind, name } => lookup(kind, name).is_some(),
            Self::Delete { kind, name, uid } => {
                lookup(kind, name).is_none_or(|seen| seen.terminating || &seen.uid != uid)
            }
            Self::Update {
                kind,
                name,
                resource_version,
            } => lookup(kind, name).is_none_or(|seen| seen.resource_version >= *resource_version),
        }
    }
}

struct Pending {
    writes: Vec<Expectation>,
    since: Instant,
}

/// Expectations of every object of one workload kind, keyed by the workload's key.
pub struct Expectations<K> {
    inner: Arc<Mutex<HashMap<K, Pending>>>,
    timeout: Duration,
}

impl<K> Clone for Expectations<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            timeout: self.timeout,
        }
    }
}

impl<K: Clone + Eq + Hash> Expectations<K> {
    pub fn new(timeout: Duration) -> Self {
        Self {
            inner: Arc::new(Mutex::new(HashMap::new())),
            timeout,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, Pending>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a write made for `key`.
    pub fn expect(&self, key: &K, write: Expectation) {
        let mut map = self.lock();
        let pending = map.entry(key.clone()).or_insert_with(|| Pending {
            writes: Vec::new(),
            since: Instant::now(),
        });
        pending.since = Instant::now();
        pending.writes.push(write);
    }

    /// Drops the writes the cache now shows; `Ok(())` when none is left (or they timed
    /// out), else the first write still missing, for the log.
    pub fn satisfied(
        &self,
        key: &K,
        lookup: &dyn Fn(&str, &str) -> Option<Seen>,
    ) -> Result<(), Expectation> {
        let mut map = self.lock();
        let Some(pending) = map.get_mut(key) else {
            return Ok(());
        };
        pending.writes.retain(|write| !write.observed(lookup));
        if pending.writes.is_empty() || pending.since.elapsed() >= self.timeout {
            map.remove(key);
            return Ok(());
        }
        Err(pending.writes[0].clone())
    }

    /// The writes of `key` the cache has not been checked against yet, oldest first.
    pub fn pending(&self, key: &K) -> Vec<Expectation> {
        self.lock()
            .get(key)
            .map(|pending| pending.writes.clone())
            .unwrap_or_default()
    }

    /// Forgets everything about `key` (the workload is gone).
    pub fn forget(&self, key: &K) {
        self.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(objects: &[(&str, &str, u64, bool)]) -> impl Fn(&str, &str) -> Option<Seen> {
        let objects: Vec<(String, String, u64, bool)> = objects
            .iter()
            .map(|(name, uid, rv, term)| ((*name).to_owned(), (*uid).to_owned(), *rv, *term))
            .collect();
        move |_kind: &str, id: &str| {
            objects
                .iter()
                .find(|(name, _, _, _)| name == id)
                .map(|(_, uid, rv, term)| Seen {
                    uid: uid.clone(),
                    resource_version: *rv,
                    terminating: *term,
                })
        }
    }

    #[test]
    fn each_kind_of_write_is_observed_when_the_cache_shows_it() {
        let create = Expectation::Create {
            kind: "Pod",
            name: "web-a".into(),
        };
        let delete = Expectation::Delete {
            kind: "Pod",
            name: "web-a".into(),
            uid: "u1".into(),
        };
        let update = Expectation::Update {
            kind: "Pod",
            name: "web-a".into(),
            resource_version: 10,
        };
        type Objects<'a> = &'a [(&'a str, &'a str, u64, bool)];
        let table: [(&Expectation, Objects<'_>, bool); 9] = [
            (&create, &[], false),
            (&create, &[("web-a", "u1", 1, false)], true),
            (&delete, &[("web-a", "u1", 1, false)], false),
            (&delete, &[("web-a", "u1", 1, true)], true),
            (&delete, &[], true),
            (&delete, &[("web-a", "u2", 1, false)], true),
            (&update, &[("web-a", "u1", 9, false)], false),
            (&update, &[("web-a", "u1", 10, false)], true),
            (&update, &[], true),
        ];
        for (write, objects, want) in table {
            assert_eq!(
                write.observed(&cache(objects)),
                want,
                "{write:?} {objects:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn unsatisfied_until_the_cache_catches_up_or_the_timeout() {
        let e = Expectations::new(Duration::from_secs(60));
        e.expect(
            &"ns/web",
            Expectation::Create {
                kind: "Pod",
                name: "web-a".into(),
            },
        );
        assert!(e.satisfied(&"ns/web", &cache(&[])).is_err());
        assert!(
            e.satisfied(&"ns/other", &cache(&[])).is_ok(),
            "other keys unaffected"
        );
        assert!(
            e.satisfied(&"ns/web", &cache(&[("web-a", "u", 1, false)]))
                .is_ok()
        );
        e.expect(
            &"ns/web",
            Expectation::Create {
                kind: "Pod",
                name: "web-b".into(),
            },
        );
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(
            e.satisfied(&"ns/web", &cache(&[])).is_ok(),
            "timed out writes stop blocking"
        );
    }
}

//! The preamble every reconciler of a namespaced kind shares, done once here: look the
//! object up in the shared cache, forget what was kept about it once it is gone, and wait
//! out the writes of earlier syncs the cache has not shown yet (expectations). A kind
//! implements `ObjectReconciler` and gets `runner::Reconciler` with it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

use super::ObjectKey;
use super::expectations::{Expectation, Expectations, Seen, resource_version};
use super::runner::{Outcome, Reconciler};
use crate::runtime::stores::SyncState;

/// One namespaced kind's sync, given the object from the cache.
pub trait ObjectReconciler: Send + Sync + 'static {
    type Object: Resource<DynamicType = ()> + Clone + Send + Sync + 'static;
    type Error: std::error::Error + Send + Sync + 'static;

    /// The kind, for metrics, spans and logs.
    const KIND: &'static str;

    /// The kinds of the shared caches the sync reads (see `Reconciler::READS`).
    const READS: &'static [&'static str];

    /// How soon to look again while the cache has not shown this kind's last writes.
    const EXPECTATIONS_RECHECK: Duration;

    /// The shared store of the kind.
    fn objects(&self) -> &Store<Self::Object>;

    /// The writes of earlier syncs, per object.
    fn expectations(&self) -> &Expectations<ObjectKey>;

    /// The shared caches: whether they have listed, and what they hold of each kind.
    fn caches(&self) -> &SyncState;

    /// What the cache shows of an object of `kind` a sync wrote (for expectations): looked
    /// up in the store of `kind` if the sync reads it (`READS`), so no kind matches kind
    /// names to stores by hand.
    fn seen(&self, namespace: &str, kind: &str, name: &str) -> Option<Seen> {
        if !Self::READS.contains(&kind) {
            return None;
        }
        let object = self.caches().find(kind, namespace, name)?;
        Some(Seen::of(object.metadata()))
    }

    /// Whether the stores the sync reads (`READS`) have listed (see
    /// `Reconciler::caches_synced`).
    fn caches_synced(&self) -> bool {
        self.caches().synced(Self::READS)
    }

    /// Records that a sync wrote the object of `key` itself and the apiserver answered with
    /// `written`: the next sync waits until the cache shows that write.
    fn expect_own_write(&self, key: &ObjectKey, written: &ObjectMeta) {
        self.expectations().expect(
            key,
            Expectation::Update {
                kind: Self::KIND,
                name: key.name.clone(),
                resource_version: resource_version(written),
            },
        );
    }

    /// Forgets the kind's own state about an object that is gone (expectations are
    /// forgotten already).
    fn forget(&self, _key: &ObjectKey) {}

    /// Whether the object needs no sync at all (decided before expectations, e.g. one the
    /// garbage collector is taking apart).
    fn needs_no_sync(&self, _object: &Self::Object) -> bool {
        false
    }

    /// Makes the object right, once: the cache shows every earlier write.
    fn sync(
        &self,
        key: &ObjectKey,
        object: Arc<Self::Object>,
    ) -> impl Future<Output = Result<Outcome, Self::Error>> + Send;
}

impl<R: ObjectReconciler> Reconciler for R {
    type Key = ObjectKey;
    type Error = R::Error;
    const KIND: &'static str = R::KIND;
    const READS: &'static [&'static str] = <R as ObjectReconciler>::READS;

    async fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, R::Error> {
        let found = self
            .objects()
            .get(&ObjectRef::new(&key.name).within(&key.namespace));
        let Some(object) = found else {
            self.expectations().forget(key);
            self.forget(key);
            return Ok(Outcome::Done);
        };
        if self.needs_no_sync(&object) {
            return Ok(Outcome::Done);
        }
        if let Err(pending) = self
            .expectations()
            .satisfied(key, &|kind, name| self.seen(&key.namespace, kind, name))
        {
            tracing::debug!(?pending, "waiting for the cache to show earlier writes");
            return Ok(Outcome::RequeueAfter(R::EXPECTATIONS_RECHECK));
        }
        self.sync(key, object).await
    }

    fn all_keys(&self) -> Vec<ObjectKey> {
        self.objects()
            .state()
            .iter()
            .map(|object| ObjectKey::of(object.as_ref()))
            .collect()
    }

    fn caches_synced(&self) -> bool {
        ObjectReconciler::caches_synced(self)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;

    use super::*;
    use crate::controller::expectations::{EXPECTATION_TIMEOUT, Expectation};
    use crate::runtime::find::finder;

    /// Records what the preamble let through to `sync` and `forget`.
    struct Toy {
        store: Store<ConfigMap>,
        caches: SyncState,
        expectations: Expectations<ObjectKey>,
        synced: Mutex<Vec<String>>,
        forgotten: Mutex<Vec<ObjectKey>>,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("never")]
    struct Never;

    impl ObjectReconciler for Toy {
        type Object = ConfigMap;
        type Error = Never;
        const KIND: &'static str = "Toy";
        const READS: &'static [&'static str] = &["ConfigMap", "Pod"];
        const EXPECTATIONS_RECHECK: Duration = Duration::from_secs(3);

        fn objects(&self) -> &Store<ConfigMap> {
            &self.store
        }

        fn expectations(&self) -> &Expectations<ObjectKey> {
            &self.expectations
        }

        fn caches(&self) -> &SyncState {
            &self.caches
        }

        fn forget(&self, key: &ObjectKey) {
            self.forgotten.lock().expect("lock").push(key.clone());
        }

        fn needs_no_sync(&self, object: &ConfigMap) -> bool {
            object.metadata.deletion_timestamp.is_some()
        }

        async fn sync(&self, key: &ObjectKey, _: Arc<ConfigMap>) -> Result<Outcome, Never> {
            self.synced.lock().expect("lock").push(key.name.clone());
            Ok(Outcome::Done)
        }
    }

    /// The caches a toy reads: its pods, named `cached_pods`, found as `Pod` (which it
    /// reads) and as `Widget` (which it does not).
    fn caches(cached_pods: &[&str]) -> SyncState {
        let mut pods = Writer::<Pod>::default();
        for name in cached_pods {
            let pod = Pod {
                metadata: ObjectMeta {
                    name: Some((*name).to_owned()),
                    namespace: Some("ns".to_owned()),
                    ..ObjectMeta::default()
                },
                ..Pod::default()
            };
            pods.apply_watcher_event(&watcher::Event::Apply(pod));
        }
        let pods = pods.as_reader();
        SyncState::finding(vec![
            ("Pod".into(), finder(pods.clone())),
            ("Widget".into(), finder(pods)),
        ])
    }

    fn toy(objects: &[(&str, bool)], cached_pods: Vec<&'static str>) -> Toy {
        let mut writer = Writer::<ConfigMap>::default();
        for (name, deleting) in objects {
            let object = ConfigMap {
                metadata: ObjectMeta {
                    name: Some((*name).to_owned()),
                    namespace: Some("ns".to_owned()),
                    deletion_timestamp: deleting.then_some(Time(Timestamp::UNIX_EPOCH)),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            };
            writer.apply_watcher_event(&watcher::Event::Apply(object));
        }
        Toy {
            store: writer.as_reader(),
            caches: caches(&cached_pods),
            expectations: Expectations::new(EXPECTATION_TIMEOUT),
            synced: Mutex::new(Vec::new()),
            forgotten: Mutex::new(Vec::new()),
        }
    }

    fn created(name: &str) -> Expectation {
        Expectation::Create {
            kind: "Pod",
            name: name.to_owned(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_gone_object_is_forgotten_and_not_synced() {
        let r = toy(&[], Vec::new());
        let key = ObjectKey::new("ns", "gone");
        r.expectations.expect(&key, created("p"));
        assert_eq!(r.reconcile(&key).await.expect("ok"), Outcome::Done);
        assert_eq!(
            *r.forgotten.lock().expect("lock"),
            std::slice::from_ref(&key)
        );
        assert!(r.expectations.pending(&key).is_empty());
        assert!(r.synced.lock().expect("lock").is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_sync_waits_until_the_cache_shows_earlier_writes() {
        let r = toy(&[("a", false)], vec!["seen"]);
        let key = ObjectKey::new("ns", "a");
        r.expectations.expect(&key, created("seen"));
        r.expectations.expect(&key, created("missing"));
        assert_eq!(
            r.reconcile(&key).await.expect("ok"),
            Outcome::RequeueAfter(Duration::from_secs(3))
        );
        assert!(
            r.synced.lock().expect("lock").is_empty(),
            "synced too early"
        );

        let r = toy(&[("a", false)], vec!["seen", "missing"]);
        r.expectations.expect(&key, created("missing"));
        assert_eq!(r.reconcile(&key).await.expect("ok"), Outcome::Done);
        assert_eq!(*r.synced.lock().expect("lock"), ["a"]);
        assert!(r.forgotten.lock().expect("lock").is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_that_needs_no_sync_is_skipped_and_every_key_is_listed() {
        let r = toy(&[("a", true), ("b", false)], Vec::new());
        let key = ObjectKey::new("ns", "a");
        assert_eq!(r.reconcile(&key).await.expect("ok"), Outcome::Done);
        assert!(r.synced.lock().expect("lock").is_empty());
        let mut keys = r.all_keys();
        keys.sort();
        assert_eq!(keys, [key, ObjectKey::new("ns", "b")]);
    }

    #[test]
    fn only_a_kind_the_sync_reads_is_looked_up_for_expectations() {
        let r = toy(&[], vec!["web"]);
        assert!(r.seen("ns", "Pod", "web").is_some());
        assert!(r.seen("ns", "Pod", "gone").is_none());
        assert!(r.seen("other", "Pod", "web").is_none());
        // Cached, but not a kind the toy names in READS.
        assert!(r.seen("ns", "Widget", "web").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn an_own_write_is_expected_under_the_kind_and_the_written_version() {
        let r = toy(&[], Vec::new());
        let key = ObjectKey::new("ns", "a");
        let written = ObjectMeta {
            resource_version: Some("42".to_owned()),
            ..ObjectMeta::default()
        };
        r.expect_own_write(&key, &written);
        assert_eq!(
            r.expectations.pending(&key),
            [Expectation::Update {
                kind: "Toy",
                name: "a".to_owned(),
                resource_version: 42,
            }]
        );
    }
}

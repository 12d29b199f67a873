//! The preamble every reconciler of a namespaced kind shares, done once here: look the
//! object up in the shared cache, forget what was kept about it once it is gone, and wait
//! out the writes of earlier syncs the cache has not shown yet (expectations). A kind
//! implements `ObjectReconciler` and gets `runner::Reconciler` with it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

use super::ObjectKey;
use super::expectations::{Expectations, Seen};
use super::runner::{Outcome, Reconciler};

/// One namespaced kind's sync, given the object from the cache.
pub trait ObjectReconciler: Send + Sync + 'static {
    type Object: Resource<DynamicType = ()> + Clone + Send + Sync + 'static;
    type Error: std::error::Error + Send + Sync + 'static;

    /// The kind, for metrics, spans and logs.
    const KIND: &'static str;

    /// How soon to look again while the cache has not shown this kind's last writes.
    const EXPECTATIONS_RECHECK: Duration;

    /// The shared store of the kind.
    fn objects(&self) -> &Store<Self::Object>;

    /// The writes of earlier syncs, per object.
    fn expectations(&self) -> &Expectations<ObjectKey>;

    /// What the cache shows of an object of `kind` a sync wrote (for expectations).
    fn seen(&self, namespace: &str, kind: &str, name: &str) -> Option<Seen>;

    /// Whether the stores the sync reads have listed (see `Reconciler::caches_synced`).
    fn caches_synced(&self) -> bool;

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

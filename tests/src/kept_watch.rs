//! A background watch whose test keeps what it needs of each object as the objects change
//! (the ImageLists' pulls on the nodes, say), and reads it when it checks: for what an
//! object shows only for a moment, which polling could miss.

use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Result;
use futures::StreamExt as _;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};
use serde::de::DeserializeOwned;

/// What a test has kept of the objects its watch has seen.
pub struct Kept<T> {
    kept: Arc<Mutex<T>>,
    kind: String,
}

impl<T> Kept<T> {
    /// What has been kept so far; the watch waits while the test holds it.
    pub fn lock(&self) -> Result<MutexGuard<'_, T>> {
        (self.kept.lock()).map_err(|_| anyhow::anyhow!("the watch of the {}s panicked", self.kind))
    }
}

/// Watches the objects of `api` from now on, until the test's runtime ends, and hands
/// each one created or changed to `keep` with what was kept so far.
pub fn keep_watching<K, T>(
    api: Api<K>,
    mut keep: impl FnMut(&mut T, &K) + Send + 'static,
) -> Kept<T>
where
    K: kube::Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + 'static,
    T: Default + Send + 'static,
{
    let kept = Arc::new(Mutex::new(T::default()));
    let record = Arc::clone(&kept);
    tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(event) = stream.next().await {
            let Ok(object) = event else { continue };
            let Ok(mut kept) = record.lock() else { break };
            keep(&mut kept, &object);
        }
    });
    Kept {
        kept,
        kind: K::kind(&()).into_owned(),
    }
}

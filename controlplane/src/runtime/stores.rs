//! One reflector store per kind, shared by every reconciler: a single watch of all Pods
//! (not one per controller), Nodes, PVCs, ControllerRevisions and CloneSets. Each watch
//! retries with backoff forever, so a kind whose CRD is not installed yet simply stays
//! not-synced (and `/readyz` says so) until it appears.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Resource, ResourceExt as _};
use serde::de::DeserializeOwned;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::api::CloneSet;

/// The shared caches. Cloning is cheap; every clone reads the same stores.
#[derive(Clone)]
pub struct Stores {
    pub pods: Store<Pod>,
    pub nodes: Store<Node>,
    pub pvcs: Store<PersistentVolumeClaim>,
    pub revisions: Store<ControllerRevision>,
    pub clonesets: Store<CloneSet>,
    pub sync: SyncState,
}

/// Which stores have finished their initial list.
#[derive(Clone, Default)]
pub struct SyncState {
    kinds: Arc<Vec<(&'static str, Arc<AtomicBool>)>>,
}

impl SyncState {
    /// Each kind and whether its store is synced.
    pub fn report(&self) -> Vec<(&'static str, bool)> {
        self.kinds
            .iter()
            .map(|(kind, flag)| (*kind, flag.load(Ordering::Acquire)))
            .collect()
    }

    /// Whether every store is synced.
    pub fn all_synced(&self) -> bool {
        self.report().iter().all(|(_, synced)| *synced)
    }
}

impl Stores {
    /// Starts one watch per kind on `tasks`; they run until `shutdown`.
    pub fn start(
        client: &kube::Client,
        tasks: &mut JoinSet<()>,
        shutdown: &CancellationToken,
    ) -> Self {
        let mut kinds = Vec::new();
        let mut start = StoreStarter {
            client,
            tasks,
            shutdown,
            kinds: &mut kinds,
        };
        let pods = start.kind::<Pod>("Pod");
        let nodes = start.kind::<Node>("Node");
        let pvcs = start.kind::<PersistentVolumeClaim>("PersistentVolumeClaim");
        let revisions = start.kind::<ControllerRevision>("ControllerRevision");
        let clonesets = start.kind::<CloneSet>("CloneSet");
        Self {
            pods,
            nodes,
            pvcs,
            revisions,
            clonesets,
            sync: SyncState {
                kinds: Arc::new(kinds),
            },
        }
    }
}

struct StoreStarter<'a> {
    client: &'a kube::Client,
    tasks: &'a mut JoinSet<()>,
    shutdown: &'a CancellationToken,
    kinds: &'a mut Vec<(&'static str, Arc<AtomicBool>)>,
}

impl StoreStarter<'_> {
    fn kind<K>(&mut self, kind: &'static str) -> Store<K>
    where
        K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    {
        let (reader, writer) = reflector::store();
        let api: Api<K> = Api::all(self.client.clone());
        // managedFields are never read by reconcilers and are a large part of each object.
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(|object: &mut K| object.managed_fields_mut().clear())
            .reflect(writer);
        let shutdown = self.shutdown.clone();
        let span = tracing::info_span!("store", kind);
        self.tasks.spawn(
            async move {
                let mut events = std::pin::pin!(events);
                loop {
                    let event = tokio::select! {
                        () = shutdown.cancelled() => break,
                        event = events.next() => event,
                    };
                    match event {
                        Some(Ok(_)) => {}
                        Some(Err(err)) => {
                            tracing::warn!(error = %err, "watch failed; retrying with backoff");
                        }
                        None => break,
                    }
                }
            }
            .instrument(span.clone()),
        );
        let synced = Arc::new(AtomicBool::new(false));
        let flag = synced.clone();
        let ready = reader.clone();
        let shutdown = self.shutdown.clone();
        self.tasks.spawn(
            async move {
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    result = ready.wait_until_ready() => {
                        if result.is_ok() {
                            flag.store(true, Ordering::Release);
                            tracing::info!(objects = ready.len(), "cache synced");
                        }
                    }
                }
            }
            .instrument(span),
        );
        self.kinds.push((kind, synced));
        reader
    }
}

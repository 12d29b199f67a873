//! One reflector store per kind, shared by every reconciler: a single watch of all Pods
//! (not one per controller), Nodes, PVCs, ControllerRevisions, CloneSets, ImageLists and
//! ImagePullJobs. Each watch
//! retries with backoff forever, so a kind whose CRD is not installed yet simply stays
//! not-synced (and `/readyz` says so) until it appears.
//!
//! Every change a watch sees is also broadcast (see [`Changes`]) so controllers can map it
//! to the keys they reconcile, without a watch of their own.

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
use tokio::sync::broadcast;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::api::{CloneSet, ImageList, ImagePullJob};

/// The shared caches. Cloning is cheap; every clone reads the same stores.
#[derive(Clone)]
pub struct Stores {
    pub pods: Store<Pod>,
    pub nodes: Store<Node>,
    pub pvcs: Store<PersistentVolumeClaim>,
    pub revisions: Store<ControllerRevision>,
    pub clonesets: Store<CloneSet>,
    pub imagelists: Store<ImageList>,
    pub imagepulljobs: Store<ImagePullJob>,
    pub sync: SyncState,
    pub changes: Changes,
}

/// Objects as they change (applied, deleted, or listed again after a relist), per kind.
/// A receiver that falls behind gets `RecvError::Lagged` and must resync everything.
#[derive(Clone)]
pub struct Changes {
    pub pods: broadcast::Sender<Arc<Pod>>,
    pub nodes: broadcast::Sender<Arc<Node>>,
    pub pvcs: broadcast::Sender<Arc<PersistentVolumeClaim>>,
    pub revisions: broadcast::Sender<Arc<ControllerRevision>>,
    pub clonesets: broadcast::Sender<Arc<CloneSet>>,
    pub imagelists: broadcast::Sender<Arc<ImageList>>,
    pub imagepulljobs: broadcast::Sender<Arc<ImagePullJob>>,
}

/// Enough for a burst of a few thousand pod events between two polls of a controller.
const CHANGES_CAPACITY: usize = 8192;

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

    /// Whether the stores of `kinds` are synced.
    pub fn synced(&self, kinds: &[&str]) -> bool {
        self.report()
            .iter()
            .filter(|(kind, _)| kinds.contains(kind))
            .all(|(_, synced)| *synced)
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
        let changes = Changes {
            pods: broadcast::channel(CHANGES_CAPACITY).0,
            nodes: broadcast::channel(CHANGES_CAPACITY).0,
            pvcs: broadcast::channel(CHANGES_CAPACITY).0,
            revisions: broadcast::channel(CHANGES_CAPACITY).0,
            clonesets: broadcast::channel(CHANGES_CAPACITY).0,
            imagelists: broadcast::channel(CHANGES_CAPACITY).0,
            imagepulljobs: broadcast::channel(CHANGES_CAPACITY).0,
        };
        let pods = start.kind::<Pod>("Pod", changes.pods.clone());
        let nodes = start.kind::<Node>("Node", changes.nodes.clone());
        let pvcs =
            start.kind::<PersistentVolumeClaim>("PersistentVolumeClaim", changes.pvcs.clone());
        let revisions =
            start.kind::<ControllerRevision>("ControllerRevision", changes.revisions.clone());
        let clonesets = start.kind::<CloneSet>("CloneSet", changes.clonesets.clone());
        let imagelists = start.kind::<ImageList>("ImageList", changes.imagelists.clone());
        let imagepulljobs =
            start.kind::<ImagePullJob>("ImagePullJob", changes.imagepulljobs.clone());
        Self {
            pods,
            nodes,
            pvcs,
            revisions,
            clonesets,
            imagelists,
            imagepulljobs,
            sync: SyncState {
                kinds: Arc::new(kinds),
            },
            changes,
        }
    }
}

/// Sends the object of an event to the controllers, if any listen.
fn broadcast_change<K>(changes: &broadcast::Sender<Arc<K>>, event: watcher::Event<K>) {
    if changes.receiver_count() == 0 {
        return;
    }
    match event {
        watcher::Event::Apply(object)
        | watcher::Event::Delete(object)
        | watcher::Event::InitApply(object) => {
            // No receiver left is not an error: controllers come and go with leadership.
            let _ = changes.send(Arc::new(object));
        }
        watcher::Event::Init | watcher::Event::InitDone => {}
    }
}

struct StoreStarter<'a> {
    client: &'a kube::Client,
    tasks: &'a mut JoinSet<()>,
    shutdown: &'a CancellationToken,
    kinds: &'a mut Vec<(&'static str, Arc<AtomicBool>)>,
}

impl StoreStarter<'_> {
    fn kind<K>(&mut self, kind: &'static str, changes: broadcast::Sender<Arc<K>>) -> Store<K>
    where
        K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    {
        let (reader, writer) = reflector::store();
        let api: Api<K> = Api::all(self.client.clone());
        // managedFields are a large part of each object and reconcilers do not read them,
        // except an ImageList's: they say which entries each ImagePullJob holds.
        let keep_managed_fields = kind == "ImageList";
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(move |object: &mut K| {
                if !keep_managed_fields {
                    object.managed_fields_mut().clear();
                }
            })
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
                        Some(Ok(event)) => broadcast_change(&changes, event),
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

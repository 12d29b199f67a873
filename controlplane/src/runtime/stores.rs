//! One reflector store per kind, shared by every reconciler: a single watch of all Pods
//! (not one per controller), Nodes, PVCs, ControllerRevisions, CloneSets, ImageLists and
//! ImagePullJobs. Each watch
//! retries with backoff forever, so a kind whose CRD is not installed yet simply stays
//! not-synced (and `/readyz` says so) until it appears.
//!
//! Every change a watch sees is also broadcast (see [`Changes`]) so controllers can map it
//! to the keys they reconcile, without a watch of their own.
//!
//! A cache filled while another replica led may lag behind what that leader wrote, so each
//! time this replica starts a term, every watch lists again (a quorum read, made after the
//! Lease was won), and [`SyncState::synced`] stays `false` until the lists of the kinds a
//! controller reads have completed for the current term.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Resource, ResourceExt as _};
use serde::de::DeserializeOwned;
use tokio::sync::{broadcast, watch};
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

/// Which stores have finished a list, and for which leadership term.
#[derive(Clone)]
pub struct SyncState {
    /// Per kind: one more than the last term a list completed in (0: never listed).
    kinds: Arc<Vec<(&'static str, Arc<AtomicU64>)>>,
    /// The term this replica is in (0 before it first leads).
    term: watch::Receiver<u64>,
    /// Moves whenever any list completes, to wake [`SyncState::wait_synced`].
    listed: Arc<watch::Sender<u64>>,
}

impl Default for SyncState {
    fn default() -> Self {
        Self::new(Vec::new(), watch::channel(0).1)
    }
}

impl SyncState {
    fn new(kinds: Vec<(&'static str, Arc<AtomicU64>)>, term: watch::Receiver<u64>) -> Self {
        Self {
            kinds: Arc::new(kinds),
            term,
            listed: Arc::new(watch::Sender::new(0)),
        }
    }

    /// Each kind and whether its store has listed at least once (what `/readyz` shows).
    pub fn report(&self) -> Vec<(&'static str, bool)> {
        self.kinds
            .iter()
            .map(|(kind, listed)| (*kind, listed.load(Ordering::Acquire) > 0))
            .collect()
    }

    /// Whether the stores of `kinds` have listed since the current term began, so what they
    /// hold is at least as new as the moment this replica won the Lease.
    pub fn synced(&self, kinds: &[&str]) -> bool {
        let required = self.term.borrow().saturating_add(1);
        self.kinds
            .iter()
            .filter(|(kind, _)| kinds.contains(kind))
            .all(|(_, listed)| listed.load(Ordering::Acquire) >= required)
    }

    /// Whether every store has listed at least once.
    pub fn all_synced(&self) -> bool {
        self.report().iter().all(|(_, synced)| *synced)
    }

    /// Returns once [`SyncState::synced`] holds for `kinds`.
    pub async fn wait_synced(&self, kinds: &[&str]) {
        // Subscribed before the check, so a list completing in between still wakes us.
        let mut listed = self.listed.subscribe();
        while !self.synced(kinds) {
            if listed.changed().await.is_err() {
                return;
            }
        }
    }

    /// Records that `kind`'s store completed a list begun in `term`.
    fn mark_listed(&self, listed: &AtomicU64, term: u64) {
        listed.fetch_max(term.saturating_add(1), Ordering::AcqRel);
        self.listed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Stores {
    /// Starts one watch per kind on `tasks`; they run until `shutdown`, and list again
    /// whenever `terms` moves (see [`crate::runtime::elector::Elector::terms`]).
    pub fn start(
        client: &kube::Client,
        terms: watch::Receiver<u64>,
        tasks: &mut JoinSet<()>,
        shutdown: &CancellationToken,
    ) -> Self {
        let mut start = StoreStarter {
            client,
            tasks,
            shutdown,
            sync: SyncState::new(Vec::new(), terms),
            kinds: Vec::new(),
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
        let sync = SyncState {
            kinds: Arc::new(start.kinds),
            ..start.sync
        };
        Self {
            pods,
            nodes,
            pvcs,
            revisions,
            clonesets,
            imagelists,
            imagepulljobs,
            sync,
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
    /// Shared by every store; `kinds` joins it once all are started.
    sync: SyncState,
    kinds: Vec<(&'static str, Arc<AtomicU64>)>,
}

impl StoreStarter<'_> {
    fn kind<K>(&mut self, kind: &'static str, changes: broadcast::Sender<Arc<K>>) -> Store<K>
    where
        K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    {
        let (reader, writer) = reflector::store();
        let listed = Arc::new(AtomicU64::new(0));
        let follower = Follower {
            api: Api::all(self.client.clone()),
            // managedFields are a large part of each object and reconcilers do not read
            // them, except an ImageList's: they say which entries each ImagePullJob holds.
            keep_managed_fields: kind == "ImageList",
            writer,
            changes,
            sync: self.sync.clone(),
            listed: listed.clone(),
        };
        let span = tracing::info_span!("store", kind);
        self.tasks
            .spawn(follower.run(self.shutdown.clone()).instrument(span));
        self.kinds.push((kind, listed));
        reader
    }
}

/// One kind's watch, feeding its store and the change broadcast.
struct Follower<K: Resource + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    api: Api<K>,
    keep_managed_fields: bool,
    writer: Writer<K>,
    changes: broadcast::Sender<Arc<K>>,
    sync: SyncState,
    listed: Arc<AtomicU64>,
}

impl<K> Follower<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    /// Watches until `shutdown`, starting over with a fresh list at each new term. The
    /// store keeps serving its old contents until the new list is complete, and is then
    /// replaced in one step.
    async fn run(mut self, shutdown: CancellationToken) {
        let mut terms = self.sync.term.clone();
        let mut terms_open = true;
        loop {
            let term = *terms.borrow_and_update();
            let keep_managed_fields = self.keep_managed_fields;
            let events = watcher(self.api.clone(), watcher::Config::default())
                .default_backoff()
                .modify(move |object: &mut K| {
                    if !keep_managed_fields {
                        object.managed_fields_mut().clear();
                    }
                });
            let mut events = std::pin::pin!(events);
            loop {
                let event = tokio::select! {
                    () = shutdown.cancelled() => return,
                    changed = terms.changed(), if terms_open => {
                        if changed.is_ok() {
                            tracing::debug!("new leadership term; listing again");
                            break;
                        }
                        terms_open = false;
                        continue;
                    }
                    event = events.next() => event,
                };
                match event {
                    Some(Ok(event)) => self.apply(term, event),
                    Some(Err(err)) => {
                        tracing::warn!(error = %err, "watch failed; retrying with backoff");
                    }
                    None => return,
                }
            }
        }
    }

    fn apply(&mut self, term: u64, event: watcher::Event<K>) {
        self.writer.apply_watcher_event(&event);
        if matches!(event, watcher::Event::InitDone) {
            let first = self.listed.load(Ordering::Acquire) == 0;
            self.sync.mark_listed(&self.listed, term);
            if first {
                tracing::info!("cache synced");
            } else {
                tracing::debug!(term, "cache listed again");
            }
        }
        broadcast_change(&self.changes, event);
    }
}

#[cfg(test)]
#[path = "stores_tests.rs"]
mod tests;

//! The shared caches, one reflector store per kind, shared by every reconciler: a single
//! watch of all Pods (not one per controller), and so on for every kind the wiring
//! registers (see [`StoreSet`]; the runtime itself names no kind). Each watch retries with
//! backoff forever, so a kind whose CRD is not installed yet simply stays not-synced (and
//! `/readyz` says so) until it appears.
//!
//! Each kind is decoded object by object ([`super::decode`]): an object
//! that does not fit the kind's Rust type is skipped, counted, logged and reported (sent to
//! the wiring, which puts a Warning Event on it), while every other object of the kind is
//! served; a store keeps the last copy it could read of an object that stops decoding. For a
//! kind whose status has conditions ([`WatchOptions::status_conditions`]) it also puts, in
//! the [`ConditionOutbox`], what the object's `Undecodable` condition should say, and that
//! it goes once the object decodes again.
//!
//! Every change a watch sees is also broadcast (see [`Cache::changes`]) so controllers can
//! map it to the keys they reconcile, without a watch of their own.
//!
//! A cache filled while another replica led may lag behind what that leader wrote, so each
//! time this replica starts a term, every watch lists again (a quorum read, made after the
//! Lease was won), and [`SyncState::synced`] stays `false` until the lists of the kinds a
//! controller reads have completed for the current term. A kind no store was started for
//! never counts as synced, and [`SyncState::require`] lets the wiring refuse, at start, a
//! controller that names one.

use std::borrow::Cow;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::ApiResource;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Resource, ResourceExt as _};
use serde::de::DeserializeOwned;
use thiserror::Error;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::condition_outbox::{ConditionChange, ConditionOutbox};
use super::decode::{Decoded, Decoder, Undecodable};
use super::find::{Finder, KnownScope, ObjectMetadata, finder};
use super::metrics::Metrics;

/// The set of stores a binary starts, chosen by its wiring and given to
/// [`crate::runtime::Runtime::start`]: each field a [`Cache`] from
/// [`StoreRegistry::watch`], plus the [`SyncState`] they report to.
pub trait StoreSet {
    /// Registers every kind of the set; ends with [`StoreRegistry::finish`].
    fn start(registry: StoreRegistry<'_>) -> Self;

    /// The sync state every store of the set reports to (what `/readyz` shows).
    fn sync(&self) -> &SyncState;
}

/// One kind's cache: the store reconcilers read and the broadcast of its changes.
pub struct Cache<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    pub store: Store<K>,
    /// Objects as they change (applied, deleted, or listed again after a relist). A
    /// receiver that falls behind gets `RecvError::Lagged` and must resync everything.
    pub changes: broadcast::Sender<Arc<K>>,
}

/// How one kind is watched.
#[derive(Clone, Copy, Debug)]
pub struct WatchOptions {
    /// managedFields are a large part of each object and reconcilers rarely read them;
    /// keep them only for a kind whose field ownership a reconciler reads.
    pub keep_managed_fields: bool,
    /// How many changes the broadcast keeps for a receiver that has not read them yet;
    /// one that falls further behind resyncs everything.
    pub changes_capacity: usize,
    /// Whether the kind's status has `conditions`: an object that does not decode then gets
    /// an `Undecodable` condition (through the [`ConditionOutbox`]) besides its Event. A
    /// kind without them gets only the Event.
    pub status_conditions: bool,
}

impl Default for WatchOptions {
    fn default() -> Self {
        Self {
            keep_managed_fields: false,
            changes_capacity: BUSY_CHANGES,
            status_conditions: false,
        }
    }
}

/// Enough for a burst of a few thousand pod events between two polls of a controller.
/// The broadcast allocates and writes every slot up front (~40 bytes each), so this costs
/// ~320 KiB of resident memory per kind.
pub const BUSY_CHANGES: usize = 8192;

/// For the kinds people create by the handful (workloads, jobs, budgets): their changes
/// come from their own controller's writes, a few per object, and a relist of more
/// than this many is met by the resync a lag causes anyway.
pub const QUIET_CHANGES: usize = 1024;

/// A controller names a store that this binary does not start.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("no store for the kind {kind} is started (the stores started are {started})")]
pub struct UnknownStore {
    pub kind: String,
    pub started: String,
}

/// One kind's list progress: one more than the last term a list completed in (0: never
/// listed).
type KindProgress = (Cow<'static, str>, Arc<AtomicU64>);

/// Which stores have finished a list, and for which leadership term; and how to find an
/// object of each kind by name (so a reconciler names the kinds it reads and never matches
/// a kind's name to its store itself).
#[derive(Clone)]
pub struct SyncState {
    /// Per kind started, in the order they were registered.
    kinds: Arc<Vec<KindProgress>>,
    /// Per kind started, how to find an object of it.
    finders: Arc<Vec<(Cow<'static, str>, Finder)>>,
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
    fn new(kinds: Vec<KindProgress>, term: watch::Receiver<u64>) -> Self {
        Self {
            kinds: Arc::new(kinds),
            finders: Arc::default(),
            term,
            listed: Arc::new(watch::Sender::new(0)),
        }
    }

    /// Each kind and whether its store has listed at least once (what `/readyz` shows).
    pub fn report(&self) -> Vec<(&str, bool)> {
        self.kinds
            .iter()
            .map(|(kind, listed)| (kind.as_ref(), listed.load(Ordering::Acquire) > 0))
            .collect()
    }

    /// Whether the stores of `kinds` have listed since the current term began, so what they
    /// hold is at least as new as the moment this replica won the Lease. A kind without a
    /// store is never synced: planning from a cache nobody fills would create what exists.
    pub fn synced(&self, kinds: &[&str]) -> bool {
        let required = self.term.borrow().saturating_add(1);
        kinds.iter().all(|wanted| {
            self.kinds
                .iter()
                .find(|(kind, _)| kind == wanted)
                .is_some_and(|(_, listed)| listed.load(Ordering::Acquire) >= required)
        })
    }

    /// Refuses the first of `kinds` that no store was started for; the wiring calls it
    /// before it starts a controller that reads `kinds`.
    pub fn require(&self, kinds: &[&str]) -> Result<(), UnknownStore> {
        let Some(missing) = kinds
            .iter()
            .find(|wanted| !self.kinds.iter().any(|(kind, _)| kind == *wanted))
        else {
            return Ok(());
        };
        let started: Vec<&str> = self.kinds.iter().map(|(kind, _)| kind.as_ref()).collect();
        Err(UnknownStore {
            kind: (*missing).to_owned(),
            started: if started.is_empty() {
                "none".to_owned()
            } else {
                started.join(", ")
            },
        })
    }

    /// The object of `kind` named `name` (in `namespace`, for a namespaced kind) as its
    /// store holds it; `None` when it holds none, or no store of `kind` was started.
    pub fn find(&self, kind: &str, namespace: &str, name: &str) -> Option<Arc<dyn ObjectMetadata>> {
        let (_, find) = self.finders.iter().find(|(started, _)| started == kind)?;
        find(namespace, name)
    }

    /// A sync state that lists nothing but finds objects with `finders`, for the tests of
    /// what reads the caches.
    #[cfg(test)]
    pub(crate) fn finding(finders: Vec<(Cow<'static, str>, Finder)>) -> Self {
        Self {
            finders: Arc::new(finders),
            ..Self::default()
        }
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

/// Starts one watch per kind a [`StoreSet`] registers; they run until `shutdown`, and list
/// again whenever `terms` moves (see [`crate::runtime::elector::Elector::terms`]).
pub struct StoreRegistry<'a> {
    client: &'a kube::Client,
    tasks: &'a mut JoinSet<()>,
    shutdown: &'a CancellationToken,
    /// Where each store reports an object that does not decode.
    undecodable: Reporter,
    /// Shared by every store; `kinds` joins it in [`StoreRegistry::finish`].
    sync: SyncState,
    kinds: Vec<KindProgress>,
    finders: Vec<(Cow<'static, str>, Finder)>,
}

impl<'a> StoreRegistry<'a> {
    pub(super) fn new(
        client: &'a kube::Client,
        terms: watch::Receiver<u64>,
        undecodable: Reporter,
        tasks: &'a mut JoinSet<()>,
        shutdown: &'a CancellationToken,
    ) -> Self {
        Self {
            client,
            tasks,
            shutdown,
            undecodable,
            sync: SyncState::new(Vec::new(), terms),
            kinds: Vec::new(),
            finders: Vec::new(),
        }
    }

    /// Starts the cluster-wide watch of `K`, known to [`SyncState`] by its kind.
    pub fn watch<K>(&mut self, options: WatchOptions) -> Cache<K>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        K::Scope: KnownScope,
    {
        self.watch_trimmed(options, |_| {})
    }

    /// As [`Self::watch`], with `trim` applied to each object as it arrives, before the
    /// store and the change broadcast see it: for the parts of a kind no reconciler reads.
    pub fn watch_trimmed<K>(&mut self, options: WatchOptions, trim: fn(&mut K)) -> Cache<K>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        K::Scope: KnownScope,
    {
        let kind = K::kind(&());
        let (store, writer) = reflector::store();
        let changes = broadcast::channel(options.changes_capacity).0;
        let listed = Arc::new(AtomicU64::new(0));
        let follower = Follower::new(
            self.client.clone(),
            options,
            writer,
            changes.clone(),
            self.sync.clone(),
            listed.clone(),
            self.undecodable.clone(),
        )
        .trimming(trim);
        let span = tracing::info_span!("store", kind = kind.as_ref());
        self.tasks
            .spawn(follower.run(self.shutdown.clone()).instrument(span));
        self.finders.push((kind.clone(), finder(store.clone())));
        self.kinds.push((kind, listed));
        Cache { store, changes }
    }

    /// The sync state of every kind registered.
    pub fn finish(self) -> SyncState {
        SyncState {
            kinds: Arc::new(self.kinds),
            finders: Arc::new(self.finders),
            ..self.sync
        }
    }
}

/// Where the stores report objects that do not decode: the metric, a channel the wiring
/// reads to put an Event on each, and the outbox of conditions the wiring writes while
/// leading (the runtime writes no object itself).
#[derive(Clone)]
pub struct Reporter {
    pub metrics: Metrics,
    pub reports: mpsc::Sender<Undecodable>,
    pub conditions: ConditionOutbox,
}

impl Reporter {
    /// How many reports wait for the wiring before more are dropped (each is logged and
    /// counted either way).
    pub const BACKLOG: usize = 64;
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

/// One kind's watch, feeding its store and the change broadcast.
struct Follower<K: Resource + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    /// The kind, each object of a list or event decoded on its own.
    api: Api<Decoded<K>>,
    keep_managed_fields: bool,
    trim: fn(&mut K),
    writer: Writer<K>,
    /// The store `writer` fills, for the last good copy of an object that stops decoding.
    store: Store<K>,
    decoder: Decoder<K>,
    /// How many objects of the kind did not decode at the last count exported.
    undecodable_exported: usize,
    reporter: Reporter,
    /// The kind, when its status has conditions to report on (`WatchOptions`).
    condition_resource: Option<ApiResource>,
    changes: broadcast::Sender<Arc<K>>,
    sync: SyncState,
    listed: Arc<AtomicU64>,
}

impl<K> Follower<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    fn new(
        client: kube::Client,
        options: WatchOptions,
        writer: Writer<K>,
        changes: broadcast::Sender<Arc<K>>,
        sync: SyncState,
        listed: Arc<AtomicU64>,
        reporter: Reporter,
    ) -> Self {
        Self {
            api: Api::all(client),
            keep_managed_fields: options.keep_managed_fields,
            trim: |_| {},
            store: writer.as_reader(),
            writer,
            decoder: Decoder::new(),
            undecodable_exported: 0,
            reporter,
            condition_resource: options
                .status_conditions
                .then(|| ApiResource::erase::<K>(&())),
            changes,
            sync,
            listed,
        }
    }

    /// Applies `trim` to each object as it arrives (see [`StoreRegistry::watch_trimmed`]).
    fn trimming(self, trim: fn(&mut K)) -> Self {
        Self { trim, ..self }
    }

    /// Watches until `shutdown`, starting over with a fresh list at each new term. The
    /// store keeps serving its old contents until the new list is complete, and is then
    /// replaced in one step.
    async fn run(mut self, shutdown: CancellationToken) {
        let mut terms = self.sync.term.clone();
        let mut terms_open = true;
        loop {
            let term = *terms.borrow_and_update();
            let (keep_managed_fields, trim) = (self.keep_managed_fields, self.trim);
            let events = watcher(self.api.clone(), watcher::Config::default())
                .default_backoff()
                .modify(move |object: &mut Decoded<K>| {
                    if !keep_managed_fields {
                        object.managed_fields_mut().clear();
                    }
                    if let Decoded::Object(object) = object {
                        trim(object);
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

    fn apply(&mut self, term: u64, event: watcher::Event<Decoded<K>>) {
        let store = &self.store;
        let step = self.decoder.step(event, |key| store.get(key));
        let reported = step.report.is_some();
        if let Some(report) = step.report {
            self.put_condition(&report.object, Some(&report));
            self.report(report);
        }
        if let Some(readable) = &step.readable {
            self.put_condition(readable, None);
        }
        let undecodable = self.decoder.undecodable();
        if reported || undecodable != self.undecodable_exported {
            self.reporter
                .metrics
                .observe_undecodable(&K::kind(&()), reported, undecodable);
            self.undecodable_exported = undecodable;
        }
        let Some(event) = step.event else {
            return;
        };
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

    /// Hands the wiring what `object`'s condition should say, if its kind has conditions.
    fn put_condition(&self, object: &ObjectReference, undecodable: Option<&Undecodable>) {
        let Some(resource) = &self.condition_resource else {
            return;
        };
        self.reporter.conditions.put(ConditionChange {
            resource: resource.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone().unwrap_or_default(),
            uid: object.uid.clone(),
            undecodable: undecodable.cloned(),
        });
    }

    /// Logs an object that does not decode and hands it to the wiring for its Event.
    fn report(&self, report: Undecodable) {
        tracing::warn!(
            namespace = report.object.namespace.as_deref().unwrap_or(""),
            name = report.object.name.as_deref().unwrap_or(""),
            resource_version = report.object.resource_version.as_deref().unwrap_or(""),
            field = %report.field,
            error = %report.error,
            last_good_kept = report.last_good_kept,
            "object does not decode; skipped"
        );
        if let Err(mpsc::error::TrySendError::Full(_)) = self.reporter.reports.try_send(report) {
            tracing::debug!("too many undecodable objects waiting for their Event; dropped one");
        }
    }
}

#[cfg(test)]
#[path = "stores_tests.rs"]
mod tests;

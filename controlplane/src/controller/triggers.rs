//! A controller's triggers, declared (as kube-runtime's `owns` and `watches` are): which
//! shared watches it listens to and how a change of each maps to the keys it reconciles.
//! One loop, here, merges the watches and queues the keys; a kind's `triggers.rs` holds
//! only its mappings.
//!
//! What the loop does with one receive from a watch's broadcast: queue the keys the change
//! maps to, queue every key when the receiver fell behind (events were lost), and stop when
//! a watch is gone (the stores live as long as the process, so that is its end).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::{self, BoxStream};
use kube::Resource;
use kube::runtime::reflector::Store;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;

use super::ObjectKey;
use super::queue::WorkQueue;

/// One receive, mapped to keys.
#[derive(Debug, PartialEq, Eq)]
enum Received<K> {
    /// Keys to queue once `after` has passed (zero: now).
    Keys { keys: Vec<K>, after: Duration },
    /// The receiver fell behind and missed events.
    Lagged,
    /// The watch is gone.
    Closed,
}

/// Maps a received object with `map`; its keys are due `after` from now.
fn received<T, K>(
    received: Result<Arc<T>, RecvError>,
    after: Duration,
    map: impl FnOnce(&Arc<T>) -> Vec<K>,
) -> Received<K> {
    match received {
        Ok(object) => Received::Keys {
            keys: map(&object),
            after,
        },
        Err(RecvError::Lagged(_)) => Received::Lagged,
        Err(RecvError::Closed) => Received::Closed,
    }
}

impl<K: Clone + Eq + std::hash::Hash + Send + 'static> Received<K> {
    /// Queues the keys, or every key of `kind` (`all`) after a lag; `false` once the
    /// watch is closed and the loop should end.
    fn queue(self, queue: &WorkQueue<K>, kind: &str, all: impl FnOnce() -> Vec<K>) -> bool {
        let (keys, after) = match self {
            Self::Keys { keys, after } => (keys, after),
            Self::Lagged => {
                tracing::warn!(kind, "fell behind the watch events; queueing every object");
                (all(), Duration::ZERO)
            }
            Self::Closed => return false,
        };
        // A key already due within `after` absorbs this change (`WorkQueue::add_after`).
        keys.into_iter().for_each(|key| queue.add_after(key, after));
        true
    }
}

/// Every key a lag requeues.
type AllKeys<K> = Box<dyn Fn() -> Vec<K> + Send>;

/// The watches one controller listens to, each with its mapping to keys, and the queue
/// they feed.
pub struct Triggers<K> {
    /// The controller's kind, for the log of a lag.
    kind: Cow<'static, str>,
    queue: WorkQueue<K>,
    all: AllKeys<K>,
    /// One stream of mapped receives per watch.
    sources: Vec<BoxStream<'static, Received<K>>>,
}

impl<K: Clone + Eq + std::hash::Hash + Send + 'static> Triggers<K> {
    /// Triggers of `kind` feeding `queue`; after a lag, every key `all` lists is queued.
    pub fn new(
        kind: impl Into<Cow<'static, str>>,
        queue: WorkQueue<K>,
        all: impl Fn() -> Vec<K> + Send + 'static,
    ) -> Self {
        Self {
            kind: kind.into(),
            queue,
            all: Box::new(all),
            sources: Vec::new(),
        }
    }

    /// Listens to `changes` (subscribed now, so nothing sent from here on is missed),
    /// mapping each changed object to keys with `map`. `map` may keep state between calls
    /// (what it saw of a node, say), since each watch's changes reach it in order.
    #[must_use]
    pub fn watch<T: Send + Sync + 'static>(
        self,
        changes: &broadcast::Sender<Arc<T>>,
        map: impl FnMut(&Arc<T>) -> Vec<K> + Send + 'static,
    ) -> Self {
        self.watch_coalesced(changes, Duration::ZERO, map)
    }

    /// As [`Self::watch`], but a change's keys are queued `window` later, and every change
    /// mapped to the same key meanwhile rides along: one sync per window, whatever the
    /// rate. For a watch whose objects change far more often than a sync needs to look,
    /// such as the status of every node's ImageList while a job pulls on all of them.
    #[must_use]
    pub fn watch_coalesced<T: Send + Sync + 'static>(
        mut self,
        changes: &broadcast::Sender<Arc<T>>,
        window: Duration,
        map: impl FnMut(&Arc<T>) -> Vec<K> + Send + 'static,
    ) -> Self {
        let receives = stream::unfold(
            (changes.subscribe(), map),
            move |(mut receiver, mut map)| async move {
                let got = received(receiver.recv().await, window, &mut map);
                Some((got, (receiver, map)))
            },
        );
        self.sources.push(receives.boxed());
        self
    }

    /// Queues what the watches map to until `shutdown`, or until a watch is gone.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self {
            kind,
            queue,
            all,
            sources,
        } = self;
        let mut receives = stream::select_all(sources);
        loop {
            let got = tokio::select! {
                () = shutdown.cancelled() => return,
                got = receives.next() => got,
            };
            // `None`: no watch was declared.
            let Some(got) = got else { return };
            if !got.queue(&queue, &kind, &all) {
                return;
            }
        }
    }
}

impl Triggers<ObjectKey> {
    /// The triggers of the controller of the objects in `objects`: a lag requeues every one
    /// of them.
    pub fn of<O>(objects: &Store<O>, queue: WorkQueue<ObjectKey>) -> Self
    where
        O: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    {
        let objects = objects.clone();
        Self::new(O::kind(&()), queue, move || every_key(&objects))
    }

    /// Listens to the controller's own kind: a change concerns the object itself.
    #[must_use]
    pub fn watch_own<O>(self, changes: &broadcast::Sender<Arc<O>>) -> Self
    where
        O: Resource + Send + Sync + 'static,
    {
        self.watch(changes, |object| vec![ObjectKey::of(object.as_ref())])
    }
}

/// The key of every object in `objects`.
pub fn every_key<O>(objects: &Store<O>) -> Vec<ObjectKey>
where
    O: Resource<DynamicType = ()> + Clone + 'static,
{
    (objects.state().iter())
        .map(|object| ObjectKey::of(object.as_ref()))
        .collect()
}

#[cfg(test)]
#[path = "triggers_tests.rs"]
mod tests;

//! Sessions with the node agents, one per node, as the leader keeps them: the ImageList
//! distributor pushes each node's ImageList and follows its pulls, the probe sessions push
//! each node's NodePodProbe and follow its probes. Both share the same frame, which lives
//! here once:
//!
//! - [`while_leading`]: sessions exist only while this replica leads; each term has a
//!   token the sessions are children of, cancelled the moment leadership is lost.
//! - [`NodeSessions`]: one task per node object whose Node exists, each holding the
//!   object's latest version; a node's session stops when its object or Node goes.
//! - [`Reconnect`]: a session whose connection failed waits 1 s, 2 s, 4 s, ... (at most
//!   a minute) before it connects again, back to 1 s after a connection that served for
//!   30 s, and stops waiting the moment it is stopped.
//!
//! What a session does over its connection stays with its kind.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt as _;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Runs `lead` for each leadership term, with a token that is cancelled — together with
/// every child token handed out from it — the instant leadership turns `false` or
/// `shutdown` begins; `lead` itself is dropped at that point, wherever it was waiting.
pub(crate) async fn while_leading<F, Fut>(
    mut leadership: watch::Receiver<bool>,
    shutdown: CancellationToken,
    mut lead: F,
) where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            leading = leadership.wait_for(|leading| *leading) => if leading.is_err() { return },
        }
        let term = shutdown.child_token();
        let lost = async {
            // An elector that is gone leads no more either.
            let _ = leadership.wait_for(|leading| !*leading).await;
        };
        tokio::select! {
            () = lead(term.clone()) => {}
            () = lost => {}
            () = shutdown.cancelled() => {}
        }
        term.cancel();
        tracing::debug!("leadership term over; the node sessions stopped");
        if shutdown.is_cancelled() {
            return;
        }
    }
}

/// `objects` (each named after its node) whose Node exists, by node name.
pub(crate) fn on_existing_nodes<T>(
    objects: Vec<Arc<T>>,
    nodes: &Store<Node>,
) -> HashMap<String, Arc<T>>
where
    T: kube::Resource,
{
    objects
        .into_iter()
        .map(|object| (object.name_any(), object))
        .filter(|(node, _)| nodes.get(&ObjectRef::new(node)).is_some())
        .collect()
}

/// The node named `node` from the cache, or the reason a session cannot talk to it.
pub(crate) fn node_object(nodes: &Store<Node>, node: &str) -> Result<Arc<Node>, String> {
    nodes
        .get(&ObjectRef::new(node))
        .ok_or_else(|| format!("node {node} is gone"))
}

/// Sleeps until `at`, or forever when there is nothing to wait for: the flush timer of a
/// session's `select!` loop.
pub(crate) async fn sleep_until_or_never(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The running sessions of one leadership term, by node name.
pub(crate) struct NodeSessions<T> {
    running: HashMap<String, Session<T>>,
}

struct Session<T> {
    latest: watch::Sender<Arc<T>>,
    stop: CancellationToken,
}

impl<T> Default for NodeSessions<T> {
    fn default() -> Self {
        Self {
            running: HashMap::new(),
        }
    }
}

impl<T> NodeSessions<T> {
    /// Brings the sessions in line with `wanted` (by node name): stops those whose node is
    /// no longer wanted (and forgets those that ended on their own, so they start again),
    /// hands each running one its object's latest version — waking it only when `moved`
    /// says the change matters to it — and starts one for each new node with `start`, on a
    /// child token of `term`.
    pub(crate) fn keep(
        &mut self,
        wanted: HashMap<String, Arc<T>>,
        term: &CancellationToken,
        moved: impl Fn(&T, &T) -> bool,
        mut start: impl FnMut(String, watch::Receiver<Arc<T>>, CancellationToken),
    ) {
        self.running.retain(|node, session| {
            let keep = wanted.contains_key(node) && !session.stop.is_cancelled();
            if !keep {
                session.stop.cancel();
            }
            keep
        });
        for (node, object) in wanted {
            if let Some(session) = self.running.get(&node) {
                session.latest.send_if_modified(|current| {
                    let changed = moved(current, &object);
                    *current = object;
                    changed
                });
                continue;
            }
            let (latest, receiver) = watch::channel(object);
            let stop = term.child_token();
            start(node.clone(), receiver, stop.clone());
            self.running.insert(node, Session { latest, stop });
        }
    }

    /// The nodes with a running session.
    #[cfg(test)]
    fn nodes(&self) -> std::collections::BTreeSet<&str> {
        self.running.keys().map(String::as_str).collect()
    }
}

/// The wait between a session's failed connection and its next attempt: 1 s, doubling
/// up to [`Reconnect::MAX`], and 1 s again after an attempt that lasted
/// [`Reconnect::STABLE`] (a connection that served for a while, then broke). Without that
/// reset a node whose agent had restarted a few times over hours waited a minute after
/// every later restart, its ImageList status stale all that time (CI: an entry withdrawn
/// from the kubelet node's list still in its status 30 s later).
pub(crate) struct Reconnect {
    next: Duration,
    /// When the current attempt began: the session's start, or the end of the last wait.
    attempt_since: Instant,
}

impl Default for Reconnect {
    fn default() -> Self {
        Self {
            next: Self::FIRST,
            attempt_since: Instant::now(),
        }
    }
}

impl Reconnect {
    const FIRST: Duration = Duration::from_secs(1);
    const MAX: Duration = Duration::from_secs(60);
    const STABLE: Duration = Duration::from_secs(30);

    /// The wait before the next attempt, and the one after it doubled.
    fn take(&mut self) -> Duration {
        let wait = self.upcoming();
        self.next = (wait * 2).min(Self::MAX);
        wait
    }

    /// Waits before the next attempt; `false` when `stop` came first (the session ends).
    pub(crate) async fn wait(&mut self, stop: &CancellationToken) -> bool {
        let wait = self.take();
        let waited = tokio::select! {
            () = stop.cancelled() => false,
            () = tokio::time::sleep(wait) => true,
        };
        self.attempt_since = Instant::now();
        waited
    }

    /// The wait the next failure will take, for the log line that reports the failure.
    pub(crate) fn upcoming(&self) -> Duration {
        if self.attempt_since.elapsed() >= Self::STABLE {
            Self::FIRST
        } else {
            self.next
        }
    }
}

#[cfg(test)]
#[path = "node_sessions_tests.rs"]
mod tests;

//! Moves each node's NodePodProbe to its agent and the results back, as the ImageList
//! distributor moves ImageLists: a session per NodePodProbe (while this replica leads)
//! pushes the spec (`ApplyPodProbes`) whenever its generation moves and whenever the
//! stream is reopened (a restarted agent has lost its probes), follows the agent's
//! state stream (`WatchPodProbes`) and writes the NodePodProbe status — gathered for a
//! moment so a burst makes one write. The session is the status' only writer while this
//! replica leads, so its writes replace the list whole.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt as _;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use stevedore_proto::stevedore::agent::v1::{PodProbeStateUpdate, WatchPodProbesRequest};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::wire::{States, apply_request, fold, status};
use crate::agents::AgentPool;
use crate::api::nodepodprobe::NodePodProbe;
use crate::caches::Stores;
use crate::imagelist::distributor::while_leading;

/// How long a first update waits for the ones right behind it, so they make one write.
const GATHER: Duration = Duration::from_millis(100);
/// How often the supervisor looks even without an event.
const SUPERVISE_EVERY: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What the probe sessions need.
#[derive(Clone)]
pub struct ProbeSessions {
    pub client: kube::Client,
    pub stores: Stores,
    pub agents: AgentPool,
}

struct Session {
    probes: watch::Sender<Arc<NodePodProbe>>,
    stop: CancellationToken,
}

impl ProbeSessions {
    /// The kinds of the shared caches the sessions read.
    pub const READS: &'static [&'static str] = &["Node", "NodePodProbe"];

    /// Runs until `shutdown`, acting only while `leadership` says so.
    pub async fn run(self, leadership: watch::Receiver<bool>, shutdown: CancellationToken) {
        while_leading(leadership, shutdown, |term| self.clone().lead(term)).await;
    }

    async fn lead(self, term: CancellationToken) {
        let mut changes = self.stores.changes.nodepodprobes.subscribe();
        tokio::select! {
            () = term.cancelled() => return,
            () = self.stores.sync.wait_synced(Self::READS) => {}
        }
        let mut sessions: HashMap<String, Session> = HashMap::new();
        loop {
            self.supervise(&mut sessions, &term);
            tokio::select! {
                () = term.cancelled() => return,
                _ = changes.recv() => {}
                () = tokio::time::sleep(SUPERVISE_EVERY) => {}
            }
        }
    }

    /// Starts a session per NodePodProbe of an existing node, stops the others, and hands
    /// each its object's latest version.
    fn supervise(&self, sessions: &mut HashMap<String, Session>, term: &CancellationToken) {
        let wanted: HashMap<String, Arc<NodePodProbe>> =
            (self.stores.nodepodprobes.state().into_iter())
                .filter(|p| {
                    self.stores
                        .nodes
                        .get(&ObjectRef::new(&p.name_any()))
                        .is_some()
                })
                .map(|p| (p.name_any(), p))
                .collect();
        sessions.retain(|node, session| {
            let keep = wanted.contains_key(node) && !session.stop.is_cancelled();
            if !keep {
                session.stop.cancel();
            }
            keep
        });
        for (node, probes) in wanted {
            if let Some(session) = sessions.get(&node) {
                session.probes.send_if_modified(|current| {
                    let changed = current.metadata.generation != probes.metadata.generation
                        || current.metadata.uid != probes.metadata.uid;
                    *current = probes.clone();
                    changed
                });
                continue;
            }
            let (tx, rx) = watch::channel(probes);
            let stop = term.child_token();
            let span = tracing::info_span!("podprobe_session", node);
            tokio::spawn(
                self.clone()
                    .session(node.clone(), rx, stop.clone())
                    .instrument(span),
            );
            sessions.insert(node, Session { probes: tx, stop });
        }
    }

    /// Keeps one node's agent in step with its NodePodProbe until `stop`.
    async fn session(
        self,
        node: String,
        mut probes: watch::Receiver<Arc<NodePodProbe>>,
        stop: CancellationToken,
    ) {
        let mut backoff = Duration::from_secs(1);
        loop {
            let result = tokio::select! {
                () = stop.cancelled() => return,
                result = self.serve(&node, &mut probes, &stop) => result,
            };
            match result {
                Ok(()) => return,
                Err(err) => {
                    tracing::info!(node, error = %err, retry_in = ?backoff, "probe session failed");
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// One connection: push, follow the stream, write status, re-push on spec changes.
    /// Returns `Ok` only when stopped.
    async fn serve(
        &self,
        node: &str,
        probes: &mut watch::Receiver<Arc<NodePodProbe>>,
        stop: &CancellationToken,
    ) -> Result<(), String> {
        let current = probes.borrow_and_update().clone();
        self.push(node, &current).await?;
        let mut stream = self.stream(node).await?;
        let mut states = States::new();
        let mut flush_at: Option<Instant> = None;
        loop {
            let flush = async {
                match flush_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                changed = probes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let current = probes.borrow_and_update().clone();
                    self.push(node, &current).await?;
                    flush_at.get_or_insert_with(|| Instant::now() + GATHER);
                }
                message = stream.message() => match message {
                    Ok(Some(update)) => {
                        fold(&mut states, &update);
                        flush_at.get_or_insert_with(|| Instant::now() + GATHER);
                    }
                    Ok(None) => return Err("the agent closed the probe stream".to_owned()),
                    Err(status) => return Err(format!("probe stream: {}", status.message())),
                },
                () = flush => {
                    flush_at = None;
                    let latest = probes.borrow().clone();
                    self.write_status(node, &latest, &states).await;
                }
            }
        }
    }

    async fn push(&self, node: &str, probes: &NodePodProbe) -> Result<(), String> {
        let node_object = self
            .stores
            .nodes
            .get(&ObjectRef::new(node))
            .ok_or_else(|| format!("node {node} is gone"))?;
        let request = apply_request(node, probes);
        self.agents
            .call(&node_object, "ApplyPodProbes", move |channel| {
                let request = request.clone();
                async move {
                    stevedore_proto::stevedore::agent::v1::probe_service_client::ProbeServiceClient::new(channel)
                        .apply_pod_probes(request)
                        .await
                }
            })
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }

    async fn stream(&self, node: &str) -> Result<tonic::Streaming<PodProbeStateUpdate>, String> {
        let node_object = self
            .stores
            .nodes
            .get(&ObjectRef::new(node))
            .ok_or_else(|| format!("node {node} is gone"))?;
        let mut client = self
            .agents
            .probes(&node_object)
            .await
            .map_err(|e| e.to_string())?;
        let request = WatchPodProbesRequest {
            node_name: node.to_owned(),
        };
        let stream = client
            .watch_pod_probes(request)
            .await
            .map_err(|s| format!("WatchPodProbes: {}", s.message()))?;
        Ok(stream.into_inner())
    }

    /// Writes the status `states` make of `probes`, unless it already says so.
    async fn write_status(&self, node: &str, probes: &NodePodProbe, states: &States) {
        let new = status(probes, states);
        if probes.status.as_ref() == Some(&new) {
            return;
        }
        let api: Api<NodePodProbe> = Api::all(self.client.clone());
        let patch = serde_json::json!({ "status": { "podProbeStatuses": new.pod_probe_statuses } });
        if let Err(err) = api
            .patch_status(node, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            tracing::warn!(node, error = %err, "could not write NodePodProbe status; the next update writes it");
        }
    }
}

//! Moves each node's NodePodProbe to its agent and the results back, as the ImageList
//! distributor moves ImageLists: a session per NodePodProbe (while this replica leads)
//! pushes the spec (`ApplyPodProbes`) whenever its generation moves and whenever the
//! stream is reopened (a restarted agent has lost its probes), follows the agent's
//! state stream (`WatchPodProbes`) and writes the NodePodProbe status — gathered for a
//! moment so a burst makes one write. The session is the status' only writer while this
//! replica leads, so its writes replace the list whole.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use stevedore_proto::stevedore::agent::v1::{PodProbeStateUpdate, WatchPodProbesRequest};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::wire::{States, apply_request, fold, status};
use crate::agents::AgentPool;
use crate::agents::node_sessions::{
    NodeSessions, Reconnect, node_object, on_existing_nodes, sleep_until_or_never, while_leading,
};
use crate::api::nodepodprobe::NodePodProbe;
use crate::caches::Stores;

/// How long a first update waits for the ones right behind it, so they make one write.
const GATHER: Duration = Duration::from_millis(100);
/// How often the supervisor looks even without an event.
const SUPERVISE_EVERY: Duration = Duration::from_secs(10);

/// What the probe sessions need.
#[derive(Clone)]
pub struct ProbeSessions {
    pub client: kube::Client,
    pub stores: Stores,
    pub agents: AgentPool,
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
        let mut sessions = NodeSessions::default();
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
    /// each its object's latest version (waking it when the spec moved).
    fn supervise(&self, sessions: &mut NodeSessions<NodePodProbe>, term: &CancellationToken) {
        let wanted = on_existing_nodes(self.stores.nodepodprobes.state(), &self.stores.nodes);
        sessions.keep(
            wanted,
            term,
            |current, latest| {
                current.metadata.generation != latest.metadata.generation
                    || current.metadata.uid != latest.metadata.uid
            },
            |node, probes, stop| {
                let span = tracing::info_span!("podprobe_session", node);
                tokio::spawn(self.clone().session(node, probes, stop).instrument(span));
            },
        );
    }

    /// Keeps one node's agent in step with its NodePodProbe until `stop`.
    async fn session(
        self,
        node: String,
        mut probes: watch::Receiver<Arc<NodePodProbe>>,
        stop: CancellationToken,
    ) {
        let mut reconnect = Reconnect::default();
        loop {
            let result = tokio::select! {
                () = stop.cancelled() => return,
                result = self.serve(&node, &mut probes, &stop) => result,
            };
            match result {
                Ok(()) => return,
                Err(err) => {
                    tracing::info!(node, error = %err, retry_in = ?reconnect.upcoming(), "probe session failed");
                }
            }
            if !reconnect.wait(&stop).await {
                return;
            }
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
                () = sleep_until_or_never(flush_at) => {
                    flush_at = None;
                    let latest = probes.borrow().clone();
                    self.write_status(node, &latest, &states).await;
                }
            }
        }
    }

    async fn push(&self, node: &str, probes: &NodePodProbe) -> Result<(), String> {
        let node_object = node_object(&self.stores.nodes, node)?;
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
        let node_object = node_object(&self.stores.nodes, node)?;
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

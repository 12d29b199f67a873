//! The ImageList distributor: one ImageList per Ready node (owned by the Node, so it goes
//! with it), and for each, a session that pushes the list to the node's agent
//! (`ApplyImageList`), follows its status stream (`WatchImageList`) and writes ImageList
//! status — one merge patch per burst of updates, at most one per `FLUSH_EVERY` per node.
//!
//! A list with nothing for the agent to learn (empty, showing no image, and not an
//! acknowledged older spec: `needs_session`) has no session, so nodes without an agent
//! cost nothing until something is asked of them.
//!
//! A session re-pushes whenever the spec's generation moves and whenever the stream is
//! reopened (an agent that restarted has lost its list); when the agent does not answer
//! for `RESPONSE_TIMEOUT`, the entries not yet done say so, and the session keeps retrying
//! with backoff. Sessions exist only while this replica leads: each term has a
//! cancellation token the sessions are children of, cancelled the moment leadership turns
//! `false` — even when the supervisor is in the middle of an apiserver call.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource as _, ResourceExt as _};
use stevedore_proto::stevedore::agent::v1::{
    ApplyImageListRequest, ImageListStatusUpdate, WatchImageListRequest,
};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::desired::{apply_request, needs_session};
use super::freshest::freshest;
use super::pull_events::{self, PullEventLimits};
use super::pull_secrets;
use super::status::{image_status, merged, status_patch, unreachable};
use crate::agents::AgentPool;
use crate::agents::node_sessions::{
    NodeSessions, Reconnect, node_object, on_existing_nodes, sleep_until_or_never, while_leading,
};
use crate::api::imagelist::ImageStatus;
use crate::api::{ImageList, ImageListSpec, ImageListStatus};
use crate::caches::Stores;
use crate::controller::events::EventSink;
use crate::workload::node::is_ready;

/// At most one status write per node per this long for updates from the agent's stream.
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// How long a first update waits for the ones right behind it (a present image goes
/// Pulling → Succeeded within milliseconds), so they make one write.
const GATHER: Duration = Duration::from_millis(50);
/// After this long without a working stream, unfinished entries say the agent is not
/// answering.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the supervisor looks at the nodes and lists even without an event.
const SUPERVISE_EVERY: Duration = Duration::from_secs(10);

/// What the distributor needs.
#[derive(Clone)]
pub struct Distributor {
    pub client: kube::Client,
    pub stores: Stores,
    pub agents: AgentPool,
    /// Where the agent's pull failures are recorded, on its Node.
    pub events: EventSink,
    /// Which pull failures were recorded lately, per node, across sessions and terms.
    pub failures: PullEventLimits,
}

/// When to write a status update that arrives at `now`: after [`GATHER`], and never within
/// [`FLUSH_EVERY`] of the last write — so an isolated change is written at once and a
/// stream of them at most once a second.
fn next_flush(now: Instant, last_write: Option<Instant>) -> Instant {
    let gathered = now + GATHER;
    last_write.map_or(gathered, |last| gathered.max(last + FLUSH_EVERY))
}

/// When to write the acknowledgement of a spec the agent accepted at `now`, given the
/// flush already `planned`: after [`GATHER`] (the agent's first results for the new spec
/// follow its acceptance within milliseconds and ride on the same write, one write a node
/// instead of two), and never held back by [`FLUSH_EVERY`] (spec changes are rare, and
/// the pull's first result should not wait behind them).
fn ack_flush(now: Instant, planned: Option<Instant>) -> Instant {
    let gathered = now + GATHER;
    planned.map_or(gathered, |at| at.min(gathered))
}

impl Distributor {
    /// The kinds of the shared caches the distributor reads.
    pub const READS: &'static [&'static str] = &["Node", "ImageList"];

    /// Runs until `shutdown`, acting only while `leadership` says so.
    pub async fn run(self, leadership: watch::Receiver<bool>, shutdown: CancellationToken) {
        while_leading(leadership, shutdown, |term| self.clone().lead(term)).await;
    }

    /// One term: once the caches have listed since it began, supervises until `term` is
    /// cancelled. Sessions are children of `term`, so they end with it.
    async fn lead(self, term: CancellationToken) {
        let mut lists = self.stores.changes.imagelists.subscribe();
        let mut nodes = self.stores.changes.nodes.subscribe();
        tokio::select! {
            () = term.cancelled() => return,
            () = self.stores.sync.wait_synced(Self::READS) => {}
        }
        let mut sessions = NodeSessions::default();
        loop {
            self.supervise(&mut sessions, &term).await;
            tokio::select! {
                () = term.cancelled() => return,
                _ = lists.recv() => {}
                _ = nodes.recv() => {}
                () = tokio::time::sleep(SUPERVISE_EVERY) => {}
            }
        }
    }

    /// Creates missing ImageLists, starts and stops sessions, hands sessions new specs.
    async fn supervise(&self, sessions: &mut NodeSessions<ImageList>, term: &CancellationToken) {
        let lists: Api<ImageList> = Api::all(self.client.clone());
        for node in self.stores.nodes.state() {
            let name = node.name_any();
            if is_ready(&node) && self.stores.imagelists.get(&ObjectRef::new(&name)).is_none() {
                let list = ImageList {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        owner_references: Some(vec![OwnerReference {
                            api_version: "v1".to_owned(),
                            kind: "Node".to_owned(),
                            name: name.clone(),
                            uid: node.uid().unwrap_or_default(),
                            controller: None,
                            block_owner_deletion: None,
                        }]),
                        ..ObjectMeta::default()
                    },
                    spec: ImageListSpec::default(),
                    status: None,
                };
                match lists.create(&PostParams::default(), &list).await {
                    Ok(_) => tracing::info!(node = name, "created the node's ImageList"),
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(err) => {
                        tracing::warn!(node = name, error = %err, "could not create the node's ImageList");
                    }
                }
            }
        }
        let mut wanted = on_existing_nodes(self.stores.imagelists.state(), &self.stores.nodes);
        wanted.retain(|_, list| needs_session(list));
        sessions.keep(
            wanted,
            term,
            |current, latest| {
                current.metadata.generation != latest.metadata.generation
                    || current.spec != latest.spec
            },
            |node, list, stop| {
                let span = tracing::info_span!("imagelist_session", node);
                tokio::spawn(self.clone().session(node, list, stop).instrument(span));
            },
        );
    }

    /// Keeps one node's agent in step with its ImageList until `stop`.
    async fn session(
        self,
        node: String,
        mut list: watch::Receiver<Arc<ImageList>>,
        stop: CancellationToken,
    ) {
        let mut reconnect = Reconnect::default();
        let mut last_ok = Instant::now();
        // What this session's last status write returned: newer than the cache for a
        // moment after each write (see `freshest`).
        let mut written: Option<ImageList> = None;
        loop {
            let result = tokio::select! {
                () = stop.cancelled() => return,
                result = self.serve(&node, &mut list, &stop, &mut last_ok, &mut written) => result,
            };
            match result {
                Ok(()) => return,
                Err(err) => {
                    if last_ok.elapsed() >= RESPONSE_TIMEOUT {
                        let message = format!("the agent on node {node} is not answering: {err}");
                        self.mark_unreachable(&node, &message, &mut written).await;
                        // Look again after another timeout, not on every retry.
                        last_ok = Instant::now();
                    }
                    tracing::debug!(node, error = %err, retry_in = ?reconnect.upcoming(), "image list session failed");
                }
            }
            if !reconnect.wait(&stop).await {
                return;
            }
        }
    }

    /// One connection: push, then follow the stream and write status, re-pushing on spec
    /// changes. Returns `Ok` only when stopped.
    async fn serve(
        &self,
        node: &str,
        list: &mut watch::Receiver<Arc<ImageList>>,
        stop: &CancellationToken,
        last_ok: &mut Instant,
        written: &mut Option<ImageList>,
    ) -> Result<(), String> {
        let node_object = node_object(&self.stores.nodes, node)?;
        let first = list.borrow_and_update().clone();
        let (request, refused) = self.prepare(&node_object, &first).await;
        // Written before the push, so a refused secret shows even while the agent is
        // unreachable; observedGeneration waits for the agent's acknowledgement.
        if !refused.is_empty() {
            self.write_status(node, &refused, None, true, written).await;
        }
        let mut pushed = self.push(&node_object, request).await?;
        let mut pushed_images: BTreeSet<String> = first.spec.images.keys().cloned().collect();
        let mut stream = self.status_stream(&node_object).await?;
        *last_ok = Instant::now();
        let mut pending = BTreeMap::new();
        // The first push's acknowledgement is a flush too: a spec that changed while no
        // session served it (an entry withdrawn while the last leader went, or while the
        // agent was away) is settled in status even when the agent's replay brings no
        // update, as it brings none for a list left empty. A status already right is not
        // written (`status_patch` finds no change).
        let mut flush_at: Option<Instant> = Some(ack_flush(Instant::now(), None));
        let mut last_write: Option<Instant> = None;
        // Whether `pending` holds updates from the stream (which count against
        // FLUSH_EVERY), not only an acknowledgement.
        let mut streamed = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                changed = list.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let current = list.borrow_and_update().clone();
                    if current.metadata.generation != Some(pushed) {
                        let (request, refused) = self.prepare(&node_object, &current).await;
                        pushed = self.push(&node_object, request).await?;
                        pushed_images = restart_added_entries(&current.spec, &pushed_images, refused, &mut pending);
                        // Every write carries observedGeneration = `pushed`: the flush is
                        // the acknowledgement.
                        flush_at = Some(ack_flush(Instant::now(), flush_at));
                    }
                }
                message = stream.message() => match message {
                    Ok(Some(update)) => {
                        *last_ok = Instant::now();
                        let status = image_status(&update);
                        let on_record = self.recorded_status(node, &update.image, written.as_ref());
                        self.record_failure(&node_object, &update.image, &status, on_record.as_ref());
                        pending.insert(update.image.clone(), status);
                        streamed = true;
                        flush_at.get_or_insert_with(|| next_flush(Instant::now(), last_write));
                    }
                    Ok(None) => return Err("the agent closed the status stream".to_owned()),
                    Err(status) => return Err(format!("status stream: {}", status.message())),
                },
                () = sleep_until_or_never(flush_at) => {
                    flush_at = None;
                    let pending = std::mem::take(&mut pending);
                    self.write_status(node, &pending, Some(pushed), true, written).await;
                    if std::mem::take(&mut streamed) {
                        last_write = Some(Instant::now());
                    }
                }
            }
        }
    }

    /// The agent's stream of image status updates.
    async fn status_stream(
        &self,
        node: &Node,
    ) -> Result<tonic::Streaming<ImageListStatusUpdate>, String> {
        let mut client = self.agents.images(node).await.map_err(|e| e.to_string())?;
        let stream = client
            .watch_image_list(WatchImageListRequest {
                node_name: node.name_any(),
            })
            .await
            .map_err(|s| format!("WatchImageList: {}", s.message()))?;
        Ok(stream.into_inner())
    }

    /// Records a pull failure as an Event on the node, unless `self.failures` says one
    /// was recorded lately. The Event is sent by a task of its own, so a slow apiserver does
    /// not hold up the status stream.
    fn record_failure(
        &self,
        node: &Node,
        image: &str,
        status: &ImageStatus,
        on_record: Option<&ImageStatus>,
    ) {
        let node_name = node.name_any();
        let now = Instant::now();
        let Some(note) = (self.failures).admit(&node_name, image, status, on_record, now) else {
            return;
        };
        tracing::info!(node = node_name, image, message = %status.message, "recording a pull failure");
        let events = self.events.clone();
        let regarding = node.object_ref(&());
        tokio::spawn(async move {
            // Unfolded: another image's failure on this node, or this image's new reason,
            // is an Event with its own note, not a count on the first one.
            events
                .warning_unfolded(&regarding, pull_events::REASON, pull_events::ACTION, note)
                .await;
        });
    }

    /// `image`'s status as the node's ImageList holds it: the newer of the cache and this
    /// session's last write.
    fn recorded_status(
        &self,
        node: &str,
        image: &str,
        written: Option<&ImageList>,
    ) -> Option<ImageStatus> {
        let cached = self.stores.imagelists.get(&ObjectRef::new(node));
        let list = freshest(cached.as_deref(), written)?;
        list.status?.images.remove(image)
    }

    /// The request for `list` (credentials from its pull secrets, without the images
    /// whose pull secret is refused) and the Failed statuses of the refused images, for
    /// the caller to write.
    async fn prepare(
        &self,
        node: &Node,
        list: &ImageList,
    ) -> (ApplyImageListRequest, BTreeMap<String, ImageStatus>) {
        let secrets = pull_secrets::read(&self.client, &list.spec).await;
        let (allowed, refused) = pull_secrets::without_refused(&list.spec, &secrets.refused);
        let allowed = ImageList {
            spec: allowed,
            ..list.clone()
        };
        let request = apply_request(&node.name_any(), &allowed, &secrets.credentials);
        (request, refused)
    }

    /// Sends a prepared list to the node's agent; returns its generation.
    async fn push(&self, node: &Node, request: ApplyImageListRequest) -> Result<i64, String> {
        let generation = request.generation;
        let images = request.images.len();
        self.agents
            .call(node, "ApplyImageList", move |channel| {
                let request = request.clone();
                async move {
                    stevedore_proto::stevedore::agent::v1::image_service_client::ImageServiceClient::new(channel)
                        .apply_image_list(request)
                        .await
                }
            })
            .await
            .map_err(|e| e.to_string())?;
        tracing::debug!(
            node = node.name_any(),
            generation,
            images,
            "pushed the image list"
        );
        Ok(generation)
    }

    /// Lands `pending` on the node's status. The patch is conditional on the
    /// resourceVersion it was computed from, so a stale cache never writes an old phase
    /// over a newer one; on a conflict the list is read again and the patch recomputed.
    /// It starts from the newer of the cache and `written` (this session's last write),
    /// and leaves in `written` what the apiserver returned.
    async fn write_status(
        &self,
        node: &str,
        pending: &BTreeMap<String, ImageStatus>,
        generation: Option<i64>,
        retry_on_conflict: bool,
        written: &mut Option<ImageList>,
    ) {
        let api: Api<ImageList> = Api::all(self.client.clone());
        let cached = self.stores.imagelists.get(&ObjectRef::new(node));
        let Some(mut list) = freshest(cached.as_deref(), written.as_ref()) else {
            return;
        };
        for _ in 0..3 {
            let current = list.status.clone().unwrap_or_default();
            let generation = generation.unwrap_or(current.observed_generation);
            let new = merged(&list.spec, &current, pending, generation);
            let Some(mut patch) = status_patch(&current, &new) else {
                return;
            };
            patch["metadata"] =
                serde_json::json!({ "resourceVersion": list.metadata.resource_version });
            match api
                .patch_status(node, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(landed) => {
                    *written = Some(landed);
                    return;
                }
                Err(kube::Error::Api(s)) if s.code == 409 && !retry_on_conflict => return,
                Err(kube::Error::Api(s)) if s.code == 409 => match api.get(node).await {
                    Ok(fresh) => list = fresh,
                    Err(err) => {
                        tracing::warn!(node, error = %err, "could not re-read the ImageList");
                        return;
                    }
                },
                Err(err) => {
                    tracing::warn!(node, error = %err, "could not write ImageList status");
                    return;
                }
            }
        }
        tracing::warn!(
            node,
            "ImageList status kept changing; the next update writes it"
        );
    }

    async fn mark_unreachable(&self, node: &str, message: &str, written: &mut Option<ImageList>) {
        let cached = self.stores.imagelists.get(&ObjectRef::new(node));
        let Some(list) = freshest(cached.as_deref(), written.as_ref()) else {
            return;
        };
        let current: ImageListStatus = list.status.clone().unwrap_or_default();
        let marked = unreachable(&list.spec, &current, message);
        if !marked.is_empty() {
            // On a conflict, the next timeout marks again.
            self.write_status(node, &marked, None, false, written).await;
        }
    }
}

/// After a spec change was pushed: the images now pushed. Entries taken out of spec leave
/// status now, not at the next update; entries (re)added start from Waiting, not from a
/// stale old status; a `refused` image is Failed, not Waiting.
fn restart_added_entries(
    spec: &ImageListSpec,
    pushed_before: &BTreeSet<String>,
    refused: BTreeMap<String, ImageStatus>,
    pending: &mut BTreeMap<String, ImageStatus>,
) -> BTreeSet<String> {
    for image in spec.images.keys() {
        if !pushed_before.contains(image) {
            pending.insert(image.clone(), ImageStatus::default());
        }
    }
    pending.extend(refused);
    spec.images.keys().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_writes_are_prompt_when_isolated_and_at_most_one_a_second() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // (update arrives, last write, expected flush)
        let cases = [
            (t0, None, t0 + GATHER),
            (t0 + ms(5_000), Some(t0), t0 + ms(5_000) + GATHER),
            (t0 + ms(200), Some(t0), t0 + FLUSH_EVERY),
            (t0 + ms(990), Some(t0), t0 + ms(990) + GATHER),
        ];
        for (now, last, want) in cases {
            assert_eq!(next_flush(now, last), want, "update at {:?}", now - t0);
        }
    }

    #[test]
    fn an_acknowledgement_is_gathered_briefly_and_never_throttled() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // (spec accepted, flush already planned, expected flush)
        let cases = [
            // Nothing pending: the results that follow within GATHER share the write.
            (t0, None, t0 + GATHER),
            // Stream updates held back by FLUSH_EVERY go out with the acknowledgement.
            (t0, Some(t0 + ms(900)), t0 + GATHER),
            // A flush due sooner stays: it carries the acknowledgement too.
            (t0, Some(t0 + ms(10)), t0 + ms(10)),
        ];
        for (now, planned, want) in cases {
            assert_eq!(ack_flush(now, planned), want, "planned {planned:?}");
        }
    }
}

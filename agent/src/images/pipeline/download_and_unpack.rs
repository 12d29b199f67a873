//! The body of a pull, pipelined as containerd's unpacker does it: the config and the
//! layers download (at most [`PARALLEL_BLOBS`] at once) while one lane reads the config
//! and unpacks each layer as soon as `unpack_schedule` lets it, so unpacking the lower
//! layers overlaps downloading the upper ones. Label updates and the writing of the
//! manifest run beside the lane, off its path. Everything runs in the pull's own future:
//! an error ends it at once, and dropping it (timeout, shutdown) stops the downloads,
//! the unpack and the writes alike.

use std::collections::HashMap;

use futures::{
    FutureExt as _, StreamExt as _, TryFutureExt as _,
    future::BoxFuture,
    stream::{self, FuturesUnordered},
};

use stevedore_parsers::oci::{self, Descriptor, MAX_CONFIG_BYTES};

use super::unpack_schedule::{Schedule, Step};
use crate::images::{
    download::{Arrival, PARALLEL_BLOBS, PullError, Target, download},
    progress::Report,
    registry::Registry,
    store::{ImageStore, LeaseId, source_label},
};

/// The layers' diff IDs (from the config) and chain IDs (their snapshots' names).
struct Layers {
    diff_ids: Vec<String>,
    chain: Vec<String>,
}

/// What a step of the unpack lane found.
enum Finished {
    Layers(Layers),
    /// A layer was unpacked (`true`) or its snapshot was there already.
    Unpacked(bool),
}

type Work<'a, T> = BoxFuture<'a, Result<T, PullError>>;

/// Downloads `blobs` (the config, then the layers in manifest order; progress is
/// reported by these indices) and unpacks the layers. `parents` (writing the manifest
/// and index, which reference the blobs) starts once every blob is committed. A blob
/// that was in the store already gets the pull's source label merged into its own.
pub async fn download_and_unpack<'a, R: Registry, S: ImageStore>(
    registry: &'a R,
    store: &'a S,
    target: Target<'a>,
    progress: &'a impl Report,
    blobs: &'a [Descriptor],
    parents: Work<'a, ()>,
) -> Result<(), PullError> {
    let Some((config, layers)) = blobs.split_first() else {
        return parents.await;
    };
    let mut downloads = download_all(registry, store, target, progress, blobs);
    // Holds at most one step: each layer is applied on top of the one below it.
    let mut lane: FuturesUnordered<Work<'a, Finished>> = FuturesUnordered::new();
    // Writes no step waits for.
    let mut beside: FuturesUnordered<Work<'a, ()>> = FuturesUnordered::new();
    let mut parents = Some(parents);
    let mut schedule = Schedule::new(layers.len());
    let mut known: Option<Layers> = None;
    // Until a layer has to be unpacked, each is first looked for: an image sharing the
    // lower layers unpacked them already. Above one that was missing none can exist
    // (a snapshot's parent exists before it), so none is asked about.
    let mut look_first = true;
    while !schedule.complete() || !beside.is_empty() {
        if let Some(step) = schedule.start() {
            lane.push(lane_step(
                store,
                target,
                (config, layers),
                step,
                known.as_ref(),
                look_first,
            ));
        }
        tokio::select! {
            Some(arrived) = downloads.next() => {
                let (blob, arrival) = arrived?;
                tracing::debug!(blob, ?arrival, "downloaded");
                if arrival == Arrival::Present {
                    beside.push(merge_source(store, target, &blobs[blob]).boxed());
                }
                record_download(&mut schedule, blob, progress);
                // Parents are written after their children, so garbage collection
                // keeps the whole tree from the image record down.
                if schedule.all_downloaded() {
                    beside.extend(parents.take());
                }
            }
            Some(finished) = lane.next() => {
                match finished? {
                    Finished::Layers(layers) => {
                        if let Some(top) = layers.chain.last() {
                            beside.push(label_config(store, config, top.clone()).boxed());
                        }
                        known = Some(layers);
                    }
                    Finished::Unpacked(unpacked) => {
                        let n = schedule.unpacked();
                        tracing::debug!(layer = n, unpacked, "layer in place");
                        if let (true, Some(known)) = (unpacked, &known) {
                            let diff_id = known.diff_ids[n].clone();
                            beside.push(label_uncompressed(store, &layers[n], diff_id).boxed());
                        }
                        look_first &= !unpacked;
                    }
                }
                schedule.finished();
            }
            Some(written) = beside.next() => written?,
            // The schedule starts a step whenever the lane is free and may run one, and
            // some step may run once every blob is in, so a branch is always pending.
            else => {
                let message = "the pull stopped with nothing left to wait for before it was complete";
                return Err(PullError::Format(message.to_owned()));
            }
        }
    }
    Ok(())
}

/// The downloads of `blobs`, [`PARALLEL_BLOBS`] at a time, each yielding its index.
fn download_all<'a, R: Registry, S: ImageStore>(
    registry: &'a R,
    store: &'a S,
    target: Target<'a>,
    progress: &'a impl Report,
    blobs: &'a [Descriptor],
) -> impl futures::Stream<Item = Result<(usize, Arrival), PullError>> + Send + 'a {
    // Futures built in a loop, not a closure: a closure's borrowed future is not
    // provably `Send` for every lifetime (rust-lang/rust#102211).
    let mut fetches = Vec::with_capacity(blobs.len());
    for (index, blob) in blobs.iter().enumerate() {
        let fetch = download(registry, store, target, progress, index, blob);
        fetches.push(fetch.map_ok(move |arrival| (index, arrival)));
    }
    stream::iter(fetches).buffer_unordered(PARALLEL_BLOBS)
}

/// Tells the schedule that `blob` is in, and reports the pull's phase when that moved it.
fn record_download(schedule: &mut Schedule, blob: usize, progress: &impl Report) {
    let was = schedule.phase();
    schedule.downloaded(blob);
    let phase = schedule.phase();
    if phase != was {
        progress.report(&mut |p| p.phase = phase);
    }
}

/// The work of one lane step: reading the config, or unpacking layer `n` of `layers`
/// (whose diff and chain IDs the config gave, in `known`).
fn lane_step<'a, S: ImageStore>(
    store: &'a S,
    target: Target<'a>,
    (config, layers): (&'a Descriptor, &'a [Descriptor]),
    step: Step,
    known: Option<&Layers>,
    look_first: bool,
) -> Work<'a, Finished> {
    match (step, known) {
        (Step::ReadConfig, _) => read_layers(store, config, layers.len())
            .map_ok(Finished::Layers)
            .boxed(),
        (Step::Unpack(n), Some(known)) => {
            let parent = n.checked_sub(1).map(|p| known.chain[p].clone());
            let unpack = LayerUnpack {
                layer: &layers[n],
                diff_id: known.diff_ids[n].clone(),
                parent,
                chain_id: known.chain[n].clone(),
            };
            unpack_layer(store, target.lease, unpack, look_first)
                .map_ok(Finished::Unpacked)
                .boxed()
        }
        // The schedule reads the config before any unpack; were it ever not so,
        // the pull fails rather than the agent.
        (Step::Unpack(n), None) => {
            let message = format!("layer {n} was to be unpacked before the image config was read");
            futures::future::ready(Err(PullError::Format(message))).boxed()
        }
    }
}

async fn read_layers<S: ImageStore>(
    store: &S,
    config: &Descriptor,
    layers: usize,
) -> Result<Layers, PullError> {
    let config = store.read_blob(&config.digest, MAX_CONFIG_BYTES).await?;
    let diff_ids = oci::diff_ids(&config, layers)?;
    let chain = oci::chain_ids(&diff_ids);
    Ok(Layers { diff_ids, chain })
}

/// Labels the config with the image's top snapshot, which garbage collection then keeps
/// for as long as the config. Done as soon as the config is read, not after the unpack
/// as containerd does, to keep it off the pull's path: the chain ID follows from the
/// config's own (verified) content, and a reference to a snapshot not (yet) there holds
/// nothing.
async fn label_config<S: ImageStore>(
    store: &S,
    config: &Descriptor,
    top: String,
) -> Result<(), PullError> {
    let key = format!("containerd.io/gc.ref.snapshot.{}", store.snapshotter());
    let labels = HashMap::from([(key, top)]);
    Ok(store.label_blob(&config.digest, labels).await?)
}

/// Records the layer's uncompressed digest, once the unpack has checked it.
async fn label_uncompressed<S: ImageStore>(
    store: &S,
    layer: &Descriptor,
    diff_id: String,
) -> Result<(), PullError> {
    let labels = HashMap::from([("containerd.io/uncompressed".to_owned(), diff_id)]);
    Ok(store.label_blob(&layer.digest, labels).await?)
}

/// Adds the pull's repository to the source label of a blob that was there already.
async fn merge_source<S: ImageStore>(
    store: &S,
    target: Target<'_>,
    blob: &Descriptor,
) -> Result<(), PullError> {
    let digests = std::iter::once(blob.digest.as_str());
    Ok(source_label::label(store, target.image, digests).await?)
}

/// One layer to unpack: owned names, so the step does not borrow the lane's state.
struct LayerUnpack<'a> {
    layer: &'a Descriptor,
    diff_id: String,
    parent: Option<String>,
    chain_id: String,
}

/// Unpacks the layer, unless `look_first` and its snapshot exists; whether it unpacked.
async fn unpack_layer<S: ImageStore>(
    store: &S,
    lease: &LeaseId,
    unpack: LayerUnpack<'_>,
    look_first: bool,
) -> Result<bool, PullError> {
    if look_first && store.has_snapshot(lease, &unpack.chain_id).await? {
        return Ok(false);
    }
    let parent = unpack.parent.as_deref();
    store
        .unpack_layer(
            lease,
            unpack.layer,
            &unpack.diff_id,
            parent,
            &unpack.chain_id,
        )
        .await?;
    Ok(true)
}

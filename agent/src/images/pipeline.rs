//! The body of a pull, pipelined as containerd's unpacker does it: the config and the
//! layers download (at most [`PARALLEL_BLOBS`] at once) while one lane reads the config
//! and unpacks each layer as soon as [`unpack_schedule`](super::unpack_schedule) lets
//! it, so unpacking the lower layers overlaps downloading the upper ones. Everything
//! runs in the pull's own future: an error ends it at once, and dropping it (timeout,
//! shutdown) stops the downloads and the unpack alike.

use std::collections::HashMap;

use futures::{
    FutureExt as _, StreamExt as _, TryFutureExt as _,
    future::BoxFuture,
    stream::{self, FuturesUnordered},
};

use super::{
    download::{PARALLEL_BLOBS, Target, download},
    oci::{self, Descriptor, MAX_CONFIG_BYTES},
    progress::Report,
    pull::PullError,
    registry::Registry,
    store::{ImageStore, LeaseId},
    unpack_schedule::{Schedule, Step},
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

/// Downloads `blobs` (the config, then the layers in manifest order; progress is
/// reported by these indices) and unpacks the layers; returns the top layer's chain ID,
/// `None` for an image without layers.
pub async fn download_and_unpack<R: Registry, S: ImageStore>(
    registry: &R,
    store: &S,
    target: Target<'_>,
    progress: &impl Report,
    blobs: &[Descriptor],
) -> Result<Option<String>, PullError> {
    let Some((config, layers)) = blobs.split_first() else {
        return Ok(None);
    };
    // Futures built in a loop, not a closure: a closure's borrowed future is not
    // provably `Send` for every lifetime (rust-lang/rust#102211).
    let mut fetches = Vec::with_capacity(blobs.len());
    for (index, blob) in blobs.iter().enumerate() {
        let fetch = download(registry, store, target, progress, index, blob);
        fetches.push(fetch.map_ok(move |()| index));
    }
    let mut downloads = stream::iter(fetches).buffer_unordered(PARALLEL_BLOBS);
    // Holds at most one step: each layer is applied on top of the one below it.
    let mut lane: FuturesUnordered<BoxFuture<'_, Result<Finished, PullError>>> =
        FuturesUnordered::new();
    let mut schedule = Schedule::new(layers.len());
    let mut known: Option<Layers> = None;
    // Until a layer has to be unpacked, each is first looked for: an image sharing the
    // lower layers unpacked them already. Above one that was missing none can exist
    // (a snapshot's parent exists before it), so none is asked about.
    let mut look_first = true;
    while !schedule.complete() {
        if let Some(step) = schedule.start() {
            lane.push(match (step, &known) {
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
                (Step::Unpack(_), None) => unreachable!("layers unpack after the config is read"),
            });
        }
        tokio::select! {
            Some(blob) = downloads.next() => {
                let was = schedule.phase();
                let blob = blob?;
                tracing::debug!(blob, "downloaded");
                schedule.downloaded(blob);
                let phase = schedule.phase();
                if phase != was {
                    progress.report(&mut |p| p.phase = phase);
                }
            }
            Some(finished) = lane.next() => {
                match finished? {
                    Finished::Layers(layers) => known = Some(layers),
                    Finished::Unpacked(unpacked) => {
                        tracing::debug!(layer = schedule.unpacked(), unpacked, "layer in place");
                        look_first &= !unpacked;
                    }
                }
                schedule.finished();
            }
            // The schedule starts a step whenever the lane is free and may run one, and
            // some step may run once every blob is in, so a branch is always pending.
            else => unreachable!("a pull with nothing to wait for before it is complete"),
        }
    }
    Ok(known.and_then(|k| k.chain.last().cloned()))
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
    if look_first && store.has_snapshot(&unpack.chain_id).await? {
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
    let labels = HashMap::from([("containerd.io/uncompressed".to_owned(), unpack.diff_id)]);
    store.label_blob(&unpack.layer.digest, labels).await?;
    Ok(true)
}

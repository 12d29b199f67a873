//! One blob of a pull, from the registry into containerd's content store: skipped when
//! committed already, resumed from what an interrupted download left in the store (a
//! `Range` request for the rest), restarted when the registry sends the whole blob
//! anyway or when the resumed blob fails the store's check of its digest and size.
//! Progress counts the bytes in the store, resumed ones included. A blob this pull
//! commits carries the pull's labels from its commit on, which saves a label update.

use std::collections::HashMap;

use futures::StreamExt as _;
use tonic::Code;

use stevedore_parsers::oci::Descriptor;

use super::pull_error::PullError;
use crate::images::{
    progress::Report,
    registry::{Auth, Registry, body},
    store::{BlobWriter, ImageStore, LeaseId, StoreError},
};
use crate::reference::Reference;

/// Blobs downloaded at once within one pull, as CRI's default: on the 5-layer benchmark
/// image one at a time was slower, and 2, 4 or 6 no faster (docs/pull-engine.md).
pub const PARALLEL_BLOBS: usize = 3;

/// What a pull's downloads share: the image, the caller's credential, the lease and
/// the labels of the blobs the pull commits.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    pub image: &'a Reference,
    pub auth: &'a Auth,
    pub lease: &'a LeaseId,
    pub labels: &'a HashMap<String, String>,
}

/// How a blob came to be in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// This pull committed it, with [`Target::labels`].
    Written,
    /// It was there, or another pull committed it meanwhile: its labels are as others
    /// left them.
    Present,
}

/// Downloads `blob` (number `index` of the pull's progress) into the store.
pub async fn download<R: Registry, S: ImageStore>(
    registry: &R,
    store: &S,
    target: Target<'_>,
    progress: &impl Report,
    index: usize,
    blob: &Descriptor,
) -> Result<Arrival, PullError> {
    let set_done = |done: u64| {
        progress.report(&mut |p| {
            if let Some(b) = p.blobs.get_mut(index) {
                b.done = done;
            }
        });
    };
    if store.has_blob(target.lease, &blob.digest).await? {
        set_done(blob.size);
        return Ok(Arrival::Present);
    }
    // Another pull (of another image sharing this blob) may commit it between the check
    // above and any step below: containerd then refuses the write, opening it included.
    match fetch_and_commit(registry, store, target, blob, &set_done).await {
        Err(PullError::Store(error)) if error.code == Code::AlreadyExists => {
            hold_existing_blob(store, target.lease, &blob.digest).await?;
            set_done(blob.size);
            Ok(Arrival::Present)
        }
        other => other.map(|()| Arrival::Written),
    }
}

/// Opens the blob's ingest, fetches what it lacks and commits it; a resumed ingest that
/// fails the commit's check is downloaded whole once.
async fn fetch_and_commit<R: Registry, S: ImageStore>(
    registry: &R,
    store: &S,
    target: Target<'_>,
    blob: &Descriptor,
    set_done: &impl Fn(u64),
) -> Result<(), PullError> {
    let writer = store.open_writer(target.lease, blob).await?;
    let resumed = writer.offset() > 0;
    let written = write(registry, target, blob, writer, set_done).await;
    if resumed && matches!(&written, Err(PullError::Store(e)) if e.code == Code::FailedPrecondition)
    {
        // What the interrupted download left was not this blob's beginning after all.
        tracing::info!(digest = %blob.digest, "the resumed blob failed its check; downloading it whole");
        let mut writer = store.open_writer(target.lease, blob).await?;
        writer.restart();
        return write(registry, target, blob, writer, set_done).await;
    }
    written
}

/// Fetches what `writer` lacks of `blob` and commits it.
async fn write<R: Registry, W: BlobWriter>(
    registry: &R,
    target: Target<'_>,
    blob: &Descriptor,
    mut writer: W,
    set_done: &impl Fn(u64),
) -> Result<(), PullError> {
    let mut done = writer.offset();
    if done > 0 {
        tracing::debug!(digest = %blob.digest, offset = done, "resuming an interrupted download");
    }
    // What the store holds counts at once, also when it is the whole blob and nothing
    // is fetched before the commit.
    set_done(done);
    if done < blob.size || blob.size == 0 {
        let fetched = registry
            .fetch_blob(target.image, blob, target.auth, done)
            .await?;
        if fetched.offset != done {
            // The registry ignored the range: the whole blob comes again.
            writer.restart();
            done = fetched.offset;
        }
        let named = format!("{}@{}", target.image.repository(), blob.digest);
        let mut body = body::verified_from(fetched.stream, blob, done, &named)?;
        set_done(done);
        while let Some(chunk) = body.next().await {
            let chunk = chunk?;
            done += chunk.len() as u64;
            writer.write(chunk).await?;
            set_done(done);
        }
    }
    writer.commit(target.labels.clone()).await?;
    Ok(())
}

/// Another pull (of another image sharing this blob) committed it first: the content is
/// there, and this pull's lease must hold it too until the image record references it.
pub async fn hold_existing_blob<S: ImageStore>(
    store: &S,
    lease: &LeaseId,
    digest: &str,
) -> Result<(), StoreError> {
    if store.has_blob(lease, digest).await? {
        Ok(())
    } else {
        Err(StoreError {
            operation: format!("write {digest}"),
            code: Code::Unavailable,
            message: "reported as existing but not found".to_owned(),
        })
    }
}

//! One pull, done the way containerd's client does it, so CRI (and kubelet) see the
//! result as their own: resolve, download blobs into the content store under a lease
//! and unpack each layer into a snapshot named by its chain ID as soon as it and the
//! layers below it are in (`download_and_unpack`), label parents to children for GC, label the
//! config with the top snapshot, label every blob with the registry it came from, then
//! create the image records CRI expects. The records are created last, and
//! all or none, so a pull that fails or is cancelled leaves none; the
//! lease is released however the pull ends. Nothing a registry sends is trusted: every
//! document is read under a size cap and every body checked against the size and digest
//! of its descriptor before it is used or committed.

use std::collections::HashMap;

use tonic::Code;

use futures::FutureExt as _;
use stevedore_parsers::oci::{self, Descriptor, FormatError, MAX_CONFIG_BYTES, MAX_MANIFEST_BYTES};

use super::download_and_unpack::download_and_unpack;
use crate::images::{
    download::{Target, hold_existing_blob},
    progress::{BlobProgress, Phase, Report},
    registry::{Auth, FetchedManifest, Registry, RegistryError},
    store::{
        BlobWriter as _, CRI_IMAGE_LABEL, ImageRecord, ImageStore, LeaseId, StoreError,
        inventory::{self, record_name},
        records, source_label,
    },
};
use crate::reference::Reference;

pub use crate::images::download::PARALLEL_BLOBS;
/// Kept at this path for the callers that handle a pull's outcome.
pub use crate::images::download::PullError;

/// What a successful pull produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PulledImage {
    /// Config digest, CRI's image ID.
    pub image_id: String,
    /// `repository@manifest-digest`.
    pub repo_digest: String,
    /// `repository:tag`, unless the reference named only a digest.
    pub repo_tag: Option<String>,
    /// What the image records point at (the index or the manifest).
    pub target: Descriptor,
}

/// The image record names CRI creates for a pull, in its order: image ID, repo tag,
/// repo digest.
pub fn record_names(image: &PulledImage) -> Vec<String> {
    let mut names = vec![image.image_id.clone()];
    names.extend(image.repo_tag.clone());
    names.push(image.repo_digest.clone());
    names
}

/// The image the node has under `image`'s record, when its manifest is readable: what a
/// pull of it would return.
pub async fn cached<S: ImageStore>(store: &S, image: &Reference) -> Option<PulledImage> {
    let record = store.get_image(&record_name(image)).await.ok()??;
    let info = inventory::describe_record(store, &record).await.ok()?;
    Some(PulledImage {
        image_id: info.id,
        repo_digest: image.repo_digest(&record.target.digest),
        repo_tag: image.repo_tag(),
        target: record.target,
    })
}

/// Pulls `image` into `store`, reporting progress on `progress`.
#[tracing::instrument(skip_all, fields(image = %image))]
pub async fn pull<R: Registry, S: ImageStore>(
    registry: &R,
    store: &S,
    image: &Reference,
    auth: &Auth,
    progress: &impl Report,
) -> Result<PulledImage, PullError> {
    progress.report(&mut |p| p.phase = Phase::Resolving);
    let resolved = resolve(registry, image, auth).await?;
    // Kubelet's Always: the name is resolved at the registry every time, and the image
    // pulled only when the node lacks that digest. Going through the blobs and snapshots
    // of an image that is there wrote ~15 metadata transactions into containerd for
    // nothing (an ImagePullJob re-pulling over 500 simulated nodes: 2.7x its floor).
    if let Some(cached) = cached(store, image).await
        && cached.target.digest == resolved.target.digest
    {
        tracing::debug!(target = %resolved.target.digest, "the node has this digest; not pulling");
        progress.report(&mut |p| p.phase = Phase::Done);
        return Ok(cached);
    }
    let manifest = oci::parse_manifest(&resolved.manifest.body)?;
    tracing::debug!(target = %resolved.target.digest, layers = manifest.layers.len(), "resolved");

    let lease = LeaseGuard::new(store.clone(), store.create_lease().await?);
    let result = pull_resolved(
        registry,
        store,
        image,
        auth,
        progress,
        &resolved,
        &manifest,
        lease.id(),
    )
    .await;
    lease.release().await;
    result
}

struct Resolved {
    target: Descriptor,
    /// The index, when the reference resolved to one.
    index: Option<FetchedManifest>,
    manifest: FetchedManifest,
}

async fn resolve<R: Registry>(
    registry: &R,
    image: &Reference,
    auth: &Auth,
) -> Result<Resolved, PullError> {
    let top = registry
        .fetch_manifest(image, image.manifest_reference(), auth)
        .await?;
    let media_type = top.descriptor.media_type.clone();
    if oci::is_manifest(&media_type) {
        return Ok(Resolved {
            target: top.descriptor.clone(),
            index: None,
            manifest: top,
        });
    }
    if !oci::is_index(&media_type) {
        return Err(FormatError::UnsupportedMediaType { media_type }.into());
    }
    let chosen = oci::select_platform(&top.body, oci::Platform::host())?;
    check_size(image, "manifest", &chosen, MAX_MANIFEST_BYTES)?;
    let mut manifest = registry.fetch_manifest(image, &chosen.digest, auth).await?;
    if manifest.descriptor.size != chosen.size {
        return Err(RegistryError::Corrupt {
            reference: format!("{}@{}", image.repository(), chosen.digest),
            detail: format!(
                "the manifest has {} bytes, but the index says {}",
                manifest.descriptor.size, chosen.size
            ),
        }
        .into());
    }
    manifest.descriptor.media_type = chosen.media_type;
    Ok(Resolved {
        target: top.descriptor.clone(),
        index: Some(top),
        manifest,
    })
}

#[allow(clippy::too_many_arguments)]
async fn pull_resolved<R: Registry, S: ImageStore>(
    registry: &R,
    store: &S,
    image: &Reference,
    auth: &Auth,
    progress: &impl Report,
    resolved: &Resolved,
    manifest: &oci::Manifest,
    lease: &LeaseId,
) -> Result<PulledImage, PullError> {
    // The config is read into memory to unpack: refused before a byte is fetched if its
    // descriptor is over the cap (and the download holds it to that size).
    check_size(image, "image config", &manifest.config, MAX_CONFIG_BYTES)?;
    let blobs: Vec<Descriptor> = std::iter::once(manifest.config.clone())
        .chain(manifest.layers.iter().cloned())
        .collect();
    progress.report(&mut |p| {
        p.phase = Phase::Downloading;
        p.blobs = blobs
            .iter()
            .map(|b| BlobProgress {
                digest: b.digest.clone(),
                media_type: b.media_type.clone(),
                done: 0,
                total: b.size,
            })
            .collect();
    });
    // As containerd's pull: every blob names the registry and repository it came from.
    let labels = source_label::for_new_blob(image);
    let target = Target {
        image,
        auth,
        lease,
        labels: &labels,
    };
    let parents = write_parents(store, target, resolved, manifest).boxed();
    download_and_unpack(registry, store, target, progress, &blobs, parents).await?;

    let pulled = PulledImage {
        image_id: manifest.config.digest.clone(),
        repo_digest: image.repo_digest(&resolved.target.digest),
        repo_tag: image.repo_tag(),
        target: resolved.target.clone(),
    };
    let labels = HashMap::from([(CRI_IMAGE_LABEL.0.to_owned(), CRI_IMAGE_LABEL.1.to_owned())]);
    let records = record_names(&pulled)
        .into_iter()
        .map(|name| ImageRecord {
            name,
            target: pulled.target.clone(),
            labels: labels.clone(),
        })
        .collect();
    records::put_all(store, records).await?;
    progress.report(&mut |p| p.phase = Phase::Done);
    tracing::info!(image_id = %pulled.image_id, "pulled");
    Ok(pulled)
}

/// Refuses `blob` (a document the agent reads into memory) when its descriptor says it
/// is larger than `limit`.
fn check_size(
    image: &Reference,
    what: &'static str,
    blob: &Descriptor,
    limit: u64,
) -> Result<(), RegistryError> {
    if blob.size > limit {
        return Err(RegistryError::TooLarge {
            what,
            reference: format!("{}@{}", image.repository(), blob.digest),
            limit,
        });
    }
    Ok(())
}

/// Writes the manifest and the index, if any, each labelled to its children.
async fn write_parents<S: ImageStore>(
    store: &S,
    target: Target<'_>,
    resolved: &Resolved,
    manifest: &oci::Manifest,
) -> Result<(), PullError> {
    let mut manifest_labels = HashMap::from([(
        "containerd.io/gc.ref.content.config".to_owned(),
        manifest.config.digest.clone(),
    )]);
    for (i, layer) in manifest.layers.iter().enumerate() {
        manifest_labels.insert(
            format!("containerd.io/gc.ref.content.l.{i}"),
            layer.digest.clone(),
        );
    }
    let m = &resolved.manifest;
    write_small(store, target, &m.descriptor, &m.body, manifest_labels).await?;
    if let Some(index) = &resolved.index {
        let labels = HashMap::from([(
            "containerd.io/gc.ref.content.m.0".to_owned(),
            m.descriptor.digest.clone(),
        )]);
        write_small(store, target, &index.descriptor, &index.body, labels).await?;
    }
    Ok(())
}

/// Writes a manifest or index with its GC labels and the pull's own, or adds them to
/// it if already present.
async fn write_small<S: ImageStore>(
    store: &S,
    target: Target<'_>,
    blob: &Descriptor,
    body: &bytes::Bytes,
    labels: HashMap<String, String>,
) -> Result<(), StoreError> {
    let lease = target.lease;
    if !store.has_blob(lease, &blob.digest).await? {
        let written = async {
            let mut writer = store.open_writer(lease, blob).await?;
            writer.write(body.clone()).await?;
            let mut all = labels.clone();
            all.extend(target.labels.clone());
            writer.commit(all).await
        }
        .await;
        match written {
            Err(error) if error.code == Code::AlreadyExists => {
                hold_existing_blob(store, lease, &blob.digest).await?;
            }
            other => return other,
        }
    }
    store.label_blob(&blob.digest, labels).await?;
    source_label::label(store, target.image, [blob.digest.as_str()]).await
}

/// Deletes the lease when the pull ends, including when its future is dropped
/// (timeout, shutdown), in which case the deletion runs as a task of its own.
struct LeaseGuard<S: ImageStore> {
    store: S,
    lease: LeaseId,
    armed: bool,
}

impl<S: ImageStore> LeaseGuard<S> {
    fn new(store: S, lease: LeaseId) -> Self {
        Self {
            store,
            lease,
            armed: true,
        }
    }

    fn id(&self) -> &LeaseId {
        &self.lease
    }

    async fn release(mut self) {
        self.armed = false;
        delete_lease(&self.store, self.lease.clone()).await;
    }
}

async fn delete_lease<S: ImageStore>(store: &S, lease: LeaseId) {
    if let Err(error) = store.delete_lease(&lease).await {
        tracing::warn!(lease = %lease.0, %error, "releasing a pull lease; it expires in a day");
    }
}

impl<S: ImageStore> Drop for LeaseGuard<S> {
    fn drop(&mut self) {
        if self.armed
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let (store, lease) = (self.store.clone(), self.lease.clone());
            runtime.spawn(async move { delete_lease(&store, lease).await });
        }
    }
}

#[cfg(test)]
#[path = "pull_tests.rs"]
mod tests;

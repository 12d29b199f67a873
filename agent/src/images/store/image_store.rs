//! What the pull engine needs from containerd, as one narrow trait: leases, blobs in
//! the content store, unpacking layers into snapshots, and image records. The real
//! implementation is [`super::containerd::ContainerdStore`]; tests use doubles.

use std::{collections::HashMap, future::Future};

use bytes::Bytes;

use stevedore_parsers::oci::Descriptor;

/// Why a containerd operation failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("containerd {operation}: {code:?}: {message}")]
pub struct StoreError {
    /// What the agent was doing, e.g. `write blob sha256:...`.
    pub operation: String,
    pub code: tonic::Code,
    pub message: String,
}

impl StoreError {
    pub fn new(operation: impl Into<String>, status: &tonic::Status) -> Self {
        Self {
            operation: operation.into(),
            code: status.code(),
            message: status.message().to_owned(),
        }
    }

    /// containerd is down or busy: worth another attempt.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.code,
            tonic::Code::Unavailable | tonic::Code::Aborted | tonic::Code::ResourceExhausted
        )
    }
}

/// A containerd lease: everything written under it survives garbage collection until
/// it is deleted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseId(pub String);

/// A named image record (containerd's `images` service).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRecord {
    pub name: String,
    pub target: Descriptor,
    pub labels: HashMap<String, String>,
}

/// Label CRI puts on the image records it manages; kubelet sees images with it.
pub const CRI_IMAGE_LABEL: (&str, &str) = ("io.cri-containerd.image", "managed");

/// Label containerd 2.x's CRI puts on the records of the images it must keep (the sandbox
/// image of its `pinned_images`), whoever wrote them: CRI reports them pinned and
/// kubelet's image garbage collection never removes them. containerd 1.6 has no such label.
pub const CRI_PINNED_LABEL: (&str, &str) = ("io.cri-containerd.pinned", "pinned");

/// Whether a record with these labels pins its image.
pub fn is_pinned(labels: &HashMap<String, String>) -> bool {
    labels.get(CRI_PINNED_LABEL.0).map(String::as_str) == Some(CRI_PINNED_LABEL.1)
}

/// Writes one blob; committed only when all its bytes are in and match the digest.
/// A writer opened on a blob whose earlier download was interrupted continues it.
pub trait BlobWriter: Send {
    /// Bytes already written (by an earlier, interrupted download): the next write
    /// continues from there.
    fn offset(&self) -> u64;
    /// Discards what was written: the next write starts the blob over.
    fn restart(&mut self);
    /// Appends `chunk`.
    fn write(&mut self, chunk: Bytes) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Verifies and commits the blob with `labels`.
    fn commit(
        self,
        labels: HashMap<String, String>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// containerd, as the pull engine, the pull manager and the image service see it.
pub trait ImageStore: Clone + Send + Sync + 'static {
    type Writer: BlobWriter;

    /// Name of the snapshotter layers are unpacked into (CRI's, `overlayfs`).
    fn snapshotter(&self) -> &str;

    /// Creates a lease that expires by itself after a day, should the agent die.
    fn create_lease(&self) -> impl Future<Output = Result<LeaseId, StoreError>> + Send;
    /// Deletes a lease; what only it kept becomes garbage.
    fn delete_lease(&self, lease: &LeaseId) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Whether the blob is committed; if so it is also added to `lease`, so garbage
    /// collection cannot take it before the image records reference it.
    fn has_blob(
        &self,
        lease: &LeaseId,
        digest: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
    /// Opens `blob` for writing under `lease`, where an earlier partial write of it
    /// stopped ([`BlobWriter::offset`]).
    fn open_writer(
        &self,
        lease: &LeaseId,
        blob: &Descriptor,
    ) -> impl Future<Output = Result<Self::Writer, StoreError>> + Send;
    /// Reads a whole small blob (a manifest, index or config), refusing one larger than
    /// `limit` bytes.
    fn read_blob(
        &self,
        digest: &str,
        limit: u64,
    ) -> impl Future<Output = Result<Bytes, StoreError>> + Send;
    /// The labels of a committed blob.
    fn blob_labels(
        &self,
        digest: &str,
    ) -> impl Future<Output = Result<HashMap<String, String>, StoreError>> + Send;
    /// Sets labels on a committed blob, keeping its others.
    fn label_blob(
        &self,
        digest: &str,
        labels: HashMap<String, String>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Whether the snapshot `chain_id` exists (the layer and those below it are
    /// unpacked), held by `lease` from before the question on, so it cannot be collected
    /// between the answer and the unpack of the layer above it.
    fn has_snapshot(
        &self,
        lease: &LeaseId,
        chain_id: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
    /// Applies `layer` on top of snapshot `parent` and commits the result as
    /// `chain_id`, provided the uncompressed layer's digest is `diff_id` (otherwise
    /// nothing is committed and the error's code is `DataLoss`).
    fn unpack_layer(
        &self,
        lease: &LeaseId,
        layer: &Descriptor,
        diff_id: &str,
        parent: Option<&str>,
        chain_id: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The image record `name`, if present.
    fn get_image(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<ImageRecord>, StoreError>> + Send;
    /// Every image record in the namespace.
    fn list_images(&self) -> impl Future<Output = Result<Vec<ImageRecord>, StoreError>> + Send;
    /// Creates the record, or points an existing one at the new target and labels.
    fn put_image(&self, image: ImageRecord) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Deletes the record `name` (absent is fine); `sync` waits for garbage collection.
    fn delete_image(
        &self,
        name: &str,
        sync: bool,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

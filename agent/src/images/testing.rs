//! In-process doubles of the registry and of containerd, recording what they are
//! asked, for unit tests of the pull engine and the manager.

#![allow(clippy::unwrap_used)]

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{Arc, Mutex},
};

use bytes::Bytes;
use futures::StreamExt as _;
use serde_json::json;
use tokio::sync::Notify;
use tonic::Code;

use stevedore_parsers::oci::{self, Descriptor};

use super::{
    registry::{Auth, FetchedBlob, FetchedManifest, Registry, RegistryError},
    store::{BlobWriter, ImageRecord, ImageStore, LeaseId, StoreError},
};
use crate::reference::Reference;

/// A small image: a config and two layers whose "uncompressed" form is themselves.
pub struct TestImage {
    pub manifest: Bytes,
    pub manifest_digest: String,
    pub config_digest: String,
    pub layers: Vec<Bytes>,
    pub chain_top: String,
}

pub fn test_image(seed: &str) -> (TestImage, Vec<(String, Bytes)>) {
    let layers: Vec<Bytes> = (0..2)
        .map(|i| Bytes::from(format!("{seed}-layer-{i}-").repeat(100)))
        .collect();
    let diff_ids: Vec<String> = layers.iter().map(|l| oci::sha256_digest(l)).collect();
    let config = Bytes::from(
        json!({"architecture": "amd64", "os": "linux",
               "rootfs": {"type": "layers", "diff_ids": diff_ids}})
        .to_string(),
    );
    let config_digest = oci::sha256_digest(&config);
    let layer_descs: Vec<_> = layers
        .iter()
        .map(|l| {
            json!({"mediaType": "application/vnd.oci.image.layer.v1.tar",
                         "digest": oci::sha256_digest(l), "size": l.len()})
        })
        .collect();
    let manifest = Bytes::from(
        json!({"schemaVersion": 2, "mediaType": oci::OCI_MANIFEST,
               "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                          "digest": config_digest, "size": config.len()},
               "layers": layer_descs})
        .to_string(),
    );
    let mut blobs = vec![(config_digest.clone(), config)];
    blobs.extend(layers.iter().map(|l| (oci::sha256_digest(l), l.clone())));
    let image = TestImage {
        manifest_digest: oci::sha256_digest(&manifest),
        manifest,
        config_digest,
        chain_top: oci::chain_ids(&diff_ids).pop().unwrap(),
        layers,
    };
    (image, blobs)
}

#[derive(Default)]
pub struct RegistryState {
    /// Manifests by `path:reference`.
    pub manifests: HashMap<String, (String, Bytes)>,
    pub blobs: HashMap<String, Bytes>,
    pub manifest_requests: usize,
    pub blob_requests: usize,
    /// Errors returned by the next manifest requests, in order.
    pub fail_next: VecDeque<RegistryError>,
    /// When set, blob bodies wait for it before their first byte.
    pub gate: Option<Arc<Notify>>,
    /// Blobs whose bodies wait for their own gate before their first byte.
    pub held: HashMap<String, Arc<Notify>>,
    /// When set, blob bodies wait this long before each chunk (a slow, steady registry).
    pub chunk_delay: Option<std::time::Duration>,
    /// When set, only this credential may read anything.
    pub allowed: Option<Auth>,
    /// The offset of each blob request; a registry ignoring `Range` always starts at 0.
    pub blob_offsets: Vec<u64>,
    pub ignores_range: bool,
}

impl RegistryState {
    fn authorize(&self, auth: &Auth, url: &str) -> Result<(), RegistryError> {
        match &self.allowed {
            Some(allowed) if allowed != auth => Err(RegistryError::Unauthorized {
                url: url.to_owned(),
            }),
            _ => Ok(()),
        }
    }
}

#[derive(Clone, Default)]
pub struct FakeRegistry(pub Arc<Mutex<RegistryState>>);

impl FakeRegistry {
    /// Serves `image` as `path:tag` (and by digest).
    pub fn serve(&self, path: &str, tag: &str, image: &TestImage, blobs: Vec<(String, Bytes)>) {
        let mut state = self.0.lock().unwrap();
        let entry = (oci::OCI_MANIFEST.to_owned(), image.manifest.clone());
        state
            .manifests
            .insert(format!("{path}:{tag}"), entry.clone());
        state
            .manifests
            .insert(format!("{path}:{}", image.manifest_digest), entry);
        state.blobs.extend(blobs);
    }

    pub fn state(&self) -> std::sync::MutexGuard<'_, RegistryState> {
        self.0.lock().unwrap()
    }
}

impl Registry for FakeRegistry {
    async fn fetch_manifest(
        &self,
        image: &Reference,
        reference: &str,
        auth: &Auth,
    ) -> Result<FetchedManifest, RegistryError> {
        let mut state = self.0.lock().unwrap();
        state.manifest_requests += 1;
        state.authorize(auth, reference)?;
        if let Some(error) = state.fail_next.pop_front() {
            return Err(error);
        }
        let (media_type, body) = state
            .manifests
            .get(&format!("{}:{reference}", image.path()))
            .cloned()
            .ok_or_else(|| RegistryError::NotFound {
                what: "manifest",
                url: reference.to_owned(),
            })?;
        Ok(FetchedManifest {
            descriptor: Descriptor::new(media_type, oci::sha256_digest(&body), body.len() as u64),
            body,
        })
    }

    async fn fetch_blob(
        &self,
        _image: &Reference,
        blob: &Descriptor,
        auth: &Auth,
        from: u64,
    ) -> Result<FetchedBlob, RegistryError> {
        let digest = blob.digest.as_str();
        let (body, gate, delay, offset) = {
            let mut state = self.0.lock().unwrap();
            state.blob_requests += 1;
            state.authorize(auth, digest)?;
            let offset = if state.ignores_range { 0 } else { from };
            state.blob_offsets.push(offset);
            let body = state
                .blobs
                .get(digest)
                .cloned()
                .ok_or_else(|| RegistryError::NotFound {
                    what: "blob",
                    url: digest.to_owned(),
                })?;
            let gate = state.held.get(digest).or(state.gate.as_ref()).cloned();
            (body, gate, state.chunk_delay, offset)
        };
        let start = usize::try_from(offset).unwrap().min(body.len());
        let chunks: Vec<Result<Bytes, RegistryError>> = body[start..]
            .chunks(64)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let stream = futures::stream::once(async move {
            if let Some(gate) = gate {
                gate.notified().await;
            }
        })
        .flat_map(move |()| futures::stream::iter(chunks.clone()))
        .then(move |chunk| async move {
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
            chunk
        });
        Ok(FetchedBlob {
            offset,
            stream: stream.boxed(),
        })
    }
}

/// What the store did, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreEvent {
    /// A blob was committed (by digest).
    Committed(String),
    /// A layer was unpacked into the snapshot of this chain ID.
    Unpacked(String),
}

#[derive(Default)]
pub struct StoreState {
    pub blobs: HashMap<String, (Bytes, HashMap<String, String>)>,
    pub events: Vec<StoreEvent>,
    pub leases: HashSet<String>,
    pub leases_created: usize,
    pub snapshots: HashSet<String>,
    pub images: HashMap<String, ImageRecord>,
    /// When set, unpacking fails as if the layer did not match its diff ID.
    pub corrupt_layers: bool,
    /// Blobs `has_blob` reports missing once although stored: another pull commits them
    /// between this pull's check and its write.
    pub committed_concurrently: HashSet<String>,
    /// Partial writes by digest, as interrupted downloads leave them.
    pub ingests: HashMap<String, Vec<u8>>,
    /// Image record names whose creation fails (containerd refusing it).
    pub refused_images: HashSet<String>,
}

#[derive(Clone, Default)]
pub struct FakeStore(pub Arc<Mutex<StoreState>>);

impl FakeStore {
    pub fn state(&self) -> std::sync::MutexGuard<'_, StoreState> {
        self.0.lock().unwrap()
    }
}

fn store_error(operation: &str, code: Code) -> StoreError {
    StoreError {
        operation: operation.to_owned(),
        code,
        message: String::new(),
    }
}

pub struct FakeWriter {
    store: FakeStore,
    blob: Descriptor,
    data: Vec<u8>,
}

impl BlobWriter for FakeWriter {
    fn offset(&self) -> u64 {
        self.data.len() as u64
    }

    fn restart(&mut self) {
        self.data.clear();
        self.store.state().ingests.remove(&self.blob.digest);
    }

    async fn write(&mut self, chunk: Bytes) -> Result<(), StoreError> {
        self.data.extend_from_slice(&chunk);
        let mut state = self.store.state();
        state
            .ingests
            .insert(self.blob.digest.clone(), self.data.clone());
        Ok(())
    }

    async fn commit(self, labels: HashMap<String, String>) -> Result<(), StoreError> {
        if self.store.state().blobs.contains_key(&self.blob.digest) {
            // As containerd: committed meanwhile by another writer.
            return Err(store_error("commit", Code::AlreadyExists));
        }
        if super::registry::digest::verify(&self.blob.digest, &self.data).is_err()
            || self.data.len() as u64 != self.blob.size
        {
            return Err(store_error("commit", Code::FailedPrecondition));
        }
        let mut state = self.store.state();
        state.ingests.remove(&self.blob.digest);
        let digest = self.blob.digest;
        state.events.push(StoreEvent::Committed(digest.clone()));
        state.blobs.insert(digest, (Bytes::from(self.data), labels));
        Ok(())
    }
}

impl ImageStore for FakeStore {
    type Writer = FakeWriter;

    fn snapshotter(&self) -> &str {
        "overlayfs"
    }

    async fn create_lease(&self) -> Result<LeaseId, StoreError> {
        let mut state = self.state();
        state.leases_created += 1;
        let id = format!("lease-{}", state.leases_created);
        state.leases.insert(id.clone());
        Ok(LeaseId(id))
    }

    async fn delete_lease(&self, lease: &LeaseId) -> Result<(), StoreError> {
        self.state().leases.remove(&lease.0);
        Ok(())
    }

    async fn has_blob(&self, _lease: &LeaseId, digest: &str) -> Result<bool, StoreError> {
        let mut state = self.state();
        if state.committed_concurrently.remove(digest) {
            return Ok(false);
        }
        Ok(state.blobs.contains_key(digest))
    }

    async fn open_writer(
        &self,
        _lease: &LeaseId,
        blob: &Descriptor,
    ) -> Result<FakeWriter, StoreError> {
        if self.state().blobs.contains_key(&blob.digest) {
            // As containerd: the content of an expected digest is committed already.
            return Err(store_error("write", Code::AlreadyExists));
        }
        let data = self
            .state()
            .ingests
            .get(&blob.digest)
            .cloned()
            .unwrap_or_default();
        Ok(FakeWriter {
            store: self.clone(),
            blob: blob.clone(),
            data,
        })
    }

    async fn read_blob(&self, digest: &str, limit: u64) -> Result<Bytes, StoreError> {
        let data = self
            .state()
            .blobs
            .get(digest)
            .map(|(data, _)| data.clone())
            .ok_or_else(|| store_error("read", Code::NotFound))?;
        if data.len() as u64 > limit {
            return Err(store_error("read", Code::FailedPrecondition));
        }
        Ok(data)
    }

    async fn blob_labels(&self, digest: &str) -> Result<HashMap<String, String>, StoreError> {
        let state = self.state();
        let (_, labels) = state
            .blobs
            .get(digest)
            .ok_or_else(|| store_error("info", Code::NotFound))?;
        Ok(labels.clone())
    }

    async fn label_blob(
        &self,
        digest: &str,
        labels: HashMap<String, String>,
    ) -> Result<(), StoreError> {
        let mut state = self.state();
        let (_, existing) = state
            .blobs
            .get_mut(digest)
            .ok_or_else(|| store_error("label", Code::NotFound))?;
        existing.extend(labels);
        Ok(())
    }

    async fn has_snapshot(&self, _lease: &LeaseId, chain_id: &str) -> Result<bool, StoreError> {
        Ok(self.state().snapshots.contains(chain_id))
    }

    async fn unpack_layer(
        &self,
        _lease: &LeaseId,
        layer: &Descriptor,
        diff_id: &str,
        parent: Option<&str>,
        chain_id: &str,
    ) -> Result<(), StoreError> {
        let mut state = self.state();
        if parent.is_some_and(|p| !state.snapshots.contains(p)) {
            return Err(store_error("prepare", Code::NotFound));
        }
        let (data, _) = state
            .blobs
            .get(&layer.digest)
            .ok_or_else(|| store_error("apply", Code::NotFound))?;
        if state.corrupt_layers || oci::sha256_digest(data) != diff_id {
            return Err(store_error("apply", Code::DataLoss));
        }
        state.snapshots.insert(chain_id.to_owned());
        state.events.push(StoreEvent::Unpacked(chain_id.to_owned()));
        Ok(())
    }

    async fn get_image(&self, name: &str) -> Result<Option<ImageRecord>, StoreError> {
        Ok(self.state().images.get(name).cloned())
    }

    async fn list_images(&self) -> Result<Vec<ImageRecord>, StoreError> {
        Ok(self.state().images.values().cloned().collect())
    }

    async fn put_image(&self, image: ImageRecord) -> Result<(), StoreError> {
        let mut state = self.state();
        if state.refused_images.contains(&image.name) {
            return Err(store_error("create image", Code::Unavailable));
        }
        state.images.insert(image.name.clone(), image);
        Ok(())
    }

    async fn delete_image(&self, name: &str, _sync: bool) -> Result<(), StoreError> {
        self.state().images.remove(name);
        Ok(())
    }
}

/// A body an [`HttpDouble`] route answers with.
#[derive(Clone)]
pub enum HttpBody {
    /// Sent with its Content-Length.
    Full(Bytes),
    /// `chunk` sent `count` times with chunked transfer encoding (no Content-Length),
    /// so a large body is never held by the double.
    Chunked { chunk: Bytes, count: usize },
}

/// One answer of an [`HttpDouble`].
#[derive(Clone)]
pub struct HttpReply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: HttpBody,
}

impl HttpReply {
    pub fn ok(content_type: &str, body: impl Into<Bytes>) -> Self {
        Self {
            status: 200,
            headers: vec![("Content-Type".to_owned(), content_type.to_owned())],
            body: HttpBody::Full(body.into()),
        }
    }

    pub fn status(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: HttpBody::Full(Bytes::new()),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

type Route = dyn Fn(&str, &str) -> HttpReply + Send + Sync;

/// A registry on loopback speaking just enough HTTP/1.1: each request (its target and
/// `Authorization` header) is answered by `route` on a connection of its own. It records
/// the targets asked for and the body bytes it managed to send.
#[derive(Clone)]
pub struct HttpDouble {
    pub addr: std::net::SocketAddr,
    pub requests: Arc<Mutex<Vec<String>>>,
    pub body_bytes_sent: Arc<std::sync::atomic::AtomicU64>,
}

impl HttpDouble {
    pub async fn start(route: impl Fn(&str, &str) -> HttpReply + Send + Sync + 'static) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let double = Self {
            addr: listener.local_addr().unwrap(),
            requests: Arc::default(),
            body_bytes_sent: Arc::default(),
        };
        let route: Arc<Route> = Arc::new(route);
        let server = double.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(server.clone().serve(socket, Arc::clone(&route)));
            }
        });
        double
    }

    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    pub fn sent(&self) -> u64 {
        self.body_bytes_sent
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn serve(self, mut socket: tokio::net::TcpStream, route: Arc<Route>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                return;
            }
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let target = head
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let authorization = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("authorization")
                    .then(|| value.trim().to_owned())
            })
            .unwrap_or_default();
        self.requests.lock().unwrap().push(target.clone());
        let reply = route(&target, &authorization);
        let mut out = format!("HTTP/1.1 {} X\r\nConnection: close\r\n", reply.status);
        for (name, value) in &reply.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        let sent = &self.body_bytes_sent;
        let count = |n: usize| sent.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        match reply.body {
            HttpBody::Full(body) => {
                out.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
                if socket.write_all(out.as_bytes()).await.is_ok()
                    && socket.write_all(&body).await.is_ok()
                {
                    count(body.len());
                }
            }
            HttpBody::Chunked { chunk, count: n } => {
                out.push_str("Transfer-Encoding: chunked\r\n\r\n");
                if socket.write_all(out.as_bytes()).await.is_err() {
                    return;
                }
                for _ in 0..n {
                    let frame = format!("{:x}\r\n", chunk.len());
                    let written = async {
                        socket.write_all(frame.as_bytes()).await?;
                        socket.write_all(&chunk).await?;
                        socket.write_all(b"\r\n").await
                    };
                    if written.await.is_err() {
                        return;
                    }
                    count(chunk.len());
                }
                let _ = socket.write_all(b"0\r\n\r\n").await;
            }
        }
    }
}

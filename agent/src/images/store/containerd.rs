//! [`ImageStore`] over containerd's gRPC services (content, leases, snapshots, diff,
//! images), as containerd's own Go client does a pull: every call carries the
//! namespace, and calls that create things carry the pull's lease.

use std::{
    collections::HashMap,
    path::Path,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use bytes::{Bytes, BytesMut};
use containerd_client::{
    services::v1::{
        AddResourceRequest, ApplyRequest, CreateImageRequest, CreateRequest, DeleteImageRequest,
        DeleteRequest, GetImageRequest, Image, Info, InfoRequest, ListImagesRequest,
        ReadContentRequest, UpdateImageRequest, UpdateRequest,
        diff_client::DiffClient,
        images_client::ImagesClient,
        leases_client::LeasesClient,
        snapshots::{
            CommitSnapshotRequest, PrepareSnapshotRequest, RemoveSnapshotRequest,
            StatSnapshotRequest, snapshots_client::SnapshotsClient,
        },
    },
    types,
};
use futures::StreamExt as _;
use tonic::{Code, transport::Channel};

use stevedore_parsers::oci::Descriptor;

use super::{
    containerd_conn::{Connection, err},
    content_writer::ContainerdWriter,
    image_store::{ImageRecord, ImageStore, LeaseId, StoreError},
    orphan_leases, partial_downloads,
};

/// Snapshotter CRI unpacks into by default, and so the one kubelet's pods use.
pub const SNAPSHOTTER: &str = "overlayfs";
/// How long a lease outlives an agent that died without deleting it.
const LEASE_EXPIRY: Duration = Duration::from_secs(24 * 60 * 60);

static UNIQUE: AtomicU64 = AtomicU64::new(0);

/// A process-unique suffix for lease IDs and snapshot keys.
fn unique() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("{nanos}-{}", UNIQUE.fetch_add(1, Ordering::Relaxed))
}

/// containerd in one namespace.
#[derive(Debug, Clone)]
pub struct ContainerdStore {
    conn: Connection,
}

impl ContainerdStore {
    /// Connects to containerd's socket; works in `namespace`.
    /// A store over a lazily connected channel: nothing is dialled until the first call.
    pub fn connect(socket: &Path, namespace: &str) -> Result<Self, StoreError> {
        Ok(Self {
            conn: Connection::connect(socket, namespace)?,
        })
    }

    /// Deletes the pull leases of agent processes that died mid-pull; returns their IDs.
    pub async fn release_orphaned_leases(&self) -> Result<Vec<String>, StoreError> {
        let request = self.conn.request(
            containerd_client::services::v1::ListRequest {
                filters: Vec::new(),
            },
            None,
        )?;
        let leases = LeasesClient::new(self.conn.channel())
            .list(request)
            .await
            .map_err(err("list leases"))?
            .into_inner()
            .leases;
        let orphans = orphan_leases::orphaned(
            leases.iter().map(|l| (l.id.as_str(), &l.labels)),
            orphan_leases::proc_start_of,
        );
        for id in &orphans {
            self.delete_lease(&LeaseId(id.clone())).await?;
        }
        Ok(orphans)
    }

    fn snapshots(&self) -> SnapshotsClient<Channel> {
        SnapshotsClient::new(self.conn.channel())
    }

    fn images(&self) -> ImagesClient<Channel> {
        ImagesClient::new(self.conn.channel())
    }
}

fn to_descriptor(d: &Descriptor) -> types::Descriptor {
    types::Descriptor {
        media_type: d.media_type.clone(),
        digest: d.digest.clone(),
        size: i64::try_from(d.size).unwrap_or(i64::MAX),
        annotations: HashMap::new(),
    }
}

fn from_image(image: Image) -> Option<ImageRecord> {
    let target = image.target?;
    Some(ImageRecord {
        name: image.name,
        target: Descriptor::new(
            target.media_type,
            target.digest,
            u64::try_from(target.size).unwrap_or(0),
        ),
        labels: image.labels,
    })
}

impl ImageStore for ContainerdStore {
    type Writer = ContainerdWriter;

    fn snapshotter(&self) -> &str {
        SNAPSHOTTER
    }

    async fn create_lease(&self) -> Result<LeaseId, StoreError> {
        let expire = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::try_from(LEASE_EXPIRY).unwrap_or_default())
            .unwrap_or_else(|_| jiff::Timestamp::now());
        let mut labels =
            HashMap::from([("containerd.io/gc.expire".to_owned(), expire.to_string())]);
        if let Some(owner) = orphan_leases::this_process() {
            labels.insert(orphan_leases::OWNER_LABEL.to_owned(), owner);
        }
        let request = self.conn.request(
            CreateRequest {
                id: format!("stevedore-pull-{}", unique()),
                labels,
            },
            None,
        )?;
        let response = LeasesClient::new(self.conn.channel())
            .create(request)
            .await
            .map_err(err("create lease"))?;
        response
            .into_inner()
            .lease
            .map(|lease| LeaseId(lease.id))
            .ok_or_else(|| StoreError {
                operation: "create lease".to_owned(),
                code: Code::Internal,
                message: "no lease in the response".to_owned(),
            })
    }

    async fn delete_lease(&self, lease: &LeaseId) -> Result<(), StoreError> {
        // Best effort: a partial download lost here is only downloaded whole again.
        match partial_downloads::keep(&self.conn, lease).await {
            Ok(0) => {}
            Ok(kept) => {
                tracing::debug!(lease = %lease.0, kept, "kept partial downloads for the next pull");
            }
            Err(error) => {
                tracing::warn!(lease = %lease.0, %error, "partial downloads of the lease are dropped");
            }
        }
        let request = self.conn.request(
            DeleteRequest {
                id: lease.0.clone(),
                sync: false,
            },
            None,
        )?;
        match LeasesClient::new(self.conn.channel()).delete(request).await {
            Ok(_) => Ok(()),
            Err(status) if status.code() == Code::NotFound => Ok(()),
            Err(status) => Err(StoreError::new(
                format!("delete lease {}", lease.0),
                &status,
            )),
        }
    }

    async fn has_blob(&self, lease: &LeaseId, digest: &str) -> Result<bool, StoreError> {
        // The lease first, then the question: a blob nothing else references (the lease
        // of a killed pull, just released) may be collected at any moment, and one found
        // before the lease held it could be gone by the time the pull reads it (CI saw
        // "content digest ...: not found" reading a config that was just "present"). A
        // lease may name content that does not exist; the write that follows fills it.
        self.lease_resource(
            lease,
            digest,
            "content".to_owned(),
            format!("lease {digest}"),
        )
        .await?;
        let info = self.conn.request(
            InfoRequest {
                digest: digest.to_owned(),
            },
            None,
        )?;
        match self.conn.content().info(info).await {
            Ok(_) => Ok(true),
            Err(status) if status.code() == Code::NotFound => Ok(false),
            Err(status) => Err(StoreError::new(format!("info {digest}"), &status)),
        }
    }

    async fn open_writer(
        &self,
        lease: &LeaseId,
        blob: &Descriptor,
    ) -> Result<ContainerdWriter, StoreError> {
        ContainerdWriter::open(&self.conn, lease, blob).await
    }

    async fn read_blob(&self, digest: &str, limit: u64) -> Result<Bytes, StoreError> {
        let request = self.conn.request(
            ReadContentRequest {
                digest: digest.to_owned(),
                offset: 0,
                size: 0,
            },
            None,
        )?;
        let operation = format!("read {digest}");
        let mut stream = self
            .conn
            .content()
            .read(request)
            .await
            .map_err(err(operation.clone()))?
            .into_inner();
        let mut data = BytesMut::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(err(operation.clone()))?;
            // Dropping the stream cancels the read: at most one chunk past the limit.
            if (data.len() + chunk.data.len()) as u64 > limit {
                return Err(StoreError {
                    operation,
                    code: Code::FailedPrecondition,
                    message: format!("blob is larger than the limit of {limit} bytes"),
                });
            }
            data.extend_from_slice(&chunk.data);
        }
        Ok(data.freeze())
    }

    async fn blob_labels(&self, digest: &str) -> Result<HashMap<String, String>, StoreError> {
        let request = self.conn.request(
            InfoRequest {
                digest: digest.to_owned(),
            },
            None,
        )?;
        let info = self
            .conn
            .content()
            .info(request)
            .await
            .map_err(err(format!("info {digest}")))?
            .into_inner()
            .info;
        Ok(info.map(|i| i.labels).unwrap_or_default())
    }

    async fn label_blob(
        &self,
        digest: &str,
        labels: HashMap<String, String>,
    ) -> Result<(), StoreError> {
        let paths = labels.keys().map(|k| format!("labels.{k}")).collect();
        let request = self.conn.request(
            UpdateRequest {
                info: Some(Info {
                    digest: digest.to_owned(),
                    labels,
                    ..Default::default()
                }),
                update_mask: Some(prost_types::FieldMask { paths }),
            },
            None,
        )?;
        self.conn
            .content()
            .update(request)
            .await
            .map_err(err(format!("label {digest}")))?;
        Ok(())
    }

    async fn has_snapshot(&self, lease: &LeaseId, chain_id: &str) -> Result<bool, StoreError> {
        // The lease first, then the question, as for blobs (`has_blob`): a snapshot only
        // a killed pull's lease held may be collected at any moment, and one found before
        // this lease held it could be gone when the layer above is prepared on it (CI saw
        // "parent snapshot ... does not exist" on the pull after an agent was killed).
        let kind = format!("snapshots/{SNAPSHOTTER}");
        self.lease_resource(lease, chain_id, kind, format!("lease snapshot {chain_id}"))
            .await?;
        let request = self.conn.request(
            StatSnapshotRequest {
                snapshotter: SNAPSHOTTER.to_owned(),
                key: chain_id.to_owned(),
            },
            None,
        )?;
        match self.snapshots().stat(request).await {
            Ok(_) => Ok(true),
            Err(status) if status.code() == Code::NotFound => Ok(false),
            Err(status) => Err(StoreError::new(
                format!("stat snapshot {chain_id}"),
                &status,
            )),
        }
    }

    async fn unpack_layer(
        &self,
        lease: &LeaseId,
        layer: &Descriptor,
        diff_id: &str,
        parent: Option<&str>,
        chain_id: &str,
    ) -> Result<(), StoreError> {
        // containerd's unpack key format, so its tools recognise an interrupted unpack.
        let key = format!("extract-{} {chain_id}", unique());
        let prepare = self.conn.request(
            PrepareSnapshotRequest {
                snapshotter: SNAPSHOTTER.to_owned(),
                key: key.clone(),
                parent: parent.unwrap_or_default().to_owned(),
                labels: HashMap::new(),
            },
            Some(lease),
        )?;
        let mounts = self
            .snapshots()
            .prepare(prepare)
            .await
            .map_err(err(format!("prepare snapshot for {}", layer.digest)))?
            .into_inner()
            .mounts;
        let result = self
            .apply_and_commit(lease, layer, diff_id, mounts, &key, chain_id)
            .await;
        if let Err(error) = &result {
            let remove = self.conn.request(
                RemoveSnapshotRequest {
                    snapshotter: SNAPSHOTTER.to_owned(),
                    key,
                },
                None,
            )?;
            if let Err(status) = self.snapshots().remove(remove).await {
                tracing::warn!(chain_id, error = %status.message(), "removing a failed unpack");
            }
            // Unpacked meanwhile by someone else (CRI, ctr): theirs is as good.
            if error.code == Code::AlreadyExists {
                return Ok(());
            }
        }
        result
    }

    async fn get_image(&self, name: &str) -> Result<Option<ImageRecord>, StoreError> {
        let request = self.conn.request(
            GetImageRequest {
                name: name.to_owned(),
            },
            None,
        )?;
        match self.images().get(request).await {
            Ok(response) => Ok(response.into_inner().image.and_then(from_image)),
            Err(status) if status.code() == Code::NotFound => Ok(None),
            Err(status) => Err(StoreError::new(format!("get image {name}"), &status)),
        }
    }

    async fn list_images(&self) -> Result<Vec<ImageRecord>, StoreError> {
        let request = self
            .conn
            .request(ListImagesRequest { filters: vec![] }, None)?;
        let images = self
            .images()
            .list(request)
            .await
            .map_err(err("list images"))?
            .into_inner()
            .images;
        Ok(images.into_iter().filter_map(from_image).collect())
    }

    async fn put_image(&self, image: ImageRecord) -> Result<(), StoreError> {
        let operation = format!("create image {}", image.name);
        let label_paths: Vec<String> = image.labels.keys().map(|k| format!("labels.{k}")).collect();
        let message = Image {
            name: image.name.clone(),
            labels: image.labels,
            target: Some(to_descriptor(&image.target)),
            created_at: None,
            updated_at: None,
        };
        let create = self.conn.request(
            CreateImageRequest {
                image: Some(message.clone()),
                source_date_epoch: None,
            },
            None,
        )?;
        match self.images().create(create).await {
            Ok(_) => return Ok(()),
            Err(status) if status.code() == Code::AlreadyExists => {}
            Err(status) => return Err(StoreError::new(operation, &status)),
        }
        // As CRI does: repoint an existing name at the new target.
        let mut paths = vec!["target".to_owned()];
        paths.extend(label_paths);
        let update = self.conn.request(
            UpdateImageRequest {
                image: Some(message),
                update_mask: Some(prost_types::FieldMask { paths }),
                source_date_epoch: None,
            },
            None,
        )?;
        self.images().update(update).await.map_err(err(operation))?;
        Ok(())
    }

    async fn delete_image(&self, name: &str, sync: bool) -> Result<(), StoreError> {
        let request = self.conn.request(
            DeleteImageRequest {
                name: name.to_owned(),
                sync,
                target: None,
            },
            None,
        )?;
        match self.images().delete(request).await {
            Ok(_) => Ok(()),
            Err(status) if status.code() == Code::NotFound => Ok(()),
            Err(status) => Err(StoreError::new(format!("delete image {name}"), &status)),
        }
    }
}

impl ContainerdStore {
    /// Puts the resource `id` of containerd type `kind` (content, a snapshotter's
    /// snapshots) under `lease`, so the garbage collector keeps it while the pull runs;
    /// `what` names the step in an error.
    async fn lease_resource(
        &self,
        lease: &LeaseId,
        id: &str,
        kind: String,
        what: String,
    ) -> Result<(), StoreError> {
        let add = self.conn.request(
            AddResourceRequest {
                id: lease.0.clone(),
                resource: Some(containerd_client::services::v1::Resource {
                    id: id.to_owned(),
                    r#type: kind,
                }),
            },
            None,
        )?;
        LeasesClient::new(self.conn.channel())
            .add_resource(add)
            .await
            .map_err(err(what))?;
        Ok(())
    }

    async fn apply_and_commit(
        &self,
        lease: &LeaseId,
        layer: &Descriptor,
        diff_id: &str,
        mounts: Vec<types::Mount>,
        key: &str,
        chain_id: &str,
    ) -> Result<(), StoreError> {
        let apply = self.conn.request(
            ApplyRequest {
                diff: Some(to_descriptor(layer)),
                mounts,
                payloads: HashMap::new(),
                sync_fs: false,
            },
            Some(lease),
        )?;
        let operation = format!("apply layer {}", layer.digest);
        let applied = DiffClient::new(self.conn.channel())
            .apply(apply)
            .await
            .map_err(err(operation.clone()))?
            .into_inner()
            .applied
            .map(|d| d.digest)
            .unwrap_or_default();
        if applied != diff_id {
            return Err(StoreError {
                operation,
                code: Code::DataLoss,
                message: format!("uncompressed digest {applied} does not match diff ID {diff_id}"),
            });
        }
        let commit = self.conn.request(
            CommitSnapshotRequest {
                snapshotter: SNAPSHOTTER.to_owned(),
                name: chain_id.to_owned(),
                key: key.to_owned(),
                labels: HashMap::new(),
            },
            Some(lease),
        )?;
        match self.snapshots().commit(commit).await {
            Ok(_) => Ok(()),
            Err(status) => Err(StoreError::new(
                format!("commit snapshot {chain_id}"),
                &status,
            )),
        }
    }
}

//! containerd in one namespace: the channel and the metadata every call carries. Shared by
//! the image store (`containerd.rs`) and the content writer (`content_writer.rs`), which
//! the store opens — so the writer needs nothing from the store.

use std::path::Path;

use containerd_client::services::v1::content_client::ContentClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::{Code, Request, Status, transport::Channel};

use super::image_store::{LeaseId, StoreError};

/// A lazily connected channel to containerd and the namespace calls work in.
#[derive(Debug, Clone)]
pub(super) struct Connection {
    channel: Channel,
    namespace: MetadataValue<Ascii>,
}

impl Connection {
    /// Nothing is dialled until the first call.
    pub(super) fn connect(socket: &Path, namespace: &str) -> Result<Self, StoreError> {
        let fail = |message: String| StoreError {
            operation: format!("connect to {}", socket.display()),
            code: Code::Unavailable,
            message,
        };
        let namespace = MetadataValue::try_from(namespace)
            .map_err(|err| fail(format!("namespace {namespace:?}: {err}")))?;
        let channel = crate::containerd_channel::lazy_channel(socket.to_path_buf());
        Ok(Self { channel, namespace })
    }

    pub(super) fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// `message` with the namespace, and the pull's lease for calls that create things.
    pub(super) fn request<T>(
        &self,
        message: T,
        lease: Option<&LeaseId>,
    ) -> Result<Request<T>, StoreError> {
        let mut request = Request::new(message);
        let metadata = request.metadata_mut();
        metadata.insert("containerd-namespace", self.namespace.clone());
        if let Some(lease) = lease {
            let value = MetadataValue::try_from(lease.0.as_str()).map_err(|err| StoreError {
                operation: "lease metadata".to_owned(),
                code: Code::InvalidArgument,
                message: err.to_string(),
            })?;
            metadata.insert("containerd-lease", value);
        }
        Ok(request)
    }

    pub(super) fn content(&self) -> ContentClient<Channel> {
        ContentClient::new(self.channel.clone()).max_decoding_message_size(64 << 20)
    }
}

/// Maps a failed call of `operation` to the store's error.
pub(super) fn err(operation: impl Into<String>) -> impl FnOnce(Status) -> StoreError {
    let operation = operation.into();
    move |status| StoreError::new(operation, &status)
}

//! Writing one blob into containerd's content store over its bidirectional `Write`
//! stream: a STAT opens the ingest under a ref (one per digest) and answers how many
//! bytes an earlier, interrupted write left in it, WRITEs continue from there in chunks
//! of up to 1 MiB (a write at offset 0 makes containerd truncate the ingest), and
//! COMMIT verifies the expected digest and size of the whole blob and sets its labels.
//! Up to [`WRITE_WINDOW`] (2) WRITEs are in flight before the agent waits for
//! containerd's answers, which come in order: waiting for each before sending the next
//! kept the registry's bytes waiting on containerd's disk write.

use std::collections::HashMap;

use bytes::Bytes;
use containerd_client::services::v1::{WriteAction, WriteContentRequest, WriteContentResponse};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Streaming};

use stevedore_parsers::oci::Descriptor;

use super::{
    containerd_conn::{Connection, err},
    image_store::{BlobWriter, LeaseId, StoreError},
};

/// Bytes per content write message (containerd accepts up to 16 MiB).
const WRITE_CHUNK: usize = 1 << 20;
/// WRITE messages sent and not yet answered, at most: 4 pulled the benchmark image ~5 %
/// faster than 2 but raised the peak RSS of 10 concurrent pulls from 36-40 to 45 MiB.
const WRITE_WINDOW: usize = 2;

impl ContainerdWriter {
    pub(super) async fn open(
        conn: &Connection,
        lease: &LeaseId,
        blob: &Descriptor,
    ) -> Result<Self, StoreError> {
        let (tx, rx) = mpsc::channel(2);
        let operation = format!("write {}", blob.digest);
        let total = i64::try_from(blob.size).unwrap_or(i64::MAX);
        let stat = WriteContentRequest {
            action: WriteAction::Stat.into(),
            // One ref per digest, as containerd's client does: a concurrent writer of
            // the same blob is refused rather than racing.
            r#ref: format!("stevedore-{}", blob.digest),
            total,
            expected: blob.digest.clone(),
            ..Default::default()
        };
        // containerd answers (and sends headers) only after the first message.
        tx.send(stat.clone()).await.map_err(|_| StoreError {
            operation: operation.clone(),
            code: Code::Internal,
            message: "write stream closed".to_owned(),
        })?;
        let request = conn.request(ReceiverStream::new(rx), Some(lease))?;
        let mut responses = conn
            .content()
            .write(request)
            .await
            .map_err(err(operation.clone()))?
            .into_inner();
        let status = next_response(&mut responses, &operation).await?;
        // What an interrupted write left; more than the blob means a stale ingest.
        let offset = if status.offset > 0 && status.offset <= total {
            status.offset
        } else {
            0
        };
        Ok(Self {
            tx,
            responses,
            template: stat,
            offset,
            buffer: Vec::new(),
            unanswered: 0,
            operation,
        })
    }
}

async fn next_response(
    responses: &mut Streaming<WriteContentResponse>,
    operation: &str,
) -> Result<WriteContentResponse, StoreError> {
    match responses.message().await {
        Ok(Some(response)) => Ok(response),
        Ok(None) => Err(StoreError {
            operation: operation.to_owned(),
            code: Code::Unavailable,
            message: "containerd closed the write stream".to_owned(),
        }),
        Err(status) => Err(StoreError::new(operation, &status)),
    }
}

/// One content write stream; bytes are sent in chunks of up to 1 MiB, up to
/// [`WRITE_WINDOW`] of them unanswered.
pub struct ContainerdWriter {
    tx: mpsc::Sender<WriteContentRequest>,
    responses: Streaming<WriteContentResponse>,
    template: WriteContentRequest,
    /// Bytes sent (or in the ingest when opened).
    offset: i64,
    /// The next message's data, moved into it when full.
    buffer: Vec<u8>,
    /// WRITEs sent whose answers have not been read.
    unanswered: usize,
    operation: String,
}

impl ContainerdWriter {
    /// Sends `request`; its answer is read later, in order ([`Self::answered`]).
    async fn send(&mut self, request: WriteContentRequest) -> Result<(), StoreError> {
        if self.tx.send(request).await.is_err() {
            // The stream ended: its status, after the answers still queued, says why.
            loop {
                next_response(&mut self.responses, &self.operation).await?;
            }
        }
        self.unanswered += 1;
        Ok(())
    }

    /// Reads answers until at most `left` are outstanding.
    async fn answered(&mut self, left: usize) -> Result<(), StoreError> {
        while self.unanswered > left {
            next_response(&mut self.responses, &self.operation).await?;
            self.unanswered -= 1;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), StoreError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.answered(WRITE_WINDOW - 1).await?;
        let data = std::mem::take(&mut self.buffer);
        let len = i64::try_from(data.len()).unwrap_or(i64::MAX);
        // Only the bytes and where they go: containerd keeps the ref, total and expected
        // digest of the stream's first message, and looks the expected digest up in its
        // metadata store again on every message that carries one.
        let request = WriteContentRequest {
            action: WriteAction::Write.into(),
            offset: self.offset,
            data,
            ..WriteContentRequest::default()
        };
        self.send(request).await?;
        self.offset += len;
        Ok(())
    }
}

impl BlobWriter for ContainerdWriter {
    fn offset(&self) -> u64 {
        u64::try_from(self.offset).unwrap_or(0) + self.buffer.len() as u64
    }

    fn restart(&mut self) {
        self.buffer.clear();
        self.offset = 0;
    }

    async fn write(&mut self, chunk: Bytes) -> Result<(), StoreError> {
        if self.buffer.is_empty() {
            self.buffer.reserve_exact(WRITE_CHUNK.max(chunk.len()));
        }
        self.buffer.extend_from_slice(&chunk);
        if self.buffer.len() >= WRITE_CHUNK {
            self.flush().await?;
        }
        Ok(())
    }

    async fn commit(mut self, labels: HashMap<String, String>) -> Result<(), StoreError> {
        self.flush().await?;
        let request = WriteContentRequest {
            action: WriteAction::Commit.into(),
            offset: self.offset,
            labels,
            ..self.template.clone()
        };
        // AlreadyExists (committed meanwhile by another writer) is the caller's to handle:
        // the content is there but held by another lease.
        self.send(request).await?;
        self.answered(0).await
    }
}

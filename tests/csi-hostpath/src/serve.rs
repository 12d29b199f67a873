//! gRPC over Unix sockets: binding (a stale socket of a previous run is replaced) and
//! serving until shutdown, then removing the socket so the kubelet sees the plugin go.

use std::io;
use std::path::{Path, PathBuf};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, UnixListenerStream};
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Router;

use crate::authority::CLIENT_PREFACE;
use crate::frames::{FRAME_HEADER_LEN, RequestRewriter, payload_len};

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("preparing the socket {path}: {source}")]
    Prepare { path: PathBuf, source: io::Error },
    #[error("listening on {path}: {source}")]
    Bind { path: PathBuf, source: io::Error },
    #[error("serving on {path}: {source}")]
    Serve {
        path: PathBuf,
        source: tonic::transport::Error,
    },
}

pub fn bind(path: &Path) -> Result<UnixListener, ServeError> {
    let prepare = |source| ServeError::Prepare {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(prepare)?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(prepare(e)),
        _ => {}
    }
    UnixListener::bind(path).map_err(|source| ServeError::Bind {
        path: path.to_owned(),
        source,
    })
}

pub async fn serve(
    router: Router,
    listener: UnixListener,
    path: PathBuf,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let result = router
        .serve_with_incoming_shutdown(
            UnixListenerStream::new(listener),
            shutdown.cancelled_owned(),
        )
        .await;
    let _ = std::fs::remove_file(&path);
    result.map_err(|source| ServeError::Serve { path, source })
}

/// Serves `router` on `listener` for clients that send a socket path as `:authority` (the
/// kubelet's registration client): each connection is piped through the rewrite of
/// frames.rs to an in-memory stream that tonic serves.
pub async fn serve_rewriting_authority(
    router: Router,
    listener: UnixListener,
    path: PathBuf,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let (connections, incoming) = mpsc::channel::<io::Result<DuplexStream>>(8);
    let accept = async {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = shutdown.cancelled() => return,
            };
            match accepted {
                Ok((client, _)) => {
                    let (server_side, proxy_side) = tokio::io::duplex(64 * 1024);
                    tokio::spawn(pipe(client, proxy_side));
                    if connections.send(Ok(server_side)).await.is_err() {
                        return;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "accepting a registration connection failed"),
            }
        }
    };
    let serve = serve_incoming(
        router,
        ReceiverStream::new(incoming),
        path,
        shutdown.clone(),
    );
    let ((), result) = tokio::join!(accept, serve);
    result
}

async fn serve_incoming(
    router: Router,
    incoming: ReceiverStream<io::Result<DuplexStream>>,
    path: PathBuf,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let result = router
        .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
        .await;
    let _ = std::fs::remove_file(&path);
    result.map_err(|source| ServeError::Serve { path, source })
}

/// Copies the server's frames back as they are and the client's through the rewrite;
/// either side closing ends both.
async fn pipe(client: UnixStream, server: DuplexStream) {
    let (client_read, mut client_write) = client.into_split();
    let (server_read, mut server_write) = tokio::io::split(server);
    let mut server_read = server_read;
    let responses = tokio::io::copy(&mut server_read, &mut client_write);
    let requests = forward_requests(client_read, &mut server_write);
    let outcome = tokio::select! {
        r = responses => r.map(|_| ()),
        r = requests => r,
    };
    if let Err(e) = outcome {
        tracing::debug!(error = %e, "a registration connection ended");
    }
}

async fn forward_requests(
    mut from: impl AsyncRead + Unpin,
    to: &mut (impl AsyncWrite + Unpin),
) -> io::Result<()> {
    let mut preface = [0u8; CLIENT_PREFACE.len()];
    from.read_exact(&mut preface).await?;
    to.write_all(&preface).await?;
    let mut rewriter = RequestRewriter::default();
    loop {
        let mut head = [0u8; FRAME_HEADER_LEN];
        match from.read_exact(&mut head).await {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            other => other?,
        };
        let mut payload = vec![0u8; payload_len(&head)];
        from.read_exact(&mut payload).await?;
        let out = rewriter
            .frame(head, &payload)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        to.write_all(&out).await?;
        to.flush().await?;
    }
}

//! gRPC over Unix sockets: binding (a stale socket of a previous run is replaced) and
//! serving until shutdown, then removing the socket so the kubelet sees the plugin go.

use std::io;
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Router;

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

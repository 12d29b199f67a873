//! TLS connections for the gRPC server: accepted from the TCP listener, each handshake
//! in a task of its own with a deadline (a client that stalls mid-handshake holds up no
//! one else), handed to the server as they complete.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

/// How long a client may take to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Completed handshakes waiting for the server to take them.
const BACKLOG: usize = 64;

/// The TLS connections of `listener`, until `shutdown`. Handshakes that fail are logged
/// and dropped; they never end the stream.
pub fn tls_incoming(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    shutdown: CancellationToken,
) -> ReceiverStream<Result<TlsStream<TcpStream>, io::Error>> {
    let (sender, receiver) = mpsc::channel(BACKLOG);
    let acceptor = TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(connection) => connection,
                Err(err) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!(error = %err, "accepting a TCP connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let (acceptor, sender) = (acceptor.clone(), sender.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => {
                        let _ = sender.send(Ok(tls)).await;
                    }
                    Ok(Err(err)) => tracing::debug!(%peer, error = %err, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(receiver)
}

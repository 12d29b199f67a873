//! An HTTPS listener for axum: TCP connections whose TLS handshakes run in tasks of their
//! own (a slow or stalled client holds up nobody else, and gives up after
//! [`HANDSHAKE_TIMEOUT`]), handed to `axum::serve` once they are through. HTTP/1.1 only:
//! the apiserver's webhook client speaks HTTP/1.1 (it turned HTTP/2 off for webhooks).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client has to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections through their handshake, waiting for the server to take them.
const READY_CONNECTIONS: usize = 64;

/// A TLS server configuration for one certificate and key (PEM), speaking HTTP/1.1.
pub fn server_config(cert_pem: &str, key_pem: &str) -> Result<rustls::ServerConfig, TlsError> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem(e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| TlsError::Pem(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Why a TLS server configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading the certificate or key: {0}")]
    Pem(String),
    #[error("the certificate and key cannot serve: {0}")]
    Rustls(#[from] rustls::Error),
}

/// TLS connections accepted on a TCP listener, for `axum::serve`.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    /// Held only to stop the accept loop when the listener goes.
    _acceptor: AbortOnDrop,
}

impl TlsListener {
    /// Accepts on `tcp` and shakes hands with `config`, until dropped.
    pub fn new(tcp: TcpListener, config: rustls::ServerConfig) -> io::Result<Self> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(READY_CONNECTIONS);
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let task = tokio::spawn(accept_loop(tcp, acceptor, tx));
        Ok(Self {
            ready,
            local,
            _acceptor: AbortOnDrop(task),
        })
    }
}

async fn accept_loop(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (stream, peer) = match tcp.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of file descriptors and the like: wait a little, as axum does.
                tracing::warn!(error = %err, "accepting a TLS connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (acceptor, ready) = (acceptor.clone(), ready.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(err)) => tracing::debug!(%peer, error = %err, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop ended (it never does while the listener lives).
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// Stops the accept loop with the listener.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
#[path = "tls_listener_tests.rs"]
mod tests;

//! An HTTPS listener for axum: TCP connections whose TLS handshakes run in tasks of their
//! own (a slow or stalled client holds up nobody else, and gives up after
//! [`HANDSHAKE_TIMEOUT`]), handed to `axum::serve` once they are through. HTTP/1.1 only:
//! the apiserver's webhook client speaks HTTP/1.1 (it turned HTTP/2 off for webhooks).
//!
//! With [`ClientRoots`] the listener asks every client for a certificate: one that is
//! presented must chain to those roots or the handshake fails; a client that presents
//! none still connects, and [`verified_peer`] tells the server so, route by route. Not
//! required at the handshake because the apiserver presents its webhook client
//! certificate to admission webhooks only (its `AdmissionConfiguration`): its CRD
//! conversion client never presents one.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client has to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections through their handshake, waiting for the server to take them.
const READY_CONNECTIONS: usize = 64;

/// The CAs whose client certificates the listener verifies.
#[derive(Clone, Debug)]
pub struct ClientRoots(Arc<rustls::RootCertStore>);

impl ClientRoots {
    /// The CA certificates of a PEM bundle; a bundle without one is refused, since it
    /// would let no client in and say nothing about why.
    pub fn from_pem(bundle_pem: &str) -> Result<Self, TlsError> {
        let certs = CertificateDer::pem_slice_iter(bundle_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Pem(e.to_string()))?;
        if certs.is_empty() {
            return Err(TlsError::NoClientCa);
        }
        let mut roots = rustls::RootCertStore::empty();
        for cert in certs {
            roots.add(cert)?;
        }
        Ok(Self(Arc::new(roots)))
    }
}

/// A TLS server configuration for one certificate and key (PEM), speaking HTTP/1.1; with
/// `clients`, a client certificate is asked for and, when presented, verified.
pub fn server_config(
    cert_pem: &str,
    key_pem: &str,
    clients: Option<&ClientRoots>,
) -> Result<rustls::ServerConfig, TlsError> {
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem(e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| TlsError::Pem(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match clients {
        None => builder.with_no_client_auth(),
        Some(ClientRoots(roots)) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::ClientVerifier(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The certificate a connection's client presented, which the listener's
/// [`ClientRoots`] verified (a listener without them verifies nothing and gives `None`).
pub fn verified_peer(stream: &TlsStream<TcpStream>) -> Option<CertificateDer<'static>> {
    let (_, connection) = stream.get_ref();
    let first = connection.peer_certificates()?.first()?;
    Some(first.clone().into_owned())
}

/// Why a TLS server configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading the certificate or key: {0}")]
    Pem(String),
    #[error("the certificate and key cannot serve: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("the client CA bundle holds no certificate")]
    NoClientCa,
    #[error("the client CA bundle cannot verify client certificates: {0}")]
    ClientVerifier(String),
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

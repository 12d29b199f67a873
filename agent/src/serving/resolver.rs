//! The serving certificate of the TLS listener as a value that can be replaced while the
//! agent runs: each new connection is handed the certificate current at its handshake,
//! connections already open keep the one they started with.

use std::sync::{Arc, RwLock};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Why a PEM certificate and key cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("the certificate is not PEM: {0}")]
    Certificate(String),
    #[error("the certificate PEM holds no certificate")]
    NoCertificate,
    #[error("the private key is not PEM: {0}")]
    Key(String),
    #[error("the key cannot be used with the certificate: {0}")]
    Unusable(#[source] rustls::Error),
    #[error("building the TLS configuration: {0}")]
    Config(#[source] rustls::Error),
}

/// The crypto the agent's TLS uses (ring, as every other TLS in the workspace).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A certificate chain and its key, checked to belong together.
pub fn certified_key(cert_pem: &str, key_pem: &str) -> Result<CertifiedKey, CertError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertError::Certificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(CertError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| CertError::Key(e.to_string()))?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(CertError::Unusable)
}

/// The certificate the listener serves now; [`ServingCert::replace`] swaps it.
#[derive(Debug)]
pub struct ServingCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ServingCert {
    pub fn new(initial: CertifiedKey) -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(Arc::new(initial)),
        })
    }

    /// The certificate new handshakes get.
    pub fn current(&self) -> Arc<CertifiedKey> {
        // Replaced whole, so a poisoned lock still holds a usable certificate.
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Serves `next` from the next handshake on.
    pub fn replace(&self, next: CertifiedKey) {
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(next);
    }

    /// A TLS server configuration (TLS 1.2 and 1.3, ALPN h2 for gRPC, no client
    /// certificates: callers authenticate with bearer tokens) resolving to this
    /// certificate at each handshake.
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, CertError> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(CertError::Config)?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

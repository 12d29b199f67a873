//! The TLS serving certificate of the agent's gRPC listener, replaced without a restart:
//! a resolver whose certificate can be swapped ([`resolver`]), the TLS accept loop that
//! uses it ([`acceptor`]), and what keeps it current ([`renewal`]): certificates issued
//! through the CSR API ([`csr`], `--csr-signer`), or the `--tls-cert`/`--tls-key` files
//! read again when they change. Without either the agent serves the self-signed
//! certificate it made at start.

pub mod acceptor;
pub mod csr;
pub mod renewal;
pub mod resolver;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

pub use acceptor::tls_incoming;
pub use csr::{CsrError, CsrSettings, Issued, request_certificate};
pub use renewal::{CertificateSource, KubeCsr, keep_issued, reload_files};
pub use resolver::{CertError, ServingCert, certified_key};

use crate::config::Args;

/// The lifetime asked for in each CSR; the control plane's signer gives at most a day.
pub const CSR_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// How often a pending CSR is read again.
pub const CSR_POLL: Duration = Duration::from_secs(2);
/// How long one CSR is waited for before a new one is made.
pub const CSR_WAIT: Duration = Duration::from_secs(300);

/// Why certificate files cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error("reading TLS file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("TLS files {cert}: {source}")]
    Unusable {
        cert: PathBuf,
        #[source]
        source: CertError,
    },
}

/// The certificate and key in these PEM files, checked to belong together.
pub async fn load_files(cert: &Path, key: &Path) -> Result<CertifiedKey, FilesError> {
    let read = |path: &Path| {
        let path = path.to_owned();
        async move {
            tokio::fs::read_to_string(&path)
                .await
                .map_err(|source| FilesError::Read { path, source })
        }
    };
    let (cert_pem, key_pem) = (read(cert).await?, read(key).await?);
    certified_key(&cert_pem, &key_pem).map_err(|source| FilesError::Unusable {
        cert: cert.to_owned(),
        source,
    })
}

/// What the CSR client asks for, from the flags; None unless `--csr-signer` is set.
pub fn csr_settings(args: &Args) -> Option<CsrSettings> {
    Some(CsrSettings {
        signer: args.csr_signer.clone()?,
        node: args.node_name.clone(),
        addresses: args.node_ips.clone(),
        lifetime: CSR_LIFETIME,
        poll: CSR_POLL,
        wait: CSR_WAIT,
    })
}

/// Keeps `serving` current as the flags say, until `shutdown`.
pub async fn keep_current(
    args: &Args,
    kube: kube::Client,
    serving: Arc<ServingCert>,
    shutdown: CancellationToken,
) {
    if let Some(settings) = csr_settings(args) {
        let source = KubeCsr {
            csrs: kube::Api::all(kube),
            settings,
        };
        keep_issued(source, serving, shutdown).await;
    } else if let Some((cert, key)) = args.tls_files() {
        let (cert, key) = (cert.to_owned(), key.to_owned());
        reload_files(cert, key, serving, renewal::FILE_POLL, shutdown).await;
    } else {
        shutdown.cancelled().await;
    }
}

#[cfg(test)]
mod tests;

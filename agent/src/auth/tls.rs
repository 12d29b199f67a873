//! The TLS identity the gRPC listener starts with: from files, or a self-signed
//! certificate generated at start (`crate::serving` replaces it later).

use std::path::{Path, PathBuf};

/// Why there is no TLS identity.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading TLS file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("generating a self-signed certificate")]
    Generate(#[from] rcgen::Error),
}

/// A PEM certificate (chain) and its key.
#[derive(Clone)]
pub struct TlsMaterial {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

impl TlsMaterial {
    /// Reads a certificate and key from PEM files.
    pub async fn load(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        Ok(Self {
            cert_pem: read(cert).await?,
            key_pem: read(key).await?,
        })
    }

    /// A self-signed certificate for `names` (DNS names or IP addresses).
    pub fn self_signed(names: Vec<String>) -> Result<Self, TlsError> {
        let certified = rcgen::generate_simple_self_signed(names)?;
        Ok(Self {
            cert_pem: certified.cert.pem(),
            key_pem: certified.signing_key.serialize_pem(),
        })
    }
}

async fn read(path: &Path) -> Result<String, TlsError> {
    tokio::fs::read_to_string(path)
        .await
        .map_err(|source| TlsError::Read {
            path: path.to_owned(),
            source,
        })
}

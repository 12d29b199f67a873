//! The CA certificates agents' serving certificates are verified against: the bundle in
//! `--agent-ca-file` (the cluster CA, for certificates made by deploy/local/lib/certs.sh)
//! plus the control plane's own signer CA (certificates issued through the CSR API).
//! The file is read again periodically, so a rotated bundle is trusted without a restart.

use std::path::{Path, PathBuf};

use rustls::pki_types::{CertificateDer, pem::PemObject as _};

use super::AgentError;

/// Where the trusted CA certificates come from.
#[derive(Debug, Clone)]
pub struct CaSource {
    /// A PEM bundle on disk, read at start and re-read on [`CaSource::read`].
    pub file: PathBuf,
    /// The signer CA (PEM), fixed for the life of the process.
    pub signer_ca: Option<String>,
}

impl CaSource {
    /// The PEM bundle to trust now: the file's certificates, then the signer CA's. Fails
    /// if the file cannot be read or holds no certificate, as tonic would only notice at
    /// the first handshake.
    pub fn read(&self) -> Result<Vec<u8>, AgentError> {
        let mut pem = std::fs::read(&self.file).map_err(|e| ca_error(&self.file, e.to_string()))?;
        check(&pem).map_err(|reason| ca_error(&self.file, reason))?;
        if let Some(signer_ca) = &self.signer_ca {
            if !pem.ends_with(b"\n") {
                pem.push(b'\n');
            }
            pem.extend_from_slice(signer_ca.as_bytes());
        }
        Ok(pem)
    }
}

fn check(pem: &[u8]) -> Result<(), String> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM certificate bundle: {e}"))?;
    if certificates.is_empty() {
        return Err("holds no PEM certificate".to_owned());
    }
    Ok(())
}

fn ca_error(path: &Path, reason: String) -> AgentError {
    AgentError::Ca {
        path: path.to_owned(),
        reason,
    }
}

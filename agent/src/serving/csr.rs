//! Asking the cluster for a serving certificate through the CSR API: a new key made in
//! memory (it never leaves the process), a CertificateSigningRequest for this node only
//! (common name and DNS name = node name, IP addresses = the node's), created with the
//! agent's own pod-bound token, then read until it is issued, denied or failed.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};
use x509_parser::prelude::{FromDer as _, X509Certificate};

/// The usages of a serving certificate, as the CSR API names them.
pub const SERVING_USAGES: [&str; 3] = ["digital signature", "key encipherment", "server auth"];

/// What to ask for.
#[derive(Debug, Clone)]
pub struct CsrSettings {
    /// `spec.signerName`, e.g. `stevedore.dev/agent-serving`.
    pub signer: String,
    /// This node's name: the common name and DNS name asked for.
    pub node: String,
    /// This node's addresses: the IP addresses asked for.
    pub addresses: Vec<IpAddr>,
    /// The lifetime asked for (`spec.expirationSeconds`); the signer may give less.
    pub lifetime: Duration,
    /// How often to look whether the request was answered.
    pub poll: Duration,
    /// How long to wait for an answer before giving up on this request.
    pub wait: Duration,
}

/// An issued certificate and its key.
#[derive(Clone)]
pub struct Issued {
    /// The CSR it was issued for.
    pub csr: String,
    pub cert_pem: String,
    pub key_pem: String,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("csr", &self.csr)
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// Why no certificate was issued this time.
#[derive(Debug, thiserror::Error)]
pub enum CsrError {
    #[error("making the key and request: {0}")]
    Request(#[source] rcgen::Error),
    #[error("creating the CSR: {message}")]
    Create { message: String },
    #[error("reading CSR {name}: {message}")]
    Read { name: String, message: String },
    #[error("CSR {name} was denied: {reason}")]
    Denied { name: String, reason: String },
    #[error("CSR {name} failed: {reason}")]
    Failed { name: String, reason: String },
    #[error("CSR {name} was not answered within {waited:?}")]
    NotAnswered { name: String, waited: Duration },
    #[error("the certificate issued for CSR {name} cannot be used: {reason}")]
    Unusable { name: String, reason: String },
}

/// Creates a CSR for this node with a new key and waits for its certificate.
pub async fn request_certificate(
    csrs: &Api<CertificateSigningRequest>,
    settings: &CsrSettings,
) -> Result<Issued, CsrError> {
    let key = KeyPair::generate().map_err(CsrError::Request)?;
    let request = pem_request(&key, &settings.node, &settings.addresses)?;
    let created = csrs
        .create(&PostParams::default(), &csr_object(settings, request))
        .await
        .map_err(|err| CsrError::Create {
            message: api_message(&err),
        })?;
    let name = created.metadata.name.unwrap_or_default();
    tracing::info!(csr = %name, signer = %settings.signer, "requested a serving certificate");
    let cert_pem = wait_for_certificate(csrs, &name, settings).await?;
    issued(&name, cert_pem, &key)
}

/// A PKCS#10 request (PEM) for `node`, signed with `key`.
pub fn pem_request(key: &KeyPair, node: &str, addresses: &[IpAddr]) -> Result<String, CsrError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, node);
    let dns = node.try_into().map_err(CsrError::Request)?;
    params.subject_alt_names.push(SanType::DnsName(dns));
    params
        .subject_alt_names
        .extend(addresses.iter().map(|ip| SanType::IpAddress(*ip)));
    let request = params.serialize_request(key).map_err(CsrError::Request)?;
    request.pem().map_err(CsrError::Request)
}

/// The CSR object for `request`, named after the node (the apiserver adds a suffix).
pub fn csr_object(settings: &CsrSettings, request: String) -> CertificateSigningRequest {
    CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some(format!("stevedore-agent-{}-", settings.node)),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_owned(),
                "stevedore-agent".to_owned(),
            )])),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(request.into_bytes()),
            signer_name: settings.signer.clone(),
            usages: Some(SERVING_USAGES.map(str::to_owned).to_vec()),
            expiration_seconds: i32::try_from(settings.lifetime.as_secs()).ok(),
            ..Default::default()
        },
        status: None,
    }
}

/// Reads CSR `name` every `settings.poll` until it has a certificate (returned), a
/// Denied or Failed condition, or `settings.wait` has passed. Polling rather than a
/// watch keeps the agent's RBAC to `get` on CSRs.
async fn wait_for_certificate(
    csrs: &Api<CertificateSigningRequest>,
    name: &str,
    settings: &CsrSettings,
) -> Result<String, CsrError> {
    let deadline = tokio::time::Instant::now() + settings.wait;
    loop {
        let csr = csrs.get(name).await.map_err(|err| CsrError::Read {
            name: name.to_owned(),
            message: api_message(&err),
        })?;
        if let Some(answer) = answer(name, &csr) {
            return answer;
        }
        if tokio::time::Instant::now() + settings.poll > deadline {
            return Err(CsrError::NotAnswered {
                name: name.to_owned(),
                waited: settings.wait,
            });
        }
        tokio::time::sleep(settings.poll).await;
    }
}

/// The certificate of `csr`, its denial or failure, or None while it is pending.
pub fn answer(name: &str, csr: &CertificateSigningRequest) -> Option<Result<String, CsrError>> {
    let status = csr.status.as_ref()?;
    for condition in status.conditions.iter().flatten() {
        if condition.status != "True" {
            continue;
        }
        let reason = || {
            condition
                .message
                .clone()
                .or_else(|| condition.reason.clone())
                .unwrap_or_default()
        };
        let name = name.to_owned();
        match condition.type_.as_str() {
            "Denied" => {
                return Some(Err(CsrError::Denied {
                    name,
                    reason: reason(),
                }));
            }
            "Failed" => {
                return Some(Err(CsrError::Failed {
                    name,
                    reason: reason(),
                }));
            }
            _ => {}
        }
    }
    let certificate = status.certificate.as_ref().filter(|c| !c.0.is_empty())?;
    Some(
        String::from_utf8(certificate.0.clone()).map_err(|_| CsrError::Unusable {
            name: name.to_owned(),
            reason: "it is not PEM text".to_owned(),
        }),
    )
}

/// The issued certificate with `key`, checked to certify that key, and its validity.
fn issued(name: &str, cert_pem: String, key: &KeyPair) -> Result<Issued, CsrError> {
    let unusable = |reason: String| CsrError::Unusable {
        name: name.to_owned(),
        reason,
    };
    let (not_before, not_after) = validity(&cert_pem).map_err(unusable)?;
    let key_pem = key.serialize_pem();
    super::resolver::certified_key(&cert_pem, &key_pem).map_err(|e| unusable(e.to_string()))?;
    Ok(Issued {
        csr: name.to_owned(),
        cert_pem,
        key_pem,
        not_before,
        not_after,
    })
}

/// The validity period of the first certificate in `pem`.
pub fn validity(pem: &str) -> Result<(SystemTime, SystemTime), String> {
    use rustls::pki_types::{CertificateDer, pem::PemObject as _};
    let der = CertificateDer::from_pem_slice(pem.as_bytes()).map_err(|e| e.to_string())?;
    let (_, cert) = X509Certificate::from_der(&der).map_err(|e| e.to_string())?;
    let at = |seconds: i64| UNIX_EPOCH + Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    let validity = cert.validity();
    Ok((
        at(validity.not_before.timestamp()),
        at(validity.not_after.timestamp()),
    ))
}

/// The apiserver's own message, or the client's description of what failed.
fn api_message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[path = "csr_tests.rs"]
mod tests;

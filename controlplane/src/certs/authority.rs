//! The certificate authority of agent serving certificates: a CA key the control plane
//! creates once (kept in a kube-system Secret, `ca_secret.rs`) and the leaves it signs,
//! which carry exactly the names of the request and nothing the signer was not asked.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};

use super::request::ParsedCsr;

/// How long the CA is valid. Long: rotating it means every agent's certificate and every
/// replica's trust change at once, which this project does not automate.
pub const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// How long an agent serving certificate is valid (shorter if the CSR asks for less).
/// A day bounds how long a key taken from a node stays useful; agents renew at 80%.
pub const LEAF_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// The shortest certificate signed, as the apiserver's own minimum for
/// `spec.expirationSeconds`: a CSR asking for less gets this much.
pub const MIN_LEAF_LIFETIME: Duration = Duration::from_secs(600);

/// Certificates start this long before they are signed, so a verifier whose clock is a
/// little behind the control plane's does not reject them as not yet valid.
const BACKDATE: Duration = Duration::from_secs(300);

/// Common name of the CA certificate.
const CA_COMMON_NAME: &str = "stevedore-agent-ca";

/// Why the CA could not be created, read or used.
#[derive(Debug, thiserror::Error)]
pub enum AuthorityError {
    #[error("generating the CA: {0}")]
    Generate(#[source] rcgen::Error),
    #[error("reading the CA {what}: {source}")]
    Read {
        what: &'static str,
        #[source]
        source: rcgen::Error,
    },
    #[error("signing a certificate for {common_name}: {source}")]
    Sign {
        common_name: String,
        #[source]
        source: rcgen::Error,
    },
}

/// The CA: its certificate (PEM) and the issuer that signs with its key.
pub struct Authority {
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    /// A new CA (ECDSA P-256) of agent serving certificates, valid from `now` for
    /// [`CA_LIFETIME`].
    pub fn generate(now: SystemTime) -> Result<Self, AuthorityError> {
        Self::generate_named(CA_COMMON_NAME, now)
    }

    /// A new CA (ECDSA P-256) named `common_name`, valid from `now` for [`CA_LIFETIME`].
    pub fn generate_named(common_name: &str, now: SystemTime) -> Result<Self, AuthorityError> {
        let key = KeyPair::generate().map_err(AuthorityError::Generate)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.serial_number = Some(random_serial());
        set_validity(&mut params, now, CA_LIFETIME);
        let cert = params.self_signed(&key).map_err(AuthorityError::Generate)?;
        let cert_pem = cert.pem();
        let key_pem = key.serialize_pem();
        Ok(Self {
            cert_pem,
            key_pem,
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA kept earlier, from its PEM certificate and key.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, AuthorityError> {
        let read = |what| move |source| AuthorityError::Read { what, source };
        let key = KeyPair::from_pem(key_pem).map_err(read("key"))?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key).map_err(read("certificate"))?;
        Ok(Self {
            cert_pem: cert_pem.to_owned(),
            key_pem: key_pem.to_owned(),
            issuer,
        })
    }

    /// The CA certificate, which verifiers of agent certificates trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA key, to keep in the Secret.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// A serving certificate (PEM) for `csr`'s key, naming its common name, DNS names and
    /// IP addresses and nothing else, for server authentication only, valid from `now`
    /// for [`leaf_lifetime`].
    pub fn sign(&self, csr: &ParsedCsr, now: SystemTime) -> Result<String, AuthorityError> {
        let request = &csr.request;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, request.common_name.as_str());
        let sign_error = |source| AuthorityError::Sign {
            common_name: request.common_name.clone(),
            source,
        };
        for name in &request.dns_names {
            let name = name.as_str().try_into().map_err(sign_error)?;
            params.subject_alt_names.push(SanType::DnsName(name));
        }
        params.subject_alt_names.extend(
            request
                .ip_addresses
                .iter()
                .map(|ip| SanType::IpAddress(*ip)),
        );
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = key_usages(&request.usages);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(random_serial());
        set_validity(&mut params, now, leaf_lifetime(csr.expiration));
        let cert = params
            .signed_by(&csr.public_key, &self.issuer)
            .map_err(sign_error)?;
        Ok(cert.pem())
    }
}

impl Authority {
    /// A serving certificate with a key of its own (ECDSA P-256) for the control plane's
    /// own server (the admission webhook), naming `dns_names`, valid from `now` for
    /// [`SERVER_LIFETIME`]. Each replica makes its own at start; the apiserver trusts
    /// the CA, so the key never leaves the replica.
    pub fn issue_server(
        &self,
        dns_names: &[String],
        now: SystemTime,
    ) -> Result<ServerIdentity, AuthorityError> {
        let common_name = dns_names.first().cloned().unwrap_or_default();
        let sign_error = |source| AuthorityError::Sign {
            common_name: common_name.clone(),
            source,
        };
        let key = KeyPair::generate().map_err(sign_error)?;
        let mut params = CertificateParams::new(dns_names.to_vec()).map_err(sign_error)?;
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name.as_str());
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(random_serial());
        set_validity(&mut params, now, SERVER_LIFETIME);
        let cert = params.signed_by(&key, &self.issuer).map_err(sign_error)?;
        Ok(ServerIdentity {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// How long the control plane's own serving certificate is valid: a replica makes a new
/// one each time it starts, so this only bounds a replica that is never restarted.
pub const SERVER_LIFETIME: Duration = Duration::from_secs(2 * 365 * 24 * 3600);

/// A serving certificate and its key (PEM).
pub struct ServerIdentity {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for ServerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerIdentity").finish_non_exhaustive()
    }
}

/// The lifetime of a leaf: [`LEAF_LIFETIME`], or less if the request asks for less, but
/// never under [`MIN_LEAF_LIFETIME`].
pub fn leaf_lifetime(requested: Option<Duration>) -> Duration {
    requested
        .map_or(LEAF_LIFETIME, |asked| asked.min(LEAF_LIFETIME))
        .max(MIN_LEAF_LIFETIME)
}

/// The key usages among the approved CSR usages (`server auth` is an extended usage).
fn key_usages(usages: &[String]) -> Vec<KeyUsagePurpose> {
    usages
        .iter()
        .filter_map(|usage| match usage.as_str() {
            "digital signature" => Some(KeyUsagePurpose::DigitalSignature),
            "key encipherment" => Some(KeyUsagePurpose::KeyEncipherment),
            _ => None,
        })
        .collect()
}

/// 127 random bits, positive as RFC 5280 asks.
fn random_serial() -> SerialNumber {
    let mut bytes = [0u8; 16];
    fastrand::fill(&mut bytes);
    bytes[0] &= 0x7f;
    SerialNumber::from(bytes.to_vec())
}

/// Valid from [`BACKDATE`] before `now` until `now + lifetime`. (rcgen's dates are built
/// from the epoch so this crate need not depend on the `time` crate itself.)
fn set_validity(params: &mut CertificateParams, now: SystemTime, lifetime: Duration) {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + since_epoch.saturating_sub(BACKDATE);
    params.not_after = epoch + since_epoch + lifetime;
}

#[cfg(test)]
#[path = "authority_tests.rs"]
mod tests;

//! What a CertificateSigningRequest object asks for, read from its spec and its PEM
//! request (whose self-signature is checked: the requester holds the key).

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use rcgen::{CertificateSigningRequestParams, DnType, DnValue, SanType};

use super::approval::CertificateRequest;

/// A CSR read and checked far enough to decide on it and to sign it.
#[derive(Debug, Clone)]
pub struct ParsedCsr {
    /// What the approval rule looks at.
    pub request: CertificateRequest,
    /// The requester's public key, which the certificate will certify.
    pub public_key: rcgen::PublicKey,
    /// `spec.expirationSeconds`: the lifetime the requester asked for, if any.
    pub expiration: Option<Duration>,
}

/// Reads `csr`, or says in a sentence why it cannot be read.
pub fn parse(csr: &CertificateSigningRequest) -> Result<ParsedCsr, String> {
    let spec = &csr.spec;
    let pem = std::str::from_utf8(&spec.request.0)
        .map_err(|_| "The request is not PEM text.".to_owned())?;
    let parsed = CertificateSigningRequestParams::from_pem(pem)
        .map_err(|err| format!("The PEM request cannot be used: {err}."))?;
    let common_name = match parsed.params.distinguished_name.get(&DnType::CommonName) {
        Some(value) => dn_text(value).ok_or("The common name is not text.")?,
        None => String::new(),
    };
    let mut dns_names = Vec::new();
    let mut ip_addresses: Vec<IpAddr> = Vec::new();
    for name in &parsed.params.subject_alt_names {
        match name {
            SanType::DnsName(dns) => dns_names.push(dns.as_str().to_owned()),
            SanType::IpAddress(ip) => ip_addresses.push(*ip),
            other => {
                return Err(format!(
                    "The request names {other:?}; only DNS names and IP addresses can be served."
                ));
            }
        }
    }
    let expiration = spec
        .expiration_seconds
        .map(|secs| Duration::from_secs(u64::try_from(secs).unwrap_or(0)));
    Ok(ParsedCsr {
        request: CertificateRequest {
            signer: spec.signer_name.clone(),
            username: spec.username.clone().unwrap_or_default(),
            extra: spec.extra.clone().unwrap_or_default(),
            usages: spec.usages.clone().unwrap_or_default(),
            common_name,
            dns_names,
            ip_addresses,
        },
        public_key: parsed.public_key,
        expiration,
    })
}

fn dn_text(value: &DnValue) -> Option<String> {
    match value {
        DnValue::Utf8String(text) => Some(text.clone()),
        DnValue::PrintableString(text) => Some(text.as_str().to_owned()),
        DnValue::Ia5String(text) => Some(text.as_str().to_owned()),
        _ => None,
    }
}

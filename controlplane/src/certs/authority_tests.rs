use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject as _};
use x509_parser::prelude::{FromDer as _, GeneralName, X509Certificate};

use super::*;
use crate::certs::request::parse;
use crate::certs::test_support::{csr_object, node_a_csr, pem_request};

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).expect("PEM certificate")
}

/// Whether `leaf` verifies as a server certificate for `name` against `ca` alone.
fn verifies(ca: &Authority, leaf: &str, name: &str) -> bool {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der(ca.cert_pem())).expect("CA");
    let verifier = WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .expect("verifier");
    let name = ServerName::try_from(name.to_owned()).expect("server name");
    verifier
        .verify_server_cert(&der(leaf), &[], &name, &[], UnixTime::now())
        .is_ok()
}

#[test]
fn a_leaf_names_exactly_what_was_asked_and_serves_only() {
    let ca = Authority::generate(SystemTime::now()).expect("CA");
    let csr = parse(&node_a_csr()).expect("parsed");
    let leaf = ca.sign(&csr, SystemTime::now()).expect("signed");

    let leaf_der = der(&leaf);
    let (_, cert) = X509Certificate::from_der(&leaf_der).expect("X.509");
    let common_names: Vec<_> = cert
        .subject()
        .iter_common_name()
        .map(|cn| cn.as_str().expect("text").to_owned())
        .collect();
    assert_eq!(common_names, ["node-a"]);
    assert_eq!(cert.subject().iter().count(), 1, "only the common name");
    let sans = cert
        .subject_alternative_name()
        .expect("SAN extension")
        .expect("SANs present");
    let names: Vec<String> = sans
        .value
        .general_names
        .iter()
        .map(|name| match name {
            GeneralName::DNSName(dns) => (*dns).to_owned(),
            GeneralName::IPAddress(ip) => format!("{ip:?}"),
            other => panic!("unexpected SAN {other:?}"),
        })
        .collect();
    assert_eq!(names, ["node-a", "[10, 0, 0, 1]"]);
    let eku = cert
        .extended_key_usage()
        .expect("EKU")
        .expect("EKU present")
        .value;
    assert!(eku.server_auth && !eku.client_auth && !eku.any && eku.other.is_empty());
    assert!(!cert.is_ca());
    assert_eq!(
        cert.validity()
            .time_to_expiration()
            .map(|d| d.whole_hours()),
        Some(23),
        "a day, less the time spent"
    );

    assert!(verifies(&ca, &leaf, "node-a"));
    assert!(verifies(&ca, &leaf, "10.0.0.1"));
    assert!(!verifies(&ca, &leaf, "10.0.0.2"), "another node's IP");
    assert!(!verifies(&ca, &leaf, "node-b"), "another node's name");
}

#[test]
fn a_leaf_verifies_only_against_its_own_ca() {
    let ca = Authority::generate(SystemTime::now()).expect("CA");
    let other = Authority::generate(SystemTime::now()).expect("CA");
    let leaf = ca
        .sign(&parse(&node_a_csr()).expect("parsed"), SystemTime::now())
        .expect("signed");
    assert!(verifies(&ca, &leaf, "node-a"));
    assert!(!verifies(&other, &leaf, "node-a"));
}

#[test]
fn a_ca_read_back_from_its_pem_signs_as_the_original() {
    let ca = Authority::generate(SystemTime::now()).expect("CA");
    let kept = Authority::from_pem(ca.cert_pem(), ca.key_pem()).expect("read back");
    let leaf = kept
        .sign(&parse(&node_a_csr()).expect("parsed"), SystemTime::now())
        .expect("signed");
    assert!(verifies(&ca, &leaf, "node-a"));
}

#[test]
fn a_leaf_from_the_past_has_expired() {
    let ca =
        Authority::generate(SystemTime::now() - Duration::from_secs(7 * 24 * 3600)).expect("CA");
    let two_days_ago = SystemTime::now() - Duration::from_secs(48 * 3600);
    let leaf = ca
        .sign(&parse(&node_a_csr()).expect("parsed"), two_days_ago)
        .expect("signed");
    assert!(!verifies(&ca, &leaf, "node-a"));
}

#[test]
fn the_key_is_the_requesters() {
    let ca = Authority::generate(SystemTime::now()).expect("CA");
    let (pem, key) = pem_request("node-a", &["node-a"], &[]);
    let leaf = ca
        .sign(
            &parse(&csr_object(&pem, "node-a")).expect("parsed"),
            SystemTime::now(),
        )
        .expect("signed");
    let leaf_der = der(&leaf);
    let (_, cert) = X509Certificate::from_der(&leaf_der).expect("X.509");
    assert_eq!(
        cert.public_key().subject_public_key.data.as_ref(),
        key.public_key_raw()
    );
}

#[test]
fn leaf_lifetime_table() {
    let minute = Duration::from_secs(60);
    let cases = [
        (None, LEAF_LIFETIME),
        (Some(60 * minute), 60 * minute),
        (Some(LEAF_LIFETIME * 30), LEAF_LIFETIME),
        (Some(minute), MIN_LEAF_LIFETIME),
    ];
    for (asked, lifetime) in cases {
        assert_eq!(leaf_lifetime(asked), lifetime, "{asked:?}");
    }
}

#[test]
fn a_server_identity_serves_its_service_names_only_and_its_key_matches() {
    let ca = Authority::generate_named("stevedore-webhook-ca", SystemTime::now()).expect("CA");
    let names = [
        "stevedore-controlplane-webhook.kube-system.svc".to_owned(),
        "stevedore-controlplane-webhook.kube-system.svc.cluster.local".to_owned(),
    ];
    let identity = ca.issue_server(&names, SystemTime::now()).expect("issued");
    assert!(verifies(&ca, &identity.cert_pem, &names[0]));
    assert!(verifies(&ca, &identity.cert_pem, &names[1]));
    assert!(!verifies(
        &ca,
        &identity.cert_pem,
        "stevedore-agent.kube-system.svc"
    ));
    let other = Authority::generate(SystemTime::now()).expect("CA");
    assert!(!verifies(&other, &identity.cert_pem, &names[0]));
    // The key is the certificate's: rustls accepts the pair for a server.
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(identity.key_pem.as_bytes())
        .expect("PEM key");
    let provider = rustls::crypto::ring::default_provider();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![der(&identity.cert_pem)], key);
    assert!(config.is_ok(), "the key matches the certificate");
}

use std::time::SystemTime;

use axum::Router;
use axum::routing::post;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_rustls::TlsConnector;

use super::*;
use crate::certs::Authority;

const NAME: &str = "webhook.kube-system.svc";

/// A listener on a free local port serving `POST /review` with a certificate for
/// [`NAME`]; returns its address and the CA to trust.
async fn serving() -> (SocketAddr, Authority) {
    let ca = Authority::generate_named("test-ca", SystemTime::now()).expect("CA");
    let identity = ca
        .issue_server(&[NAME.to_owned()], SystemTime::now())
        .expect("identity");
    let config = server_config(&identity.cert_pem, &identity.key_pem, None).expect("config");
    let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let listener = TlsListener::new(tcp, config).expect("listener");
    let addr = axum::serve::Listener::local_addr(&listener).expect("address");
    let router = Router::new().route("/review", post(|body: String| async move { body }));
    tokio::spawn(async move { axum::serve(listener, router).await });
    (addr, ca)
}

/// Posts `body` over TLS trusting `ca`, offering only HTTP/1.1 as the apiserver does.
async fn post_review(addr: SocketAddr, ca: &Authority, body: &str) -> String {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).expect("PEM"))
        .expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from(NAME).expect("name");
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("handshake");
    let request = format!(
        "POST /review HTTP/1.1\r\nHost: {NAME}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    tls.read_to_string(&mut response).await.expect("read");
    response
}

#[tokio::test]
async fn an_http1_client_that_trusts_the_ca_is_served() {
    let (addr, ca) = serving().await;
    let response = post_review(addr, &ca, "review me").await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("review me"), "{response}");
}

#[tokio::test]
async fn a_client_stuck_before_its_handshake_holds_up_nobody() {
    let (addr, ca) = serving().await;
    // Connected, never says hello.
    let _stalled = TcpStream::connect(addr).await.expect("connect");
    let response = tokio::time::timeout(
        Duration::from_secs(5),
        post_review(addr, &ca, "still served"),
    )
    .await
    .expect("served while the other handshake hangs");
    assert!(response.ends_with("still served"), "{response}");
}

#[test]
fn a_key_that_is_not_pem_is_refused_with_a_reason() {
    let ca = Authority::generate_named("test-ca", SystemTime::now()).expect("CA");
    let identity = ca
        .issue_server(&[NAME.to_owned()], SystemTime::now())
        .expect("identity");
    let err = server_config(&identity.cert_pem, "not a key", None).expect_err("refused");
    assert!(
        err.to_string()
            .starts_with("reading the certificate or key"),
        "{err}"
    );
}

#[test]
fn a_client_ca_bundle_without_a_certificate_is_refused_with_a_reason() {
    let ca = Authority::generate_named("test-ca", SystemTime::now()).expect("CA");
    assert!(ClientRoots::from_pem(ca.cert_pem()).is_ok());
    for bundle in ["", "not a certificate"] {
        let err = ClientRoots::from_pem(bundle).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "the client CA bundle holds no certificate",
            "{bundle:?}"
        );
    }
}

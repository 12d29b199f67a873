//! The webhook server's first defence against a forged review, through the real TLS
//! listener: a caller without the apiserver's client certificate is refused on every
//! admission route (when `--webhook-client-ca` is given); `/convert` stays open.

use std::time::SystemTime;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{PrivateKeyDer, ServerName};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::*;

/// A stand-in admission route.
const REVIEW_PATH: &str = "/validate-something";

const HOST: &str = "stevedore-controlplane-webhook.kube-system.svc";

/// A CA of its own for each test.
struct TestCa {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.not_before = SystemTime::now().into();
        let pem = params.self_signed(&key).expect("CA").pem();
        Self {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A certificate and key (PEM) for `cn`, for `usage`.
    fn issue(&self, cn: &str, usage: ExtendedKeyUsagePurpose) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(vec![HOST.to_owned()]).expect("params");
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        params.not_before = SystemTime::now().into();
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        (cert.pem(), key.serialize_pem())
    }
}

/// The webhook's routes (a stand-in review handler that answers "reviewed") served over
/// TLS, asking for client certificates of `client_ca` when given; returns the address and
/// the CA of its serving certificate.
async fn serving(client_ca: Option<&TestCa>, policy: Option<CallerPolicy>) -> (SocketAddr, TestCa) {
    let server_ca = TestCa::new("webhook-ca");
    let (cert, key) = server_ca.issue(HOST, ExtendedKeyUsagePurpose::ServerAuth);
    let roots = client_ca.map(|ca| ClientRoots::from_pem(&ca.pem).expect("client roots"));
    let tls = server_config(&cert, &key, roots.as_ref()).expect("TLS");
    let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let listener = TlsListener::new(tcp, tls).expect("listener");
    let addr = axum::serve::Listener::local_addr(&listener).expect("address");
    let review = Router::new().route(REVIEW_PATH, post(|| async { "reviewed" }));
    let app = routes(review, policy).into_make_service_with_connect_info::<Caller>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, server_ca)
}

/// Posts `body` to `path` trusting `server_ca`, presenting `identity` (certificate and
/// key PEM) when given; the response's status line and body, or the handshake's error.
async fn send(
    addr: SocketAddr,
    server_ca: &TestCa,
    identity: Option<&(String, String)>,
    path: &str,
    body: &str,
) -> Result<String, std::io::Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(server_ca.pem.as_bytes()).expect("PEM"))
        .expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = vec![CertificateDer::from_pem_slice(cert.as_bytes()).expect("cert")];
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key");
            builder.with_client_auth_cert(chain, key).expect("identity")
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(HOST).expect("name");
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    // TLS 1.3 reports a client certificate refused by the server on the first read.
    tls.read_to_string(&mut response).await?;
    Ok(response)
}

#[tokio::test]
async fn with_a_client_ca_only_callers_with_its_certificate_have_a_review_answered() {
    let apiserver_ca = TestCa::new("apiserver-webhook-client-ca");
    let apiserver = apiserver_ca.issue(
        "stevedore-webhook-client",
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let other = apiserver_ca.issue("someone-else", ExtendedKeyUsagePurpose::ClientAuth);
    let named = CallerPolicy {
        names: vec!["stevedore-webhook-client".to_owned()],
    };
    let (addr, server_ca) = serving(Some(&apiserver_ca), Some(named)).await;

    let anonymous = send(addr, &server_ca, None, REVIEW_PATH, "{}")
        .await
        .expect("served");
    assert!(anonymous.starts_with("HTTP/1.1 403"), "{anonymous}");
    assert!(
        anonymous.ends_with(
            "the caller presented no client certificate signed by the CA of --webhook-client-ca."
        ),
        "{anonymous}"
    );
    let answered = send(addr, &server_ca, Some(&apiserver), REVIEW_PATH, "{}")
        .await
        .expect("served");
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    assert!(answered.ends_with("reviewed"), "{answered}");
    let unnamed = send(addr, &server_ca, Some(&other), REVIEW_PATH, "{}")
        .await
        .expect("served");
    assert!(unnamed.starts_with("HTTP/1.1 403"), "{unnamed}");
    assert!(unnamed.contains("\"someone-else\""), "{unnamed}");

    // The apiserver's CRD conversion client presents no certificate: /convert serves it.
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": { "uid": "u1", "desiredAPIVersion": "policy.kruise.io/v1beta1", "objects": [] },
    });
    let converted = send(addr, &server_ca, None, CONVERSION_PATH, &review.to_string())
        .await
        .expect("served");
    assert!(converted.starts_with("HTTP/1.1 200"), "{converted}");
}

#[tokio::test]
async fn a_certificate_of_another_ca_fails_the_handshake() {
    let apiserver_ca = TestCa::new("apiserver-webhook-client-ca");
    let stranger = TestCa::new("stranger-ca").issue(
        "stevedore-webhook-client",
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let (addr, server_ca) = serving(Some(&apiserver_ca), Some(CallerPolicy::default())).await;
    let refused = send(addr, &server_ca, Some(&stranger), REVIEW_PATH, "{}").await;
    assert!(refused.is_err(), "answered: {refused:?}");
}

#[tokio::test]
async fn without_a_client_ca_every_caller_is_answered() {
    let (addr, server_ca) = serving(None, None).await;
    let answered = send(addr, &server_ca, None, REVIEW_PATH, "{}")
        .await
        .expect("served");
    assert!(answered.ends_with("reviewed"), "{answered}");
}

//! The swappable certificate through a real TLS accept loop and an in-process
//! tokio-rustls client, and the files it is reloaded from.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject as _};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

use super::*;

/// A test CA and the leaves it signs for `node-a`.
pub(super) struct Pki {
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    pub(super) fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().expect("CA key");
        let ca_pem = params.self_signed(&key).expect("CA").pem();
        Self {
            ca_pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf for node-a: (certificate PEM, key PEM).
    pub(super) fn leaf(&self) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let params = CertificateParams::new(vec!["node-a".to_owned()]).expect("params");
        let cert = params.signed_by(&key, &self.issuer).expect("leaf");
        (cert.pem(), key.serialize_pem())
    }
}

fn served(pair: &(String, String)) -> rustls::sign::CertifiedKey {
    certified_key(&pair.0, &pair.1).expect("usable pair")
}

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).expect("PEM")
}

fn connector(pki: &Pki) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der(&pki.ca_pem)).expect("root");
    let mut config = rustls::ClientConfig::builder_with_provider(resolver::provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    TlsConnector::from(Arc::new(config))
}

type ClientStream = tokio_rustls::client::TlsStream<TcpStream>;

async fn connect(connector: &TlsConnector, addr: std::net::SocketAddr) -> ClientStream {
    let tcp = TcpStream::connect(addr).await.expect("TCP");
    let name = ServerName::try_from("node-a").expect("name");
    connector.connect(name, tcp).await.expect("TLS handshake")
}

fn peer_certificate(stream: &ClientStream) -> CertificateDer<'static> {
    let certificates = stream
        .get_ref()
        .1
        .peer_certificates()
        .expect("server certificate");
    certificates[0].clone().into_owned()
}

#[tokio::test]
async fn new_connections_get_the_replaced_certificate_and_open_ones_continue() {
    let pki = Pki::new();
    let (first, second) = (pki.leaf(), pki.leaf());
    let serving = ServingCert::new(served(&first));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let shutdown = CancellationToken::new();
    let mut incoming = tls_incoming(
        listener,
        serving.server_config().expect("config"),
        shutdown.clone(),
    );
    let connector = connector(&pki);

    let mut before = connect(&connector, addr).await;
    let mut before_server = incoming.next().await.expect("accepted").expect("TLS");
    assert_eq!(peer_certificate(&before), der(&first.0));
    assert_eq!(before_server.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));

    serving.replace(served(&second));

    let after = connect(&connector, addr).await;
    let _after_server = incoming.next().await.expect("accepted").expect("TLS");
    assert_eq!(peer_certificate(&after), der(&second.0));

    before.write_all(b"still here").await.expect("write");
    let mut buffer = [0u8; 10];
    before_server.read_exact(&mut buffer).await.expect("read");
    assert_eq!(&buffer, b"still here", "the open connection continues");
    shutdown.cancel();
}

#[tokio::test]
async fn a_stalled_handshake_holds_up_no_other_client() {
    let pki = Pki::new();
    let serving = ServingCert::new(served(&pki.leaf()));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let shutdown = CancellationToken::new();
    let mut incoming = tls_incoming(
        listener,
        serving.server_config().expect("config"),
        shutdown.clone(),
    );
    let _silent = TcpStream::connect(addr)
        .await
        .expect("TCP without a handshake");
    let client = connect(&connector(&pki), addr).await;
    let accepted = tokio::time::timeout(Duration::from_secs(5), incoming.next())
        .await
        .expect("not held up by the silent client");
    assert!(accepted.is_some_and(|stream| stream.is_ok()));
    drop(client);
    shutdown.cancel();
}

#[test]
fn a_key_of_another_certificate_is_refused() {
    let pki = Pki::new();
    let (cert, _) = pki.leaf();
    let (_, other_key) = pki.leaf();
    let err = certified_key(&cert, &other_key).expect_err("mismatched pair");
    assert!(matches!(err, CertError::Unusable(_)), "{err:?}");
}

/// A temporary directory removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "stevedore-serving-{}-{test}-{}",
            std::process::id(),
            fastrand_suffix()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }
}

fn fastrand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn changed_files_are_served_without_a_restart() {
    let pki = Pki::new();
    let (first, second) = (pki.leaf(), pki.leaf());
    let dir = TempDir::new("files");
    let (cert, key) = (dir.0.join("tls.crt"), dir.0.join("tls.key"));
    std::fs::write(&cert, &first.0).expect("write");
    std::fs::write(&key, &first.1).expect("write");
    let serving = ServingCert::new(load_files(&cert, &key).await.expect("loads"));
    let shutdown = CancellationToken::new();
    let reload = tokio::spawn(reload_files(
        cert.clone(),
        key.clone(),
        serving.clone(),
        Duration::from_millis(20),
        shutdown.clone(),
    ));

    // The certificate first, the key a moment later: the mismatched pair in between is
    // not served.
    tokio::time::sleep(Duration::from_millis(50)).await;
    std::fs::write(&cert, format!("{}\n", second.0)).expect("write");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        serving.current().cert[0],
        der(&first.0),
        "half-written pair"
    );
    std::fs::write(&key, &second.1).expect("write");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while serving.current().cert[0] != der(&second.0) {
        assert!(tokio::time::Instant::now() < deadline, "never reloaded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    reload.await.expect("reload task");
}

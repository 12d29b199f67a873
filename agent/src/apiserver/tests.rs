use std::{collections::BTreeMap, path::Path};

use base64::Engine as _;

use super::access::{self, SERVICE_ACCOUNT_DIR};
use super::{Token, bearer::Bearer};

/// A file system holding `files`; anything else is not found.
fn files(files: &[(&str, &str)]) -> impl Fn(&Path) -> std::io::Result<Vec<u8>> + use<> {
    let files: BTreeMap<String, Vec<u8>> = (files.iter())
        .map(|(path, text)| ((*path).to_owned(), text.as_bytes().to_vec()))
        .collect();
    move |path: &Path| {
        (files.get(&path.display().to_string()).cloned())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}

fn sa(file: &str) -> String {
    format!("{SERVICE_ACCOUNT_DIR}/{file}")
}

#[test]
fn in_a_pod_the_service_account_gives_server_ca_token_and_namespace() {
    let (ca, ns) = (sa("ca.crt"), sa("namespace"));
    let read = files(&[(&ca, "CA"), (&ns, "kube-system\n")]);
    let got = access::in_cluster(Some("10.96.0.1"), Some("443"), &read).expect("in cluster");
    assert_eq!(got.server, "https://10.96.0.1:443/");
    assert_eq!(got.ca_pem, b"CA");
    assert_eq!(got.token, Some(Token::File(sa("token").into())));
    assert_eq!(got.identity, None);
    assert_eq!(got.namespace, "kube-system");

    let v6 = access::in_cluster(Some("fd00::1"), Some("6443"), &read).expect("IPv6");
    assert_eq!(v6.server, "https://[fd00::1]:6443/");

    let no_ns = access::in_cluster(Some("h"), Some("1"), files(&[(&ca, "CA")])).expect("no ns");
    assert_eq!(no_ns.namespace, "default");

    for (host, port, read, expected) in [
        (None, Some("443"), files(&[]), "KUBECONFIG is not set"),
        (Some(""), Some("443"), files(&[]), "KUBECONFIG is not set"),
        (
            Some("h"),
            Some("443"),
            files(&[]),
            "reading the service account's CA",
        ),
    ] {
        let err = access::in_cluster(host, port, read).expect_err(expected);
        assert!(err.to_string().contains(expected), "{err}");
    }
}

const CA_FILE: &str = "/pki/ca.crt";

fn kubeconfig(cluster: &str, user: &str) -> String {
    format!(
        r#"{{"apiVersion": "v1", "kind": "Config",
            "clusters": [{{"name": "c", "cluster": {{{cluster}}}}}],
            "users": [{{"name": "u", "user": {{{user}}}}}],
            "contexts": [{{"name": "x", "context": {{"cluster": "c", "user": "u", "namespace": "ns"}}}}],
            "current-context": "x"}}"#
    )
}

#[test]
fn a_json_kubeconfig_gives_its_current_contexts_cluster_and_user() {
    let read = files(&[
        (CA_FILE, "CA"),
        ("/pki/admin.crt", "CERT"),
        ("/pki/admin.key", "KEY"),
    ]);
    let server = r#""server": "https://127.0.0.1:6443", "certificate-authority": "/pki/ca.crt""#;
    let certs = r#""client-certificate": "/pki/admin.crt", "client-key": "/pki/admin.key""#;
    let got = access::from_kubeconfig("/k", &kubeconfig(server, certs), &read).expect("certs");
    assert_eq!(got.server, "https://127.0.0.1:6443/");
    assert_eq!(got.ca_pem, b"CA");
    let identity = got.identity.expect("identity");
    assert_eq!(
        (identity.cert_pem, identity.key_pem),
        (b"CERT".to_vec(), b"KEY".to_vec())
    );
    assert_eq!(got.token, None);
    assert_eq!(got.namespace, "ns");

    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let inline = format!(
        r#""server": "https://h:1", "certificate-authority-data": "{}""#,
        b64("INLINE-CA")
    );
    let token = r#""token": " secret\n""#;
    let got = access::from_kubeconfig("/k", &kubeconfig(&inline, token), &read).expect("token");
    assert_eq!(got.ca_pem, b"INLINE-CA");
    assert_eq!(got.token, Some(Token::Fixed("secret".to_owned())));

    let token_file = r#""tokenFile": "/run/token""#;
    let got = access::from_kubeconfig("/k", &kubeconfig(server, token_file), &read).expect("file");
    assert_eq!(got.token, Some(Token::File("/run/token".into())));
}

#[test]
fn kubeconfigs_the_agent_cannot_use_are_refused_naming_the_file_and_field() {
    let read = files(&[(CA_FILE, "CA"), ("/pki/admin.crt", "CERT")]);
    let server = r#""server": "https://h:1", "certificate-authority": "/pki/ca.crt""#;
    let yaml = "apiVersion: v1\nkind: Config\n".to_owned();
    let no_context = kubeconfig(server, "").replace(r#""current-context": "x""#, r#""k": 1"#);
    for (text, expected) in [
        (yaml, "/k is not JSON"),
        ("{ nope".to_owned(), "/k is not a valid kubeconfig"),
        (no_context, "/k has no current-context"),
        (
            kubeconfig(server, "").replace(r#""cluster": "c""#, r#""cluster": "gone""#),
            "no cluster named \"gone\"",
        ),
        (
            kubeconfig(
                r#""server": "http://h:1", "certificate-authority": "/pki/ca.crt""#,
                "",
            ),
            "is not https",
        ),
        (
            kubeconfig(r#""server": "https://h:1""#, ""),
            "gives no certificate-authority",
        ),
        (
            kubeconfig(
                r#""server": "https://h:1", "certificate-authority": "/none""#,
                "",
            ),
            "certificate-authority /none",
        ),
        (
            kubeconfig(
                server,
                r#""exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1"}"#,
            ),
            "uses exec",
        ),
        (
            kubeconfig(server, r#""username": "a", "password": "b""#),
            "uses username/password",
        ),
        (
            kubeconfig(server, r#""client-certificate": "/pki/admin.crt""#),
            "client-certificate without a client-key",
        ),
        (
            kubeconfig(&format!("{server}, \"proxy-url\": \"http://p:1\""), ""),
            "proxy-url",
        ),
    ] {
        let err = access::from_kubeconfig("/k", &text, &read).expect_err(expected);
        let message = format!("{err:#}");
        assert!(
            message.contains(expected),
            "{expected:?} not in {message:?}"
        );
        assert!(
            message.contains("/k") || message.contains("/none"),
            "{message}"
        );
    }
}

#[test]
fn bearer_tokens_are_trimmed_sensitive_and_never_empty() {
    let bearer = Bearer::new(Token::Fixed("abc\n".to_owned())).expect("token");
    let header = bearer.header();
    assert_eq!(header, "Bearer abc");
    assert!(header.is_sensitive());

    let dir = std::env::temp_dir().join(format!("stevedore-bearer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (empty, full) = (dir.join("empty"), dir.join("full"));
    std::fs::write(&empty, "\n").expect("write");
    std::fs::write(&full, "from-file").expect("write");
    assert_eq!(
        Bearer::new(Token::File(full)).expect("file").header(),
        "Bearer from-file"
    );
    let err = Bearer::new(Token::File(empty))
        .err()
        .expect("empty token refused");
    assert!(err.to_string().contains("is empty"), "{err}");
    assert!(Bearer::new(Token::File(dir.join("missing"))).is_err());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn debug_output_never_shows_a_token_or_key() {
    let shown = format!("{:?}", Token::Fixed("s3cr3t".to_owned()));
    assert!(!shown.contains("s3cr3t"), "{shown}");
    let identity = super::Identity {
        cert_pem: b"C".to_vec(),
        key_pem: b"PRIVATE".to_vec(),
    };
    assert!(!format!("{identity:?}").contains("PRIVATE"));
}

//! The registry client and the pull engine against an HTTP registry double that
//! misbehaves: oversized or endless documents, bodies that disagree with their
//! descriptors, digests of every algorithm, credentials asked for over plain HTTP.

#![allow(clippy::unwrap_used)]

use std::{collections::HashMap, sync::Arc};

use base64::Engine as _;

use bytes::Bytes;
use serde_json::json;
use sha2::{Digest as _, Sha512};
use tokio::sync::watch;

use super::*;
use crate::images::{
    pipeline::pull::{PullError, PulledImage, pull},
    progress::Progress,
    testing::{FakeStore, HttpBody, HttpDouble, HttpReply, test_image},
};

const MIB: usize = 1 << 20;

fn sha512_digest(data: &[u8]) -> String {
    format!("sha512:{}", hex::encode(Sha512::digest(data)))
}

/// A registry double serving fixed paths (`/v2/team/app/...`) and 404 elsewhere.
async fn serve(routes: HashMap<String, HttpReply>) -> HttpDouble {
    HttpDouble::start(move |target, _| {
        routes
            .get(target)
            .cloned()
            .unwrap_or_else(|| HttpReply::status(404))
    })
    .await
}

fn manifest_path(reference: &str) -> String {
    format!("/v2/team/app/manifests/{reference}")
}

fn blob_path(digest: &str) -> String {
    format!("/v2/team/app/blobs/{digest}")
}

/// A manifest (as served) with `config` and one layer, as descriptors.
fn manifest(config: (&str, u64), layer: (&str, u64)) -> Bytes {
    Bytes::from(
        json!({"schemaVersion": 2, "mediaType": oci::OCI_MANIFEST,
               "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                          "digest": config.0, "size": config.1},
               "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                           "digest": layer.0, "size": layer.1}]})
        .to_string(),
    )
}

fn manifest_reply(body: Bytes) -> HttpReply {
    HttpReply::ok(oci::OCI_MANIFEST, body)
}

fn image(registry: &HttpDouble, tag: &str) -> Reference {
    Reference::parse_normalized(&format!("{}/team/app:{tag}", registry.addr)).unwrap()
}

async fn pull_from(registry: &HttpDouble) -> Result<PulledImage, PullError> {
    let client = HttpRegistry::new(&[]).unwrap();
    let (tx, _rx) = watch::channel(Progress::default());
    pull(
        &client,
        &FakeStore::default(),
        &image(registry, "v1"),
        &Auth::Anonymous,
        &tx,
    )
    .await
}

fn registry_error(result: Result<PulledImage, PullError>) -> RegistryError {
    match result {
        Err(PullError::Registry(err)) => err,
        other => panic!("expected a registry error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_chunked_64_mib_manifest_is_refused_at_the_cap_without_reading_it_all() {
    let chunked = HttpReply {
        body: HttpBody::Chunked {
            chunk: Bytes::from(vec![b' '; MIB]),
            count: 64,
        },
        ..manifest_reply(Bytes::new())
    };
    let registry = serve(HashMap::from([(manifest_path("v1"), chunked)])).await;
    let client = HttpRegistry::new(&[]).unwrap();
    let err = client
        .fetch_manifest(&image(&registry, "v1"), "v1", &Auth::Anonymous)
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, RegistryError::TooLarge { .. }), "{message}");
    assert!(message.contains("limit of 4194304 bytes"), "{message}");
    assert!(message.contains("team/app@v1"), "{message}");
    // The client hung up past the cap: the double could not push the whole body
    // (what it did send is the cap plus what the sockets buffer).
    assert!(
        registry.sent() < 32 * MIB as u64,
        "{} bytes were read",
        registry.sent()
    );
}

#[tokio::test]
async fn an_oversized_config_is_refused_before_it_is_fetched() {
    let layer = Bytes::from_static(b"layer");
    let config_digest = format!("sha256:{}", "c".repeat(64));
    let body = manifest(
        (&config_digest, 64 * MIB as u64),
        (&oci::sha256_digest(&layer), layer.len() as u64),
    );
    let registry = serve(HashMap::from([(manifest_path("v1"), manifest_reply(body))])).await;
    let err = registry_error(pull_from(&registry).await);
    let message = err.to_string();
    assert!(
        message.contains("image config") && message.contains("limit of 8388608 bytes"),
        "{message}"
    );
    assert!(message.contains(&config_digest), "{message}");
    assert!(
        !registry.requests().contains(&blob_path(&config_digest)),
        "the config was fetched: {:?}",
        registry.requests()
    );
}

/// A pull of an image whose layer the registry serves as `served` while the manifest
/// describes `layer`.
async fn pull_with_layer(layer: &[u8], layer_digest: &str, served: HttpReply) -> RegistryError {
    let config = Bytes::from(
        json!({"rootfs": {"type": "layers", "diff_ids": [oci::sha256_digest(layer)]}}).to_string(),
    );
    let config_digest = oci::sha256_digest(&config);
    let body = manifest(
        (&config_digest, config.len() as u64),
        (layer_digest, layer.len() as u64),
    );
    let registry = serve(HashMap::from([
        (manifest_path("v1"), manifest_reply(body)),
        (
            blob_path(&config_digest),
            HttpReply::ok("application/octet-stream", config),
        ),
        (blob_path(layer_digest), served),
    ]))
    .await;
    registry_error(pull_from(&registry).await)
}

fn chunked(data: &'static [u8]) -> HttpReply {
    HttpReply {
        body: HttpBody::Chunked {
            chunk: Bytes::from_static(data),
            count: 1,
        },
        ..HttpReply::status(200)
    }
}

#[tokio::test]
async fn bodies_longer_or_shorter_than_their_descriptor_are_refused() {
    let layer = b"layer-bytes";
    let digest = oci::sha256_digest(layer);
    let cases = [
        // Announced sizes are checked before reading, streamed ones while reading.
        (
            HttpReply::ok("x", &b"layer-bytes-and-more"[..]),
            "the registry announces 20 bytes, but the descriptor says 11",
        ),
        (chunked(b"layer-bytes-and-more"), "has more than 11 bytes"),
        (
            chunked(b"layer"),
            "has only 5 bytes, but its descriptor says 11",
        ),
    ];
    for (served, want) in cases {
        let err = pull_with_layer(layer, &digest, served).await;
        let message = err.to_string();
        assert!(matches!(err, RegistryError::Corrupt { .. }), "{message}");
        assert!(message.contains(want), "{want}: {message}");
        assert!(message.contains(&digest), "{message}");
    }
}

#[tokio::test]
async fn a_blob_that_does_not_match_its_digest_is_refused_before_commit() {
    let layer = b"layer-bytes";
    for digest in [oci::sha256_digest(layer), sha512_digest(layer)] {
        let err = pull_with_layer(layer, &digest, chunked(b"LAYER-BYTES")).await;
        let message = err.to_string();
        assert!(matches!(err, RegistryError::Corrupt { .. }), "{message}");
        assert!(
            message.contains(&format!("does not match its digest {digest}")),
            "{message}"
        );
    }
}

#[tokio::test]
async fn sha512_digests_are_verified_for_manifests_and_blobs() {
    let layer = Bytes::from_static(b"layer-bytes");
    let config = Bytes::from(
        json!({"rootfs": {"type": "layers", "diff_ids": [oci::sha256_digest(&layer)]}}).to_string(),
    );
    let (config_digest, layer_digest) = (sha512_digest(&config), sha512_digest(&layer));
    let body = manifest(
        (&config_digest, config.len() as u64),
        (&layer_digest, layer.len() as u64),
    );
    let manifest_digest = sha512_digest(&body);
    let registry = serve(HashMap::from([
        (
            manifest_path(&manifest_digest),
            manifest_reply(body.clone()),
        ),
        (manifest_path("v1"), manifest_reply(body)),
        (
            manifest_path(&sha512_digest(b"other")),
            manifest_reply(Bytes::from_static(b"{}")),
        ),
        (
            blob_path(&config_digest),
            HttpReply::ok("application/octet-stream", config),
        ),
        (
            blob_path(&layer_digest),
            HttpReply::ok("application/octet-stream", layer),
        ),
    ]))
    .await;
    let client = HttpRegistry::new(&[]).unwrap();
    let reference = image(&registry, "v1");
    let fetched = client
        .fetch_manifest(&reference, &manifest_digest, &Auth::Anonymous)
        .await
        .unwrap();
    assert_eq!(fetched.descriptor.digest, manifest_digest);
    let wrong = client
        .fetch_manifest(&reference, &sha512_digest(b"other"), &Auth::Anonymous)
        .await
        .unwrap_err();
    assert!(
        wrong
            .to_string()
            .contains("does not match its digest sha512:"),
        "{wrong}"
    );
    pull_from(&registry).await.unwrap();
}

/// A registry that answers every request with a bearer challenge naming `realm`.
async fn challenging(realm: &str) -> HttpDouble {
    let challenge = format!("Bearer realm=\"{realm}\",service=\"fake\"");
    HttpDouble::start(move |_, _| HttpReply::status(401).header("WWW-Authenticate", &challenge))
        .await
}

#[tokio::test]
async fn basic_credentials_are_not_sent_to_a_plain_http_realm_of_a_secure_registry() {
    let alice = Auth::Basic {
        username: "alice".into(),
        password: "secret".into(),
    };
    // A realm off this machine, over plain HTTP (never reached: the name is reserved).
    let registry = challenging("http://auth.registry.invalid/token").await;
    let reference = image(&registry, "v1");
    let err = HttpRegistry::new(&[])
        .unwrap()
        .fetch_manifest(&reference, "v1", &alice)
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, RegistryError::InsecureRealm { .. }),
        "{message}"
    );
    assert!(
        message.contains("http://auth.registry.invalid/token")
            && message.contains("--insecure-registry"),
        "{message}"
    );
    // Named insecure, the registry may use it: the token request is attempted.
    let insecure = HttpRegistry::new(&[registry.addr.to_string()]).unwrap();
    let err = insecure
        .fetch_manifest(&reference, "v1", &alice)
        .await
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::Unreachable { ref url, .. } if url.contains("auth.registry.invalid")),
        "{err}"
    );
    // Anonymous token requests carry no credentials and go anywhere.
    let anonymous = HttpRegistry::new(&[])
        .unwrap()
        .fetch_manifest(&reference, "v1", &Auth::Anonymous)
        .await
        .unwrap_err();
    assert!(
        matches!(anonymous, RegistryError::Unreachable { .. }),
        "{anonymous}"
    );
}

/// A registry whose token endpoint (`/token`, on itself) hands each user a token of
/// their own, and whose repository answers only that token.
async fn token_registry() -> HttpDouble {
    let (image, blobs) = test_image("tok");
    let mut routes: HashMap<String, HttpReply> = blobs
        .into_iter()
        .map(|(digest, body)| {
            (
                blob_path(&digest),
                HttpReply::ok("application/octet-stream", body),
            )
        })
        .collect();
    routes.insert(manifest_path("v1"), manifest_reply(image.manifest.clone()));
    let addr = Arc::new(std::sync::OnceLock::<String>::new());
    let realm = Arc::clone(&addr);
    let registry = HttpDouble::start(move |target, authorization| {
        let basic = |user: &str| {
            let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:pw"));
            format!("Basic {encoded}")
        };
        if target.starts_with("/token") {
            return match ["alice", "bob"]
                .into_iter()
                .find(|u| authorization == basic(u))
            {
                Some(user) => HttpReply::ok(
                    "application/json",
                    json!({"token": format!("for-{user}"), "expires_in": 300}).to_string(),
                ),
                None => HttpReply::status(401),
            };
        }
        let allowed = ["Bearer for-alice", "Bearer for-bob"].contains(&authorization);
        match routes.get(target) {
            Some(reply) if allowed => reply.clone(),
            _ if !allowed => {
                let realm = realm.get().cloned().unwrap_or_default();
                let challenge = format!("Bearer realm=\"http://{realm}/token\",service=\"fake\"");
                HttpReply::status(401).header("WWW-Authenticate", &challenge)
            }
            _ => HttpReply::status(404),
        }
    })
    .await;
    addr.set(registry.addr.to_string()).unwrap();
    registry
}

fn user(name: &str) -> Auth {
    Auth::Basic {
        username: name.into(),
        password: "pw".into(),
    }
}

#[tokio::test]
async fn a_token_is_asked_for_once_per_credential_not_per_request() {
    let registry = token_registry().await;
    let client = HttpRegistry::new(&[]).unwrap();
    let store = FakeStore::default();
    let tokens = || {
        let requests = registry.requests();
        requests.iter().filter(|t| t.starts_with("/token")).count()
    };
    let (tx, _rx) = watch::channel(Progress::default());
    let reference = image(&registry, "v1");
    pull(&client, &store, &reference, &user("alice"), &tx)
        .await
        .unwrap();
    // A manifest and three blobs, one token.
    assert_eq!(tokens(), 1, "{:?}", registry.requests());
    client
        .fetch_manifest(&reference, "v1", &user("alice"))
        .await
        .unwrap();
    assert_eq!(tokens(), 1, "the token was not reused");
    // Another credential earns its own token rather than borrowing alice's.
    client
        .fetch_manifest(&reference, "v1", &user("bob"))
        .await
        .unwrap();
    assert_eq!(tokens(), 2);
    let err = client
        .fetch_manifest(&reference, "v1", &user("mallory"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RegistryError::Server { status: 401, .. } | RegistryError::Unauthorized { .. }
        ),
        "{err}"
    );
    assert!(!err.to_string().contains("pw"), "{err}");
    // Refused at the token endpoint, the error still names the registry and repository.
    assert!(err.to_string().contains(&reference.repository()), "{err}");
}

/// Everything the agent logs, at every level, while the guard lives (this thread only:
/// a current-thread test runtime runs every task here).
fn capture_logs() -> (
    Arc<std::sync::Mutex<Vec<u8>>>,
    tracing::subscriber::DefaultGuard,
) {
    let logs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = Arc::clone(&logs);
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || SharedWriter(Arc::clone(&sink)))
        .finish();
    (logs, tracing::subscriber::set_default(subscriber))
}

struct SharedWriter(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn credentials_and_tokens_appear_in_no_log_and_no_error() {
    let registry = token_registry().await;
    let (logs, _guard) = capture_logs();
    let client = HttpRegistry::new(&[]).unwrap();
    let (tx, _rx) = watch::channel(Progress::default());
    let reference = image(&registry, "v1");
    pull(
        &client,
        &FakeStore::default(),
        &reference,
        &user("alice"),
        &tx,
    )
    .await
    .unwrap();
    let refused = Auth::Basic {
        username: "alice".into(),
        password: "correct-horse-battery".into(),
    };
    let err = pull(&client, &FakeStore::default(), &reference, &refused, &tx)
        .await
        .unwrap_err();

    let logs = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("pulled"), "nothing was captured: {logs}");
    let encode = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let secrets = [
        "correct-horse-battery".to_owned(),
        encode("alice:correct-horse-battery"),
        encode("alice:pw"),
        "for-alice".to_owned(),
    ];
    for secret in &secrets {
        assert!(!logs.contains(secret.as_str()), "{secret} logged:\n{logs}");
        assert!(
            !err.to_string().contains(secret.as_str()),
            "{secret} in {err}"
        );
        assert!(
            !format!("{err:?}").contains(secret.as_str()),
            "{secret} in {err:?}"
        );
    }
}

#[tokio::test]
async fn a_mirror_in_hosts_toml_serves_the_pull_while_the_registry_is_down() {
    let (image_data, blobs) = test_image("mirrored");
    let mut routes: HashMap<String, HttpReply> = blobs
        .into_iter()
        .map(|(digest, body)| {
            let path = format!("{}?ns=registry.invalid:5000", blob_path(&digest));
            (path, HttpReply::ok("application/octet-stream", body))
        })
        .collect();
    routes.insert(
        format!("{}?ns=registry.invalid:5000", manifest_path("v1")),
        manifest_reply(image_data.manifest.clone()),
    );
    let mirror = serve(routes).await;
    let dir = std::env::temp_dir().join(format!("stevedore-mirror-{}", std::process::id()));
    let registry_dir = dir.join("registry.invalid:5000");
    std::fs::create_dir_all(&registry_dir).unwrap();
    // The upstream is a name that never resolves: only the mirror can answer.
    let hosts = format!(
        "server = \"http://registry.invalid:5000\"\n[host.\"http://{}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
        mirror.addr
    );
    std::fs::write(registry_dir.join("hosts.toml"), hosts).unwrap();
    let client = HttpRegistry::new(&[]).unwrap().with_hosts_dir(dir.clone());
    let reference = Reference::parse_normalized("registry.invalid:5000/team/app:v1").unwrap();
    let (tx, _rx) = watch::channel(Progress::default());
    let pulled = pull(
        &client,
        &FakeStore::default(),
        &reference,
        &Auth::Anonymous,
        &tx,
    )
    .await;
    assert_eq!(pulled.unwrap().image_id, image_data.config_digest);
    assert_eq!(mirror.requests().len(), 4, "{:?}", mirror.requests());

    // Without the mirror, the same pull goes to the (unreachable) registry itself.
    std::fs::write(
        registry_dir.join("hosts.toml"),
        "server = \"http://registry.invalid:5000\"",
    )
    .unwrap();
    let err = client
        .fetch_manifest(&reference, "v1", &Auth::Anonymous)
        .await
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::Unreachable { ref url, .. } if url.contains("registry.invalid")),
        "{err}"
    );
    assert_eq!(mirror.requests().len(), 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn redirects_from_https_to_plain_http_are_refused() {
    let url = |u: &str| Url::parse(u).unwrap();
    let cases = [
        (vec!["https://r.example/v2/a"], "http://cdn.example/b", true),
        (
            vec!["https://r.example/v2/a", "https://cdn.example/b"],
            "http://cdn2.example/c",
            true,
        ),
        (
            vec!["https://r.example/v2/a"],
            "https://cdn.example/b",
            false,
        ),
        (
            vec!["http://127.0.0.1:5000/v2/a"],
            "http://127.0.0.1:5000/b",
            false,
        ),
        (
            vec!["http://127.0.0.1:5000/v2/a"],
            "https://cdn.example/b",
            false,
        ),
    ];
    for (previous, next, refused) in cases {
        let previous: Vec<Url> = previous.into_iter().map(url).collect();
        let why = redirect_refusal(&previous, &url(next));
        assert_eq!(why.is_some(), refused, "{previous:?} -> {next}: {why:?}");
        if let Some(why) = why {
            assert!(why.contains("from HTTPS to plain HTTP"), "{why}");
        }
    }
    let many: Vec<Url> = (0..10)
        .map(|i| url(&format!("https://r.example/{i}")))
        .collect();
    assert!(redirect_refusal(&many, &url("https://r.example/x")).is_some());
}

/// A registry whose token endpoint (`/token`, on itself) answers every request with
/// `token_reply`, and whose repository challenges whatever comes without a token.
async fn registry_with_token_reply(token_reply: HttpReply) -> HttpDouble {
    let addr = Arc::new(std::sync::OnceLock::<String>::new());
    let realm = Arc::clone(&addr);
    let registry = HttpDouble::start(move |target, _| {
        if target.starts_with("/token") {
            return token_reply.clone();
        }
        let realm = realm.get().cloned().unwrap_or_default();
        let challenge = format!("Bearer realm=\"http://{realm}/token\",service=\"fake\"");
        HttpReply::status(401).header("WWW-Authenticate", &challenge)
    })
    .await;
    addr.set(registry.addr.to_string()).unwrap();
    registry
}

#[tokio::test]
async fn a_chunked_64_mib_token_response_is_refused_at_the_cap_without_reading_it_all() {
    let endless = HttpReply {
        body: HttpBody::Chunked {
            chunk: Bytes::from(vec![b' '; MIB]),
            count: 64,
        },
        ..HttpReply::ok("application/json", "")
    };
    let registry = registry_with_token_reply(endless).await;
    let err = registry_error(pull_from(&registry).await);
    let message = err.to_string();
    assert!(matches!(err, RegistryError::TooLarge { .. }), "{message}");
    assert!(
        message.starts_with("token response of http://"),
        "{message}"
    );
    assert!(message.contains("limit of 262144 bytes"), "{message}");
    assert!(
        registry.sent() < 32 * MIB as u64,
        "{} bytes were read",
        registry.sent()
    );
}

#[tokio::test]
async fn a_token_too_long_for_a_header_is_refused_and_never_sent() {
    let long = "t".repeat(64 << 10);
    let reply = HttpReply::ok(
        "application/json",
        json!({ "token": long, "expires_in": 300 }).to_string(),
    );
    let registry = registry_with_token_reply(reply).await;
    let err = registry_error(pull_from(&registry).await);
    let message = err.to_string();
    assert!(matches!(err, RegistryError::TooLarge { .. }), "{message}");
    assert!(message.starts_with("token of http://"), "{message}");
    assert!(message.contains("limit of 16384 bytes"), "{message}");
    // One manifest request, one token request: the token was neither retried nor sent.
    let requests = registry.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
}

#[test]
fn token_answers_are_read_as_the_distribution_spec_gives_them() {
    let ok = |body: &str| token_from_response(body.as_bytes(), "realm");
    assert_eq!(
        ok(r#"{"token":"a","expires_in":60}"#).unwrap(),
        ("a".to_owned(), Some(60))
    );
    assert_eq!(
        ok(r#"{"access_token":"b"}"#).unwrap(),
        ("b".to_owned(), None)
    );
    assert_eq!(
        ok(r#"{"token":"","access_token":"c"}"#).unwrap(),
        ("c".to_owned(), None)
    );
    for bad in [r#"{}"#, "not json", r#"{"token":7}"#] {
        assert!(
            matches!(ok(bad), Err(RegistryError::Protocol { .. })),
            "{bad}"
        );
    }
}

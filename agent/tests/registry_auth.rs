//! The agent's registry client against a small registry on loopback that demands
//! credentials the way real ones do: a bearer-token handshake (basic credentials
//! exchanged at a token endpoint), a plain basic challenge, and 401 / 403 / 503 answers.

#![allow(clippy::unwrap_used)]

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use base64::Engine as _;
use stevedore_agent::{
    images::registry::{Auth, HttpRegistry, Registry as _, RegistryError},
    reference::Reference,
};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpListener,
};

const MANIFEST: &str = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:aaaa","size":2},"layers":[]}"#;

fn basic(user: &str, password: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

/// Starts the fake registry; returns its address and the request lines it saw.
async fn fake_registry() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let target = head
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned();
                let authorization = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("authorization")
                            .then(|| value.trim().to_owned())
                    })
                    .unwrap_or_default();
                log.lock().unwrap().push(target.clone());
                let response = respond(addr, &target, &authorization);
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    (addr, seen)
}

fn respond(addr: SocketAddr, target: &str, authorization: &str) -> String {
    let reply = |status: &str, headers: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let manifest = || {
        reply(
            "200 OK",
            "Content-Type: application/vnd.oci.image.manifest.v1+json\r\n",
            MANIFEST,
        )
    };
    if target.starts_with("/token?") {
        return if authorization == basic("alice", "secret") {
            reply("200 OK", "", r#"{"token":"good-token"}"#)
        } else if authorization == basic("bob", "secret") {
            reply("200 OK", "", r#"{"access_token":"forbidden-token"}"#)
        } else {
            reply("401 Unauthorized", "", "")
        };
    }
    if target.starts_with("/v2/token/") {
        return match authorization {
            "Bearer good-token" => manifest(),
            "Bearer forbidden-token" => reply("403 Forbidden", "", ""),
            _ => reply(
                "401 Unauthorized",
                &format!(
                    "WWW-Authenticate: Bearer realm=\"http://{addr}/token\",service=\"fake\",scope=\"repository:token/app:pull\"\r\n"
                ),
                "",
            ),
        };
    }
    if target.starts_with("/v2/basic/") {
        return if authorization == basic("alice", "secret") {
            manifest()
        } else {
            reply(
                "401 Unauthorized",
                "WWW-Authenticate: Basic realm=\"fake\"\r\n",
                "",
            )
        };
    }
    if target.starts_with("/v2/busy/") {
        return reply("503 Service Unavailable", "", "");
    }
    reply("404 Not Found", "", "")
}

async fn fetch(addr: SocketAddr, repo: &str, auth: Auth) -> Result<String, RegistryError> {
    let registry = HttpRegistry::new(&[addr.to_string()]).unwrap();
    let image = Reference::parse_normalized(&format!("{addr}/{repo}:v1")).unwrap();
    registry
        .fetch_manifest(&image, "v1", &auth)
        .await
        .map(|m| m.descriptor.digest)
}

fn alice(password: &str) -> Auth {
    Auth::Basic {
        username: "alice".into(),
        password: password.into(),
    }
}

#[tokio::test]
async fn basic_credentials_are_exchanged_for_a_bearer_token() {
    let (addr, seen) = fake_registry().await;
    let digest = fetch(addr, "token/app", alice("secret")).await.unwrap();
    assert!(digest.starts_with("sha256:"));
    let seen = seen.lock().unwrap().clone();
    let token_request = seen.iter().find(|t| t.starts_with("/token?")).unwrap();
    assert!(
        token_request.contains("scope=repository%3Atoken%2Fapp%3Apull"),
        "{token_request}"
    );
    assert!(token_request.contains("service=fake"), "{token_request}");
}

#[tokio::test]
async fn a_given_token_is_sent_as_is() {
    let (addr, seen) = fake_registry().await;
    fetch(addr, "token/app", Auth::Token("good-token".into()))
        .await
        .unwrap();
    assert!(!seen.lock().unwrap().iter().any(|t| t.starts_with("/token")));
}

#[tokio::test]
async fn wrong_or_missing_credentials_are_unauthorized() {
    let (addr, _) = fake_registry().await;
    for auth in [alice("wrong"), Auth::Anonymous, Auth::Token("stale".into())] {
        let err = fetch(addr, "token/app", auth.clone()).await.unwrap_err();
        assert!(
            matches!(err, RegistryError::Unauthorized { .. }),
            "{auth:?}: {err}"
        );
    }
    let err = fetch(addr, "basic/app", Auth::Anonymous).await.unwrap_err();
    assert!(matches!(err, RegistryError::Unauthorized { .. }), "{err}");
}

#[tokio::test]
async fn a_basic_challenge_is_answered_with_basic_credentials() {
    let (addr, _) = fake_registry().await;
    fetch(addr, "basic/app", alice("secret")).await.unwrap();
}

#[tokio::test]
async fn denied_busy_missing_and_unreachable_are_told_apart() {
    let (addr, _) = fake_registry().await;
    let bob = Auth::Basic {
        username: "bob".into(),
        password: "secret".into(),
    };
    let denied = fetch(addr, "token/app", bob).await.unwrap_err();
    assert!(
        matches!(denied, RegistryError::Forbidden { .. }),
        "{denied}"
    );
    let busy = fetch(addr, "busy/app", Auth::Anonymous).await.unwrap_err();
    assert!(matches!(busy, RegistryError::Server { status: 503, .. }) && busy.is_retryable());
    let missing = fetch(addr, "nothing/app", Auth::Anonymous)
        .await
        .unwrap_err();
    assert!(
        matches!(missing, RegistryError::NotFound { .. }),
        "{missing}"
    );

    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let unreachable = fetch(closed, "any/app", Auth::Anonymous).await.unwrap_err();
    assert!(
        matches!(unreachable, RegistryError::Unreachable { .. }) && unreachable.is_retryable(),
        "{unreachable}"
    );
}

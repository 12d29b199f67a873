//! A registry token server on loopback, as Docker's token authentication describes it:
//! `GET /token?service=..&scope=..` with the user's Basic credentials answers
//! `{"token", "access_token", "expires_in"}` with a JWT granting the scopes asked for, or
//! 401 for an unknown user or a wrong password. It keeps every request it was sent, so a
//! test can count them. Stops when dropped.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Router, routing::get};
use base64::Engine as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::token_signer::TokenSigner;

/// How long an issued token holds, in seconds.
pub const TOKEN_SECONDS: u64 = 300;

/// One request the server was sent.
#[derive(Debug, Clone)]
pub struct TokenRequest {
    /// The Basic username, if any.
    pub user: Option<String>,
    pub scopes: Vec<String>,
    pub service: Option<String>,
    pub user_agent: String,
    /// The token issued, `None` when refused.
    pub token: Option<String>,
}

struct Inner {
    signer: TokenSigner,
    users: HashMap<String, String>,
    issuer: String,
    requests: Mutex<Vec<TokenRequest>>,
}

/// A running token server.
pub struct TokenServer {
    inner: Arc<Inner>,
    addr: SocketAddr,
    shutdown: CancellationToken,
}

impl TokenServer {
    /// Serves on a free loopback port, knowing `users` (name → password) and signing as
    /// `issuer`.
    pub async fn start(users: HashMap<String, String>, issuer: &str) -> Result<Self> {
        let inner = Arc::new(Inner {
            signer: TokenSigner::generate()?,
            users,
            issuer: issuer.to_owned(),
            requests: Mutex::default(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let router = Router::new()
            .route("/token", get(issue))
            .with_state(Arc::clone(&inner));
        let serve = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.clone().cancelled_owned());
        tokio::spawn(async move {
            if let Err(err) = serve.await {
                tracing::warn!(%err, "the token server stopped");
            }
        });
        Ok(Self {
            inner,
            addr,
            shutdown,
        })
    }

    /// The URL to name as the registry's `realm`.
    pub fn realm(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    /// The CA certificate (PEM) the registry must trust (`rootcertbundle`).
    pub fn ca_pem(&self) -> &str {
        &self.inner.signer.ca_pem
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<TokenRequest> {
        self.inner
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn issue(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let params = query.as_deref().map(query_pairs).unwrap_or_default();
    let values = |name: &str| -> Vec<String> {
        params
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .collect()
    };
    let (user, password) = basic_credentials(&headers).unzip();
    let mut request = TokenRequest {
        user: user.clone(),
        scopes: values("scope"),
        service: values("service").into_iter().next(),
        user_agent: headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
        token: None,
    };
    let known = matches!((&user, &password), (Some(u), Some(p)) if inner.users.get(u) == Some(p));
    let response = if known {
        match token_for(&inner, &request) {
            Ok(token) => {
                request.token = Some(token.clone());
                let body =
                    json!({ "token": token, "access_token": token, "expires_in": TOKEN_SECONDS });
                json_response(StatusCode::OK, &body)
            }
            Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{err:#}")).into_response(),
        }
    } else {
        let body =
            json!({ "errors": [{ "code": "UNAUTHORIZED", "message": "authentication required" }] });
        json_response(StatusCode::UNAUTHORIZED, &body)
    };
    inner
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request);
    response
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let headers = [(header::CONTENT_TYPE, "application/json")];
    (status, headers, body.to_string()).into_response()
}

/// A JWT granting `request`'s scopes to its user, for its service.
fn token_for(inner: &Inner, request: &TokenRequest) -> Result<String> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let claims = json!({
        "iss": inner.issuer,
        "sub": request.user,
        "aud": request.service,
        "exp": now + TOKEN_SECONDS,
        "nbf": now.saturating_sub(10),
        "iat": now,
        "jti": inner.signer.random_hex(16)?,
        "access": request.scopes.iter().filter_map(|s| access(s)).collect::<Vec<_>>(),
    });
    inner.signer.sign(&claims)
}

/// `repository:name:pull,push` as a token's access entry.
fn access(scope: &str) -> Option<Value> {
    let (kind, rest) = scope.split_once(':')?;
    let (name, actions) = rest.rsplit_once(':')?;
    let actions: Vec<&str> = actions.split(',').collect();
    Some(json!({ "type": kind, "name": name, "actions": actions }))
}

/// The username and password of an `Authorization: Basic` header.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// The `key=value` pairs of a query string, percent-decoded, repeated keys kept.
fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            Some((percent_decode(key)?, percent_decode(value)?))
        })
        .collect()
}

fn percent_decode(text: &str) -> Option<String> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'%' => {
                let hex = [bytes.next()?, bytes.next()?];
                out.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_scopes_are_kept_and_decoded() {
        let pairs = query_pairs(
            "scope=repository%3Aa%2Fb%3Apull&scope=repository:c:pull,push&service=reg+x",
        );
        assert_eq!(
            pairs,
            vec![
                ("scope".to_owned(), "repository:a/b:pull".to_owned()),
                ("scope".to_owned(), "repository:c:pull,push".to_owned()),
                ("service".to_owned(), "reg x".to_owned()),
            ]
        );
        assert_eq!(query_pairs("scope=%zz"), vec![]);
    }

    #[test]
    fn a_scope_becomes_an_access_entry_and_nonsense_none() {
        assert_eq!(
            access("repository:stevedore/web:pull,push"),
            Some(
                json!({ "type": "repository", "name": "stevedore/web", "actions": ["pull", "push"] })
            )
        );
        assert_eq!(access("nonsense"), None);
    }
}

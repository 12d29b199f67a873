//! Talking to registries (the OCI distribution API): the narrow [`Registry`] trait the
//! pull engine uses, and [`HttpRegistry`], its implementation over HTTP(S) with
//! per-request credentials (basic, bearer token, or the token-server handshake).
//!
//! HTTPS unless the registry is on this machine (`localhost`, 127.0.0.0/8), which is
//! reached over plain HTTP as containerd (and so kubelet's CRI beside us) and Docker do,
//! or is named by `--insecure-registry`. A redirect from HTTPS to plain HTTP is refused,
//! and basic credentials go to a plain-HTTP token endpoint only for a registry named
//! insecure (or an endpoint on this machine). Bodies are read with hard limits
//! ([`super::body`]).

use std::{
    collections::{HashMap, HashSet},
    future::Future,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use base64::Engine as _;
use bytes::Bytes;
use futures::{StreamExt as _, TryStreamExt as _};
use reqwest::{StatusCode, Url, header, redirect};

use stevedore_parsers::oci::{self, Descriptor, MAX_MANIFEST_BYTES};

use super::{
    body,
    credentials::Auth,
    error::{BlobStream, RegistryError},
    hosts::{self, Endpoint, Tls},
    token_cache::{CacheKey, TokenCache, token_lifetime},
};
use crate::error_text::error_chain;
use crate::reference::Reference;
/// Kept at the registry's path for the code that reads challenges beside the client.
pub use stevedore_parsers::auth_challenge::challenge_param;

/// A fetched manifest or index.
#[derive(Debug, Clone)]
pub struct FetchedManifest {
    /// Descriptor of the body (media type, digest, size).
    pub descriptor: Descriptor,
    pub body: Bytes,
}

/// A blob's bytes from `offset` on: the offset asked for, or 0 when the registry
/// ignored the range and sends the whole blob.
pub struct FetchedBlob {
    pub offset: u64,
    pub stream: BlobStream,
}

/// What the pull engine needs from a registry.
pub trait Registry: Send + Sync + 'static {
    /// Fetches the manifest or index `reference` (a tag or digest) of `image`'s repository.
    fn fetch_manifest(
        &self,
        image: &Reference,
        reference: &str,
        auth: &Auth,
    ) -> impl Future<Output = Result<FetchedManifest, RegistryError>> + Send;

    /// Streams the blob `blob` of `image`'s repository from byte `from` on (to resume an
    /// interrupted download), as the registry sends it (the caller checks it against
    /// the descriptor, see [`body::verified`]).
    fn fetch_blob(
        &self,
        image: &Reference,
        blob: &Descriptor,
        auth: &Auth,
        from: u64,
    ) -> impl Future<Output = Result<FetchedBlob, RegistryError>> + Send;
}

/// The distribution API over HTTP(S).
#[derive(Debug, Clone)]
pub struct HttpRegistry {
    client: reqwest::Client,
    /// Clients for endpoints with TLS settings of their own (`hosts.toml`).
    tls_clients: Arc<Mutex<HashMap<Tls, reqwest::Client>>>,
    insecure: HashSet<String>,
    tokens: Arc<TokenCache>,
    /// containerd's `config_path`, where `<registry>/hosts.toml` files are.
    hosts_dir: Option<PathBuf>,
}

impl HttpRegistry {
    /// A client that speaks plain HTTP only to the `insecure` registries (`host[:port]`)
    /// and to loopback ones.
    pub fn new(insecure: &[String]) -> Result<Self, reqwest::Error> {
        Ok(Self {
            client: Self::client(&Tls::default())?,
            tls_clients: Arc::default(),
            insecure: insecure.iter().cloned().collect(),
            tokens: Arc::default(),
            hosts_dir: None,
        })
    }

    /// Reads each registry's `hosts.toml` under `dir` (containerd's `config_path`)
    /// before each request, as containerd does, so edits apply without a restart.
    pub fn with_hosts_dir(mut self, dir: PathBuf) -> Self {
        self.hosts_dir = Some(dir);
        self
    }

    fn client(tls: &Tls) -> Result<reqwest::Client, reqwest::Error> {
        // reqwest is built without a bundled crypto provider; the workspace uses ring.
        // An error only means a provider is already installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("stevedore-agent/", env!("CARGO_PKG_VERSION")))
            .redirect(redirect::Policy::custom(|attempt| {
                match redirect_refusal(attempt.previous(), attempt.url()) {
                    Some(why) => attempt.error(why),
                    None => attempt.follow(),
                }
            }))
            .danger_accept_invalid_certs(tls.skip_verify);
        for path in &tls.ca {
            // An unreadable or malformed CA file fails the endpoint's requests (below).
            let pem = std::fs::read(path).unwrap_or_default();
            for cert in reqwest::Certificate::from_pem_bundle(&pem)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        builder.build()
    }

    /// The client for `endpoint`'s TLS settings.
    fn client_for(&self, endpoint: &Endpoint) -> Result<reqwest::Client, RegistryError> {
        if endpoint.tls == Tls::default() {
            return Ok(self.client.clone());
        }
        let mut clients = self
            .tls_clients
            .lock()
            .map_err(|_| RegistryError::Protocol {
                url: endpoint.origin.clone(),
                detail: "client table poisoned".to_owned(),
            })?;
        if let Some(client) = clients.get(&endpoint.tls) {
            return Ok(client.clone());
        }
        let client = Self::client(&endpoint.tls).map_err(|err| RegistryError::Protocol {
            url: endpoint.origin.clone(),
            detail: format!("TLS settings of {}: {}", endpoint.origin, error_chain(&err)),
        })?;
        clients.insert(endpoint.tls.clone(), client.clone());
        Ok(client)
    }

    /// The registry itself, as reached without a `hosts.toml`: plain HTTP when named
    /// insecure or on this machine, HTTPS otherwise.
    fn upstream(&self, image: &Reference) -> Endpoint {
        let domain = image.domain();
        let host = if domain == "docker.io" {
            "registry-1.docker.io"
        } else {
            domain
        };
        let scheme = if self.insecure.contains(domain) || is_loopback(domain) {
            "http"
        } else {
            "https"
        };
        Endpoint::upstream(format!("{scheme}://{host}"))
    }

    #[cfg(test)]
    fn base_url(&self, image: &Reference) -> String {
        self.upstream(image).repository_base(image.path())
    }

    /// Where `image` may be fetched from, in order (see [`hosts`]).
    fn endpoints(&self, image: &Reference) -> Result<Vec<Endpoint>, RegistryError> {
        let upstream = self.upstream(image);
        let Some(dir) = &self.hosts_dir else {
            return Ok(vec![upstream]);
        };
        let file = hosts::read_hosts_file(dir, image.domain())?;
        let (path, text) = file.unzip();
        let path = path.unwrap_or_default();
        Ok(hosts::endpoints(
            image.domain(),
            text.as_deref(),
            &path,
            upstream,
        )?)
    }

    /// Tries `fetch` on each endpoint able to serve the request, in order, until one
    /// answers; the last failure otherwise (containerd's fallback through mirrors).
    async fn first_answer<T, F, Fut>(
        &self,
        image: &Reference,
        resolve: bool,
        fetch: F,
    ) -> Result<T, RegistryError>
    where
        F: Fn(Endpoint) -> Fut,
        Fut: Future<Output = Result<T, RegistryError>>,
    {
        let all = self.endpoints(image)?;
        let mut last = RegistryError::NotFound {
            what: if resolve {
                "a host able to resolve tags"
            } else {
                "a host able to pull"
            },
            url: image.repository(),
        };
        for endpoint in hosts::able_to(&all, resolve) {
            let origin = endpoint.origin.clone();
            match fetch(endpoint.clone()).await {
                Ok(found) => return Ok(found),
                Err(error) => {
                    tracing::debug!(endpoint = %origin, %error, "trying the next registry host");
                    last = error;
                }
            }
        }
        Err(last)
    }

    /// GETs `url` of the repository at `base`, with the authorisation earned there
    /// before by the same credential, or answering one challenge if the registry asks
    /// (and keeping what it earned for the next requests).
    async fn get(
        &self,
        image: &Reference,
        endpoint: &Endpoint,
        url: &str,
        extra_header: Option<(header::HeaderName, String)>,
        auth: &Auth,
    ) -> Result<reqwest::Response, RegistryError> {
        let client = self.client_for(endpoint)?;
        let base = endpoint.repository_base(image.path());
        let request = |authorization: Option<String>| {
            let mut req = client.get(url);
            if let Some((name, value)) = &extra_header {
                req = req.header(name, value);
            }
            if let Some(value) = authorization {
                req = req.header(header::AUTHORIZATION, value);
            }
            req
        };
        let unreachable = |err: reqwest::Error| request_error(url, &err);
        let key = CacheKey::new(&base, auth);
        // A given token goes on the first request; otherwise what was earned before, or
        // nothing until a challenge.
        let first = match auth {
            Auth::Token(token) => Some(format!("Bearer {token}")),
            _ => self.tokens.get(&key, Instant::now()),
        };
        let earned = first.is_some() && !matches!(auth, Auth::Token(_));
        let response = request(first).send().await.map_err(unreachable)?;
        if response.status() != StatusCode::UNAUTHORIZED || matches!(auth, Auth::Token(_)) {
            return Ok(response);
        }
        if earned {
            self.tokens.forget(&key);
        }
        let challenge = response
            .headers()
            .get(header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let (authorization, lifetime) = self.answer(&client, image, &challenge, auth).await?;
        self.tokens
            .put(key, authorization.clone(), lifetime, Instant::now());
        request(Some(authorization))
            .send()
            .await
            .map_err(unreachable)
    }

    /// The `Authorization` value answering `challenge` with `auth`, and how long it
    /// holds (`None`: basic credentials, until refused).
    async fn answer(
        &self,
        client: &reqwest::Client,
        image: &Reference,
        challenge: &str,
        auth: &Auth,
    ) -> Result<(String, Option<Duration>), RegistryError> {
        let basic = match auth {
            Auth::Basic { username, password } => Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"))
            )),
            _ => None,
        };
        let Some(params) = challenge.strip_prefix("Bearer ") else {
            // A Basic challenge: only a username and password can answer it.
            let basic = basic.ok_or_else(|| RegistryError::Unauthorized {
                url: image.repository(),
            })?;
            return Ok((basic, None));
        };
        let param = |name: &str| challenge_param(params, name);
        let realm = param("realm").ok_or_else(|| RegistryError::Protocol {
            url: image.repository(),
            detail: "bearer challenge without a realm".to_owned(),
        })?;
        if basic.is_some() && !self.may_send_credentials(image, &realm)? {
            return Err(RegistryError::InsecureRealm {
                reference: image.to_string(),
                realm,
            });
        }
        let scope = param("scope").unwrap_or_else(|| format!("repository:{}:pull", image.path()));
        let mut query = vec![("scope", scope)];
        if let Some(service) = param("service") {
            query.push(("service", service));
        }
        let mut req = client.get(&realm).query(&query);
        if let Some(basic) = basic {
            req = req.header(header::AUTHORIZATION, basic);
        }
        let response = req
            .send()
            .await
            .map_err(|err| request_error(&realm, &err))?;
        let response = match check_status(response, "token") {
            // A refusal at the token endpoint is the registry's refusal: name the registry
            // (the endpoint alone may be a host the caller never heard of).
            Err(RegistryError::Unauthorized { .. }) => {
                return Err(RegistryError::Unauthorized {
                    url: format!("{} via its token endpoint {realm}", image.repository()),
                });
            }
            other => other?,
        };
        let declared = response.content_length();
        let stream = response
            .bytes_stream()
            .map_err(|err| request_error(&realm, &err));
        let body = body::read_capped(
            stream,
            declared,
            MAX_TOKEN_RESPONSE_BYTES,
            "token response",
            &realm,
        )
        .await?;
        let (token, expires_in) = token_from_response(&body, &realm)?;
        Ok((format!("Bearer {token}"), Some(token_lifetime(expires_in))))
    }

    /// Whether basic credentials for `image` may go to the token endpoint `realm`: over
    /// HTTPS, or over plain HTTP to a registry the operator named insecure or to an
    /// endpoint on this machine (whose traffic never leaves it). A plain-HTTP host in
    /// `hosts.toml` is not enough: it says how to reach the registry, not that its token
    /// endpoint may see passwords in the clear.
    fn may_send_credentials(&self, image: &Reference, realm: &str) -> Result<bool, RegistryError> {
        let url = Url::parse(realm).map_err(|err| RegistryError::Protocol {
            url: image.repository(),
            detail: format!("token realm {realm:?} is not a URL: {err}"),
        })?;
        Ok(url.scheme() == "https"
            || self.insecure.contains(image.domain())
            || url.host_str().is_some_and(is_loopback_host))
    }
}

impl Registry for HttpRegistry {
    async fn fetch_manifest(
        &self,
        image: &Reference,
        reference: &str,
        auth: &Auth,
    ) -> Result<FetchedManifest, RegistryError> {
        // A tag needs a host able to resolve; a digest only one able to pull.
        let resolve = !reference.contains(':');
        self.first_answer(image, resolve, |endpoint| async move {
            self.fetch_manifest_at(&endpoint, image, reference, auth)
                .await
        })
        .await
    }

    async fn fetch_blob(
        &self,
        image: &Reference,
        blob: &Descriptor,
        auth: &Auth,
        from: u64,
    ) -> Result<FetchedBlob, RegistryError> {
        self.first_answer(image, false, |endpoint| async move {
            self.fetch_blob_at(&endpoint, image, blob, auth, from).await
        })
        .await
    }
}

impl HttpRegistry {
    async fn fetch_manifest_at(
        &self,
        endpoint: &Endpoint,
        image: &Reference,
        reference: &str,
        auth: &Auth,
    ) -> Result<FetchedManifest, RegistryError> {
        let url = endpoint.url(image.path(), &format!("manifests/{reference}"));
        let response = self
            .get(
                image,
                endpoint,
                &url,
                Some((header::ACCEPT, oci::MANIFEST_ACCEPT.to_owned())),
                auth,
            )
            .await?;
        let response = check_status(response, "manifest")?;
        let header_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or(v).trim().to_owned());
        let named = format!("{}@{reference}", image.repository());
        let declared = response.content_length();
        let stream = response
            .bytes_stream()
            .map_err(|err| request_error(&url, &err));
        let body =
            body::read_capped(stream, declared, MAX_MANIFEST_BYTES, "manifest", &named).await?;
        let digest = body::document_digest(&body, reference, &named)?;
        let media_type = header_type
            .filter(|t| oci::is_index(t) || oci::is_manifest(t))
            .or_else(|| oci::sniff_media_type(&body))
            .unwrap_or_default();
        Ok(FetchedManifest {
            descriptor: Descriptor::new(media_type, digest, body.len() as u64),
            body,
        })
    }

    async fn fetch_blob_at(
        &self,
        endpoint: &Endpoint,
        image: &Reference,
        blob: &Descriptor,
        auth: &Auth,
        from: u64,
    ) -> Result<FetchedBlob, RegistryError> {
        let url = endpoint.url(image.path(), &format!("blobs/{}", blob.digest));
        let range = (from > 0).then(|| (header::RANGE, format!("bytes={from}-")));
        let response = self.get(image, endpoint, &url, range, auth).await?;
        let response = check_status(response, "blob")?;
        let named = format!("{}@{}", image.repository(), blob.digest);
        let offset = if response.status() == StatusCode::PARTIAL_CONTENT {
            let content_range = response
                .headers()
                .get(header::CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            range_start(content_range).filter(|start| *start == from).ok_or_else(|| {
                RegistryError::Protocol {
                    url: url.clone(),
                    detail: format!(
                        "asked for bytes from {from} on, the registry sent the range {content_range:?}"
                    ),
                }
            })?
        } else {
            0
        };
        let expected = blob.size.saturating_sub(offset);
        if let Some(len) = response.content_length().filter(|len| *len != expected) {
            return Err(RegistryError::Corrupt {
                reference: named,
                detail: if offset == 0 {
                    format!(
                        "the registry announces {len} bytes, but the descriptor says {}",
                        blob.size
                    )
                } else {
                    format!(
                        "the registry announces {len} bytes from byte {offset} on, but the descriptor says {} in all",
                        blob.size
                    )
                },
            });
        }
        let stream = response
            .bytes_stream()
            .map_err(move |err| request_error(&url, &err));
        Ok(FetchedBlob {
            offset,
            stream: stream.boxed(),
        })
    }
}

/// The first byte of a `Content-Range: bytes <start>-<end>/<size>` value.
fn range_start(content_range: &str) -> Option<u64> {
    let range = content_range.trim().strip_prefix("bytes")?.trim_start();
    range.split_once('-')?.0.trim().parse().ok()
}

/// Whether the registry `domain` (`host[:port]`) is this machine: `localhost` or a
/// loopback address (reference domains hold no IPv6 literals).
fn is_loopback(domain: &str) -> bool {
    is_loopback_host(domain.rsplit_once(':').map_or(domain, |(host, _)| host))
}

fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Redirects followed before giving up (reqwest's default).
const MAX_REDIRECTS: usize = 10;

/// Why a redirect to `next` after `previous` must not be followed, if it must not: a
/// step down from HTTPS to plain HTTP (anyone on the path could then serve the content
/// or read the credentials), or too many hops.
fn redirect_refusal(previous: &[Url], next: &Url) -> Option<String> {
    if previous.len() >= MAX_REDIRECTS {
        return Some(format!("more than {MAX_REDIRECTS} redirects"));
    }
    let from_https = previous.iter().any(|url| url.scheme() == "https");
    (from_https && next.scheme() != "https")
        .then(|| format!("refusing a redirect from HTTPS to plain HTTP ({next})"))
}

/// A failed request as our error: a refused redirect is the registry's doing and not
/// worth retrying; anything else is the network.
fn request_error(url: &str, err: &reqwest::Error) -> RegistryError {
    if err.is_redirect() {
        RegistryError::Protocol {
            url: url.to_owned(),
            detail: error_chain(err),
        }
    } else {
        RegistryError::Unreachable {
            url: url.to_owned(),
            detail: error_chain(err),
        }
    }
}

/// Maps the registry's status codes to our errors.
fn check_status(
    response: reqwest::Response,
    what: &'static str,
) -> Result<reqwest::Response, RegistryError> {
    let url = response.url().to_string();
    match response.status() {
        status if status.is_success() => Ok(response),
        StatusCode::NOT_FOUND => Err(RegistryError::NotFound { what, url }),
        StatusCode::UNAUTHORIZED => Err(RegistryError::Unauthorized { url }),
        StatusCode::FORBIDDEN => Err(RegistryError::Forbidden { url }),
        status => Err(RegistryError::Server {
            status: status.as_u16(),
            url,
        }),
    }
}

/// The most of a token endpoint's answer the agent reads: real answers are a few KiB
/// (a JWT and its lifetime); anything larger is refused before it is buffered, as the
/// manifest and config reads are.
pub const MAX_TOKEN_RESPONSE_BYTES: u64 = 256 << 10;

/// The longest token the agent caches and sends on: it travels as a header, and HTTP
/// servers refuse request headers past 8-16 KiB anyway.
pub const MAX_TOKEN_BYTES: u64 = 16 << 10;

/// The token (`token`, or OAuth's `access_token`) and its lifetime in seconds from a
/// token endpoint's answer, refusing a token too long to send as a header.
fn token_from_response(body: &[u8], realm: &str) -> Result<(String, Option<u64>), RegistryError> {
    #[derive(serde::Deserialize)]
    struct TokenResponse {
        token: Option<String>,
        access_token: Option<String>,
        expires_in: Option<u64>,
    }
    let protocol = |detail: String| RegistryError::Protocol {
        url: realm.to_owned(),
        detail,
    };
    let answer: TokenResponse = serde_json::from_slice(body)
        .map_err(|err| protocol(format!("the token response is not JSON: {err}")))?;
    let token = answer
        .token
        .filter(|t| !t.is_empty())
        .or(answer.access_token)
        .ok_or_else(|| protocol("token response without a token".to_owned()))?;
    if token.len() as u64 > MAX_TOKEN_BYTES {
        return Err(RegistryError::TooLarge {
            what: "token",
            reference: realm.to_owned(),
            limit: MAX_TOKEN_BYTES,
        });
    }
    Ok((token, answer.expires_in))
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod http_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges_are_read() {
        let cases = [
            ("bytes 100-199/200", Some(100)),
            ("bytes 0-9/*", Some(0)),
            ("bytes */200", None),
            ("items 1-2/3", None),
            ("", None),
        ];
        for (value, want) in cases {
            assert_eq!(range_start(value), want, "{value}");
        }
    }

    #[test]
    fn only_network_and_server_errors_are_retried() {
        let url = String::new;
        assert!(
            RegistryError::Unreachable {
                url: url(),
                detail: String::new()
            }
            .is_retryable()
        );
        assert!(
            RegistryError::Server {
                status: 503,
                url: url()
            }
            .is_retryable()
        );
        assert!(
            !RegistryError::Server {
                status: 400,
                url: url()
            }
            .is_retryable()
        );
        assert!(
            !RegistryError::NotFound {
                what: "manifest",
                url: url()
            }
            .is_retryable()
        );
        assert!(!RegistryError::Unauthorized { url: url() }.is_retryable());
    }

    #[test]
    fn insecure_registries_use_plain_http() {
        let registry = HttpRegistry::new(&["127.0.0.1:5000".to_owned()]).expect("client");
        let local = Reference::parse_normalized("127.0.0.1:5000/a/b:v1").expect("ref");
        assert_eq!(registry.base_url(&local), "http://127.0.0.1:5000/v2/a/b");
        let hub = Reference::parse_normalized("nginx").expect("ref");
        assert_eq!(
            registry.base_url(&hub),
            "https://registry-1.docker.io/v2/library/nginx"
        );
    }

    #[test]
    fn loopback_registries_use_plain_http_without_being_named() {
        let registry = HttpRegistry::new(&[]).expect("client");
        let cases = [
            ("127.0.0.1:40123/a/b:v1", "http://127.0.0.1:40123/v2/a/b"),
            ("127.0.0.1/a/b:v1", "http://127.0.0.1/v2/a/b"),
            ("127.8.9.10:5000/a/b:v1", "http://127.8.9.10:5000/v2/a/b"),
            ("localhost:5000/a/b:v1", "http://localhost:5000/v2/a/b"),
            ("localhost/a/b:v1", "http://localhost/v2/a/b"),
            ("128.0.0.1:5000/a/b:v1", "https://128.0.0.1:5000/v2/a/b"),
            ("10.0.0.1:5000/a/b:v1", "https://10.0.0.1:5000/v2/a/b"),
            (
                "localhost.example:5000/a/b:v1",
                "https://localhost.example:5000/v2/a/b",
            ),
            ("registry.example/a/b:v1", "https://registry.example/v2/a/b"),
        ];
        for (image, url) in cases {
            let reference = Reference::parse_normalized(image).expect("ref");
            assert_eq!(registry.base_url(&reference), url, "{image}");
        }
    }

    #[test]
    fn credentials_are_not_printed() {
        let auth = Auth::Basic {
            username: "u".into(),
            password: "secret".into(),
        };
        assert!(!format!("{auth:?}").contains("secret"));
        assert!(!format!("{:?}", Auth::Token("tok".into())).contains("tok"));
    }
}

//! The bearer token presented to agents, and the interceptor that attaches it.

use std::{
    path::PathBuf,
    sync::Mutex,
    time::{Duration, Instant},
};

use tonic::{
    Request, Status,
    metadata::{Ascii, MetadataValue},
    service::Interceptor,
};

use super::AgentError;

/// How long a token read from a file is used before the file is read again. Kubelet
/// rewrites a projected token well before it expires (at 80% of its lifetime, which is
/// at least ten minutes), so a minute-old copy is always still valid.
pub const TOKEN_REREAD_AFTER: Duration = Duration::from_secs(60);

/// Where the bearer token comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// A projected service-account token (audience `stevedore-agent`) that kubelet
    /// rotates; re-read every [`TOKEN_REREAD_AFTER`].
    File(PathBuf),
    /// A fixed token, for tests and tools.
    Static(String),
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Static(_) => f.write_str("Static(<redacted>)"),
        }
    }
}

/// Adds `authorization: Bearer <token>` to every request of a client.
#[derive(Clone)]
pub struct BearerAuth {
    header: MetadataValue<Ascii>,
}

impl std::fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerAuth(<redacted>)")
    }
}

impl BearerAuth {
    /// Fails on an empty token or one that cannot be a header value, so a broken token
    /// file shows up as such instead of as UNAUTHENTICATED from every agent.
    pub fn new(token: &str) -> Result<Self, AgentError> {
        let token = token.trim();
        // Tokens are JWTs, so plain ASCII; header values would also take Latin-1 bytes,
        // which here could only mean a corrupt file.
        if token.is_empty() || !token.is_ascii() {
            return Err(AgentError::InvalidToken);
        }
        let mut header: MetadataValue<Ascii> = format!("Bearer {token}")
            .parse()
            .map_err(|_| AgentError::InvalidToken)?;
        header.set_sensitive(true);
        Ok(Self { header })
    }
}

impl Interceptor for BearerAuth {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert("authorization", self.header.clone());
        Ok(request)
    }
}

/// A [`TokenSource`] with the last token read from it.
pub(crate) struct Tokens {
    source: TokenSource,
    cached: Mutex<Option<(Instant, BearerAuth)>>,
}

impl Tokens {
    pub(crate) fn new(source: TokenSource) -> Self {
        Self {
            source,
            cached: Mutex::new(None),
        }
    }

    /// The interceptor for the current token.
    pub(crate) async fn current(&self) -> Result<BearerAuth, AgentError> {
        self.current_at(Instant::now()).await
    }

    async fn current_at(&self, now: Instant) -> Result<BearerAuth, AgentError> {
        let path = match &self.source {
            TokenSource::Static(token) => return BearerAuth::new(token),
            TokenSource::File(path) => path,
        };
        if let Some(auth) = self.cached_at(now) {
            return Ok(auth);
        }
        // Read outside the lock: concurrent callers may each read once when the copy
        // goes stale, which is harmless and keeps the lock synchronous.
        let token =
            tokio::fs::read_to_string(path)
                .await
                .map_err(|source| AgentError::TokenFile {
                    path: path.clone(),
                    source,
                })?;
        let auth = BearerAuth::new(&token)?;
        *self.lock() = Some((now, auth.clone()));
        Ok(auth)
    }

    fn cached_at(&self, now: Instant) -> Option<BearerAuth> {
        self.lock()
            .as_ref()
            .filter(|(read_at, _)| now.saturating_duration_since(*read_at) < TOKEN_REREAD_AFTER)
            .map(|(_, auth)| auth.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Instant, BearerAuth)>> {
        // The guarded value is replaced whole, so a panic elsewhere cannot leave it torn.
        self.cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(auth: &BearerAuth) -> String {
        let mut auth = auth.clone();
        let request = auth.call(Request::new(())).expect("interceptor accepts");
        request
            .metadata()
            .get("authorization")
            .expect("header set")
            .to_str()
            .expect("ascii")
            .to_owned()
    }

    #[test]
    fn attaches_a_trimmed_bearer_header() {
        let auth = BearerAuth::new("  abc.def\n").expect("valid token");
        assert_eq!(header(&auth), "Bearer abc.def");
    }

    #[test]
    fn rejects_empty_and_unsendable_tokens() {
        for token in ["", " \n", "a\nb", "tök"] {
            assert!(
                matches!(BearerAuth::new(token), Err(AgentError::InvalidToken)),
                "{token:?}"
            );
        }
    }

    #[test]
    fn debug_output_hides_the_token() {
        let text = format!(
            "{:?} {:?}",
            BearerAuth::new("secret").expect("valid"),
            TokenSource::Static("secret".into())
        );
        assert!(!text.contains("secret"), "{text}");
    }

    #[tokio::test]
    async fn file_token_is_reread_once_the_copy_is_a_minute_old() {
        let dir = std::env::temp_dir().join(format!("stevedore-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("token");
        std::fs::write(&path, "first\n").expect("write token");
        let tokens = Tokens::new(TokenSource::File(path.clone()));
        let start = Instant::now();

        let first = tokens.current_at(start).await.expect("reads token");
        assert_eq!(header(&first), "Bearer first");

        std::fs::write(&path, "second\n").expect("rotate token");
        let within = tokens
            .current_at(start + TOKEN_REREAD_AFTER - Duration::from_secs(1))
            .await
            .expect("cached token");
        assert_eq!(header(&within), "Bearer first");

        let after = tokens
            .current_at(start + TOKEN_REREAD_AFTER)
            .await
            .expect("rereads token");
        assert_eq!(header(&after), "Bearer second");

        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[tokio::test]
    async fn missing_token_file_names_the_path() {
        let path = PathBuf::from("/nonexistent/stevedore/token");
        let err = Tokens::new(TokenSource::File(path))
            .current()
            .await
            .expect_err("no such file");
        assert!(
            err.to_string().contains("/nonexistent/stevedore/token"),
            "{err}"
        );
        assert!(!err.is_unreachable());
    }
}

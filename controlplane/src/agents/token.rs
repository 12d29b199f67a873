//! The bearer tokens presented to agents, and the interceptor that attaches them.

use std::sync::Arc;

use tonic::{
    Request, Status,
    metadata::{Ascii, MetadataValue},
    service::Interceptor,
};

use super::{AgentError, TokenIssuer, node_tokens::NodeTokens};

/// Where the bearer tokens come from.
#[derive(Clone)]
pub enum TokenSource {
    /// One token per node, bound to the audience `<audience_prefix>:<node>` and issued
    /// by `issuer` (the TokenRequest API), so a token is good for one node's agent only.
    PerNode {
        audience_prefix: String,
        issuer: Arc<dyn TokenIssuer>,
    },
    /// One fixed token for every node, for tests and tools.
    Static(String),
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::PerNode {
                audience_prefix, ..
            } => f
                .debug_struct("PerNode")
                .field("audience_prefix", audience_prefix)
                .finish_non_exhaustive(),
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

/// The tokens of a [`TokenSource`].
pub(crate) enum Tokens {
    PerNode(NodeTokens),
    Static(String),
}

impl Tokens {
    pub(crate) fn new(source: TokenSource) -> Self {
        match source {
            TokenSource::PerNode {
                audience_prefix,
                issuer,
            } => Self::PerNode(NodeTokens::new(audience_prefix, issuer)),
            TokenSource::Static(token) => Self::Static(token),
        }
    }

    /// The interceptor for calls to `node`'s agent.
    pub(crate) async fn for_node(&self, node: &str) -> Result<BearerAuth, AgentError> {
        match self {
            Self::PerNode(tokens) => tokens.for_node(node).await,
            Self::Static(token) => BearerAuth::new(token),
        }
    }

    /// Drops what is kept for `node`.
    pub(crate) fn forget(&self, node: &str) {
        if let Self::PerNode(tokens) = self {
            tokens.forget(node);
        }
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
}

//! One bearer token per node, each bound to that node's audience
//! (`<prefix>:<node>`), requested when first needed and renewed at 80% of its lifetime
//! as kubelet renews projected tokens. A token for one node is refused by every other
//! node's agent, so root on a node that reads the tokens sent to its own agent gains
//! nothing against the others.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::time::Instant;

use super::{AgentError, BearerAuth, TokenIssuer};

/// The fraction of a token's lifetime after which it is renewed.
const RENEW_AT_FRACTION: f64 = 0.8;

/// The audience of tokens for `node`'s agent; the agent checks the same string against
/// its own node name (agent `auth::node_audience`).
pub fn node_audience(prefix: &str, node: &str) -> String {
    format!("{prefix}:{node}")
}

/// How long after it was received a token valid for `valid_for` is renewed.
pub fn renew_after(valid_for: Duration) -> Duration {
    valid_for.mul_f64(RENEW_AT_FRACTION)
}

/// A token in use and when to replace it.
struct Cached {
    auth: BearerAuth,
    renew_at: Instant,
    expires_at: Instant,
}

/// What a node's slot says about `now`.
#[derive(Debug, PartialEq, Eq)]
enum Freshness {
    /// Use the cached token.
    Fresh,
    /// Ask for a new token; the cached one may still be used if asking fails.
    Renew,
    /// No usable token: ask, and fail if that fails.
    Missing,
}

impl Cached {
    fn freshness(cached: Option<&Self>, now: Instant) -> Freshness {
        match cached {
            Some(c) if now < c.renew_at => Freshness::Fresh,
            Some(c) if now < c.expires_at => Freshness::Renew,
            _ => Freshness::Missing,
        }
    }
}

/// A node's token; the async lock makes renewal single-flight per node: callers that
/// find it stale while another renews wait for that renewal instead of asking again.
type Slot = Arc<tokio::sync::Mutex<Option<Cached>>>;

/// The per-node tokens of an [`AgentPool`](super::AgentPool).
pub(crate) struct NodeTokens {
    audience_prefix: String,
    issuer: Arc<dyn TokenIssuer>,
    slots: Mutex<HashMap<String, Slot>>,
}

impl NodeTokens {
    pub(crate) fn new(audience_prefix: String, issuer: Arc<dyn TokenIssuer>) -> Self {
        Self {
            audience_prefix,
            issuer,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The interceptor carrying `node`'s current token.
    pub(crate) async fn for_node(&self, node: &str) -> Result<BearerAuth, AgentError> {
        let slot = self.slot(node);
        let mut cached = slot.lock().await;
        let freshness = Cached::freshness(cached.as_ref(), Instant::now());
        if freshness == Freshness::Fresh
            && let Some(c) = cached.as_ref()
        {
            return Ok(c.auth.clone());
        }
        let audience = node_audience(&self.audience_prefix, node);
        match self.issue(&audience).await {
            Ok(fresh) => {
                let auth = fresh.auth.clone();
                *cached = Some(fresh);
                Ok(auth)
            }
            // The old token has a fifth of its life left: keep calling the agent with it
            // and ask again on the next call, rather than fail calls the token still covers.
            Err(err) if freshness == Freshness::Renew => {
                tracing::warn!(node, error = %err, "cannot renew the agent token; using the current one until it expires");
                cached.as_ref().map(|c| c.auth.clone()).ok_or(err)
            }
            Err(err) => Err(err),
        }
    }

    async fn issue(&self, audience: &str) -> Result<Cached, AgentError> {
        let issued = self.issuer.issue(audience).await?;
        let auth = BearerAuth::new(&issued.token)?;
        let received = Instant::now();
        Ok(Cached {
            auth,
            renew_at: received + renew_after(issued.valid_for),
            expires_at: received + issued.valid_for,
        })
    }

    /// Drops `node`'s token, e.g. once the Node is deleted.
    pub(crate) fn forget(&self, node: &str) {
        self.lock().remove(node);
    }

    fn slot(&self, node: &str) -> Slot {
        Arc::clone(self.lock().entry(node.to_owned()).or_default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        // Entries are inserted and removed whole, so a poisoned map is still consistent.
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
#[path = "node_tokens_tests.rs"]
mod tests;

//! Who may call the agent over TCP: a bearer token checked with TokenReview, then a
//! SubjectAccessReview per call on `agents.stevedore.dev/<node>`, with decisions cached
//! briefly. Applied per service as a tower layer; the root-only Unix socket skips it.

mod access;
mod cache;
mod layer;
mod review;
pub mod tls;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tonic::Status;

pub use access::{Access, Rule, known_method, rule_for};
pub use cache::{Decision, DecisionCache, Ttls, token_digest};
pub use layer::{AuthLayer, Authenticated};
pub use review::{AGENT_GROUP, AGENT_RESOURCE, KubeReviewer, ReviewError, Reviewer, User};

/// How long a decision is reused: kubelet's defaults for its webhook authentication
/// (`cacheTTL` 2 min) and for a refused authorization (`cacheUnauthorizedTTL` 30 s). With
/// 30 s for every decision, the control plane's calls to 500 agents cost the apiserver
/// 1,000 reviews every 30 s.
const DECISION_TTLS: Ttls = Ttls {
    allowed: Duration::from_secs(120),
    refused: Duration::from_secs(30),
};
/// Most decisions remembered.
const DECISION_CAPACITY: usize = 4096;

/// The audience of tokens for `node`'s agent. Kubelet's model: a credential names the one
/// node it is for, so root on a node, who can read every token sent to its own agent,
/// cannot replay one against another node's agent. The prefix is the deployment's
/// (`--token-audience`), the node name is the agent's own.
pub fn node_audience(prefix: &str, node: &str) -> String {
    format!("{prefix}:{node}")
}

/// The bearer token of an `authorization` header value, if it holds one.
pub fn bearer_token(header: Option<&str>) -> Option<&str> {
    let (scheme, token) = header?.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Decides whether a call may proceed.
pub struct Gate<R> {
    reviewer: R,
    cache: Mutex<DecisionCache>,
}

impl<R: Reviewer> Gate<R> {
    pub fn new(reviewer: R) -> Self {
        Self {
            reviewer,
            cache: Mutex::new(DecisionCache::new(DECISION_TTLS, DECISION_CAPACITY)),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, DecisionCache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `Ok` when a call to `path` with this `authorization` header may proceed.
    pub async fn check(&self, path: &str, authorization: Option<&str>) -> Result<(), Status> {
        let access = match rule_for(path) {
            Rule::Public => return Ok(()),
            Rule::Deny => return Err(Status::unimplemented(format!("no method {path}"))),
            Rule::Check(access) => access,
        };
        let Some(token) = bearer_token(authorization) else {
            return Err(Status::unauthenticated(
                "a bearer token is required (authorization: Bearer <token>)",
            ));
        };
        let digest = token_digest(token);
        let cached = self.cache().get(&digest, access, Instant::now());
        let decision = match cached {
            Some(decision) => decision,
            None => {
                let decision = self.review(token, access).await?;
                self.cache()
                    .insert(digest, access, decision, Instant::now());
                decision
            }
        };
        match decision {
            Decision::Allowed => Ok(()),
            Decision::Unauthenticated => Err(Status::unauthenticated(
                "the bearer token is not valid for this agent",
            )),
            Decision::Denied => Err(Status::permission_denied(format!(
                "not allowed to {} {AGENT_RESOURCE}.{AGENT_GROUP}/{}",
                access.verb, access.subresource
            ))),
        }
    }

    async fn review(&self, token: &str, access: Access) -> Result<Decision, Status> {
        let unavailable = |err: ReviewError| {
            tracing::warn!(error = %err, "cannot review a caller");
            Status::unavailable(err.to_string())
        };
        let Some(user) = self
            .reviewer
            .authenticate(token)
            .await
            .map_err(unavailable)?
        else {
            return Ok(Decision::Unauthenticated);
        };
        let allowed = self
            .reviewer
            .authorize(&user, access)
            .await
            .map_err(unavailable)?;
        tracing::debug!(user = %user.name, subresource = access.subresource, verb = access.verb, allowed, "reviewed caller");
        Ok(if allowed {
            Decision::Allowed
        } else {
            Decision::Denied
        })
    }
}

#[cfg(test)]
mod tests;

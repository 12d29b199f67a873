//! Asking the apiserver for a token for one node's agent (TokenRequest on the control
//! plane's own service account), behind a narrow trait so the cache can be tested with
//! a recording double.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use k8s_openapi::api::{
    authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec},
    core::v1::ServiceAccount,
};
use kube::{Api, api::PostParams};

use super::AgentError;

/// How long the tokens asked for live. An hour, as kubelet's projected tokens: long
/// enough that renewals (at 80%) are rare, short enough that a leaked one soon expires.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// A token and how long it stays valid from the moment it was received.
#[derive(Clone)]
pub struct IssuedToken {
    pub token: String,
    pub valid_for: Duration,
}

impl std::fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedToken")
            .field("valid_for", &self.valid_for)
            .finish_non_exhaustive()
    }
}

/// The future of one [`TokenIssuer::issue`].
pub type IssueFuture<'a> =
    Pin<Box<dyn Future<Output = Result<IssuedToken, AgentError>> + Send + 'a>>;

/// Issues bearer tokens bound to one audience.
pub trait TokenIssuer: Send + Sync + 'static {
    fn issue<'a>(&'a self, audience: &'a str) -> IssueFuture<'a>;
}

/// The pod a token is bound to: the apiserver stops accepting the token once that pod
/// is gone, so the tokens of a deleted control-plane replica die with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundPod {
    pub name: String,
    pub uid: String,
}

/// [`TokenIssuer`] backed by the TokenRequest API of the control plane's own service
/// account (RBAC: `create` on `serviceaccounts/token` for that one account).
pub struct KubeTokenIssuer {
    accounts: Api<ServiceAccount>,
    service_account: String,
    bound_pod: Option<BoundPod>,
}

impl KubeTokenIssuer {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        service_account: String,
        bound_pod: Option<BoundPod>,
    ) -> Arc<Self> {
        Arc::new(Self {
            accounts: Api::namespaced(client, namespace),
            service_account,
            bound_pod,
        })
    }

    fn request(&self, audience: &str) -> TokenRequest {
        let bound_object_ref = self.bound_pod.as_ref().map(|pod| BoundObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.name.clone()),
            uid: Some(pod.uid.clone()),
        });
        TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![audience.to_owned()],
                expiration_seconds: i64::try_from(TOKEN_LIFETIME.as_secs()).ok(),
                bound_object_ref,
            },
            ..Default::default()
        }
    }
}

impl TokenIssuer for KubeTokenIssuer {
    fn issue<'a>(&'a self, audience: &'a str) -> IssueFuture<'a> {
        Box::pin(async move {
            let issued = self
                .accounts
                .create_token_request(
                    &self.service_account,
                    &PostParams::default(),
                    &self.request(audience),
                )
                .await
                .map_err(|err| AgentError::TokenRequest {
                    audience: audience.to_owned(),
                    message: api_message(err),
                })?;
            let status = issued.status.ok_or_else(|| AgentError::TokenRequest {
                audience: audience.to_owned(),
                message: "the apiserver issued no token".to_owned(),
            })?;
            let valid_for = remaining(
                status.expiration_timestamp.0,
                k8s_openapi::jiff::Timestamp::now(),
            );
            Ok(IssuedToken {
                token: status.token,
                valid_for,
            })
        })
    }
}

/// How long a token expiring at `expires` is valid from `now`, at most
/// [`TOKEN_LIFETIME`]: the apiserver may shorten a lifetime but a skewed clock must not
/// make a token look longer-lived than asked for.
fn remaining(expires: k8s_openapi::jiff::Timestamp, now: k8s_openapi::jiff::Timestamp) -> Duration {
    let left = expires.duration_since(now);
    Duration::try_from(left)
        .unwrap_or(Duration::ZERO)
        .min(TOKEN_LIFETIME)
}

/// The apiserver's own words for a failed request.
fn api_message(err: kube::Error) -> String {
    match err {
        kube::Error::Api(status) => status.message,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_lifetime_is_capped_and_never_negative() {
        let now = k8s_openapi::jiff::Timestamp::from_second(1_000_000).expect("valid");
        let at =
            |secs: i64| k8s_openapi::jiff::Timestamp::from_second(1_000_000 + secs).expect("valid");
        assert_eq!(remaining(at(600), now), Duration::from_secs(600));
        assert_eq!(remaining(at(7200), now), TOKEN_LIFETIME);
        assert_eq!(remaining(at(-5), now), Duration::ZERO);
    }

    #[tokio::test]
    async fn request_names_one_audience_and_the_bound_pod() {
        let issuer = KubeTokenIssuer {
            accounts: Api::namespaced(test_client(), "kube-system"),
            service_account: "stevedore-controlplane".into(),
            bound_pod: Some(BoundPod {
                name: "cp-0".into(),
                uid: "uid-0".into(),
            }),
        };
        let request = issuer.request("stevedore-agent:node-a");
        assert_eq!(request.spec.audiences, ["stevedore-agent:node-a"]);
        assert_eq!(request.spec.expiration_seconds, Some(3600));
        let bound = request.spec.bound_object_ref.expect("bound to the pod");
        assert_eq!(bound.name.as_deref(), Some("cp-0"));
        assert_eq!(bound.uid.as_deref(), Some("uid-0"));
    }

    fn test_client() -> kube::Client {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("valid URI"));
        kube::Client::try_from(config).expect("client")
    }
}

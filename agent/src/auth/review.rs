//! Asking Kubernetes who a token belongs to (TokenReview) and whether that user may
//! do something to this node's agent (SubjectAccessReview).

use std::collections::BTreeMap;
use std::future::Future;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;

use super::Access;

/// API group and resource the agent's permissions are expressed on.
pub const AGENT_GROUP: &str = "stevedore.dev";
pub const AGENT_RESOURCE: &str = "agents";

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Why a review could not be made (not: the answer was no).
#[derive(Debug, thiserror::Error)]
#[error("{review} failed: {source}")]
pub struct ReviewError {
    pub review: &'static str,
    #[source]
    pub source: kube::Error,
}

/// Authentication and authorization decisions.
pub trait Reviewer: Send + Sync + 'static {
    /// The token's user, or `None` when the token is not valid for the audience.
    fn authenticate(
        &self,
        token: &str,
    ) -> impl Future<Output = Result<Option<User>, ReviewError>> + Send;

    /// Whether `user` has `access` on this node's agent.
    fn authorize(
        &self,
        user: &User,
        access: Access,
    ) -> impl Future<Output = Result<bool, ReviewError>> + Send;
}

/// [`Reviewer`] backed by the Kubernetes API.
pub struct KubeReviewer {
    client: kube::Client,
    audience: String,
    node: String,
}

impl KubeReviewer {
    pub fn new(client: kube::Client, audience: String, node: String) -> Self {
        Self {
            client,
            audience,
            node,
        }
    }
}

impl Reviewer for KubeReviewer {
    async fn authenticate(&self, token: &str) -> Result<Option<User>, ReviewError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: Some(vec![self.audience.clone()]),
            },
            ..Default::default()
        };
        let reviewed = kube::Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| ReviewError {
                review: "TokenReview",
                source,
            })?;
        let Some(status) = reviewed.status else {
            return Ok(None);
        };
        // The API server checks the audience; insist it said so.
        let audience_ok = status
            .audiences
            .as_ref()
            .is_some_and(|a| a.contains(&self.audience));
        if status.authenticated != Some(true) || !audience_ok {
            return Ok(None);
        }
        Ok(status.user.and_then(|user| {
            Some(User {
                name: user.username?,
                uid: user.uid,
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
            })
        }))
    }

    async fn authorize(&self, user: &User, access: Access) -> Result<bool, ReviewError> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(AGENT_GROUP.to_owned()),
                    resource: Some(AGENT_RESOURCE.to_owned()),
                    name: Some(self.node.clone()),
                    subresource: Some(access.subresource.to_owned()),
                    verb: Some(access.verb.to_owned()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviewed = kube::Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|source| ReviewError {
                review: "SubjectAccessReview",
                source,
            })?;
        Ok(reviewed
            .status
            .is_some_and(|s| s.allowed && s.denied != Some(true)))
    }
}

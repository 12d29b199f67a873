//! `stevedore.agent.v1.PodService` over [`NodePods`].

use stevedore_proto::stevedore::agent::v1::{
    ConditionStatus, SetPodConditionRequest, SetPodConditionResponse,
    pod_service_server::PodService,
};
use tonic::{Request, Response, Status};

use super::{DesiredCondition, NodePods, PodApi, PodError, PodKey};

/// The gRPC face of the node's pods.
#[derive(Clone)]
pub struct PodGrpc<P> {
    pods: NodePods<P>,
}

impl<P> PodGrpc<P> {
    pub fn new(pods: NodePods<P>) -> Self {
        Self { pods }
    }
}

fn status_name(status: i32) -> Result<&'static str, PodError> {
    match ConditionStatus::try_from(status) {
        Ok(ConditionStatus::True) => Ok("True"),
        Ok(ConditionStatus::False) => Ok("False"),
        Ok(ConditionStatus::Unknown) => Ok("Unknown"),
        _ => Err(PodError::Invalid("status must be TRUE, FALSE or UNKNOWN")),
    }
}

/// A condition type is a qualified name: `[prefix/]Name`, at most 316 characters.
fn valid_condition_type(type_: &str) -> bool {
    let name = type_.rsplit('/').next().unwrap_or_default();
    !name.is_empty()
        && name.len() <= 63
        && type_.len() <= 316
        && type_
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

#[tonic::async_trait]
impl<P: PodApi> PodService for PodGrpc<P> {
    async fn set_pod_condition(
        &self,
        request: Request<SetPodConditionRequest>,
    ) -> Result<Response<SetPodConditionResponse>, Status> {
        let request = request.into_inner();
        let key = PodKey::from_proto(request.pod)?;
        if !valid_condition_type(&request.condition_type) {
            return Err(PodError::Invalid("condition_type is not a valid condition type").into());
        }
        let desired = DesiredCondition {
            type_: request.condition_type,
            status: status_name(request.status)?.to_owned(),
            reason: request.reason,
            message: request.message,
        };
        self.pods.set_condition(&key, &desired).await?;
        Ok(Response::new(SetPodConditionResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condition_types() {
        for (type_, ok) in [
            ("InPlaceUpdateReady", true),
            ("apps.kruise.io/KruisePodReady", true),
            ("", false),
            ("a/", false),
            ("has space", false),
            ("x;rm", false),
        ] {
            assert_eq!(valid_condition_type(type_), ok, "{type_:?}");
        }
    }

    #[test]
    fn statuses() {
        assert_eq!(status_name(1).ok(), Some("True"));
        assert_eq!(status_name(2).ok(), Some("False"));
        assert_eq!(status_name(3).ok(), Some("Unknown"));
        assert!(status_name(0).is_err());
        assert!(status_name(42).is_err());
    }
}

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

#[tonic::async_trait]
impl<P: PodApi> PodService for PodGrpc<P> {
    async fn set_pod_condition(
        &self,
        request: Request<SetPodConditionRequest>,
    ) -> Result<Response<SetPodConditionResponse>, Status> {
        let request = request.into_inner();
        let key = PodKey::from_proto(request.pod)?;
        // Checked before the pod is read: a type the agent does not own costs no API call.
        super::check_owned_condition(&request.condition_type)?;
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
    use std::sync::{Arc, Mutex};

    use k8s_openapi::api::core::v1::Pod;
    use stevedore_proto::stevedore::agent::v1::PodRef;

    use super::*;

    /// One pod on node `n1`; records every status patch.
    #[derive(Clone, Default)]
    struct OnePod {
        patches: Arc<Mutex<Vec<serde_json::Value>>>,
    }

    impl PodApi for OnePod {
        async fn get(&self, _: &str, name: &str) -> Result<Option<Pod>, kube::Error> {
            let pod = serde_json::from_value(serde_json::json!({
                "metadata": { "name": name, "namespace": "ns", "uid": "u1" },
                "spec": { "nodeName": "n1", "containers": [] },
            }))
            .expect("valid pod");
            Ok(Some(pod))
        }

        async fn patch_status(
            &self,
            _: &str,
            _: &str,
            patch: serde_json::Value,
        ) -> Result<(), kube::Error> {
            self.patches.lock().expect("not poisoned").push(patch);
            Ok(())
        }
    }

    fn request(type_: &str) -> Request<SetPodConditionRequest> {
        Request::new(SetPodConditionRequest {
            pod: Some(PodRef {
                namespace: "ns".into(),
                name: "web".into(),
                uid: "u1".into(),
            }),
            condition_type: type_.into(),
            status: ConditionStatus::False.into(),
            reason: "Test".into(),
            message: String::new(),
        })
    }

    #[tokio::test]
    async fn only_the_two_owned_conditions_are_set() {
        for (type_, allowed) in [
            ("InPlaceUpdateReady", true),
            ("KruisePodReady", true),
            ("Ready", false),
            ("ContainersReady", false),
            ("PodScheduled", false),
            ("apps.kruise.io/KruisePodReady", false),
            ("inplaceupdateready", false),
            // A PodProbeMarker's condition is written by the control plane, never here.
            ("game.kruise.io/healthy", false),
            ("", false),
        ] {
            let api = OnePod::default();
            let service = PodGrpc::new(NodePods::new(api.clone(), "n1"));
            let result = service.set_pod_condition(request(type_)).await;
            let patches = api.patches.lock().expect("not poisoned").len();
            if allowed {
                assert!(result.is_ok(), "{type_:?}: {result:?}");
                assert_eq!(patches, 1, "{type_:?}");
            } else {
                let status = result.expect_err(type_);
                assert_eq!(status.code(), tonic::Code::InvalidArgument, "{type_:?}");
                assert!(
                    status.message().contains(&format!("{type_:?}")),
                    "{type_:?}: {}",
                    status.message()
                );
                assert_eq!(patches, 0, "{type_:?}");
            }
        }
    }

    #[tokio::test]
    async fn reasons_and_messages_longer_than_a_condition_holds_are_refused() {
        let cases = [
            ("1 KiB reason", 1024, 0, true),
            ("32 KiB message", 0, 32 << 10, true),
            ("reason over 1 KiB", 1025, 0, false),
            ("100 KiB message", 0, 100 << 10, false),
        ];
        for (name, reason_len, message_len, allowed) in cases {
            let api = OnePod::default();
            let service = PodGrpc::new(NodePods::new(api.clone(), "n1"));
            let mut req = request("KruisePodReady");
            req.get_mut().reason = "R".repeat(reason_len);
            req.get_mut().message = "m".repeat(message_len);
            let result = service.set_pod_condition(req).await;
            let patches = api.patches.lock().expect("not poisoned").len();
            if allowed {
                assert!(result.is_ok(), "{name}: {result:?}");
                assert_eq!(patches, 1, "{name}");
            } else {
                let status = result.expect_err(name);
                assert_eq!(status.code(), tonic::Code::InvalidArgument, "{name}");
                let field = if reason_len > 0 { "reason" } else { "message" };
                assert!(
                    status.message().contains(&format!("{field} is ")),
                    "{name}: {}",
                    status.message()
                );
                assert_eq!(patches, 0, "{name}");
            }
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

//! Pods of the agent's own node: reading them with the node and UID checks every
//! action needs, and setting readiness conditions by patching `pods/status`.

mod api;
mod conditions;
mod service;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use tonic::Status;

pub use api::{KubePods, PodApi};
pub use conditions::{DesiredCondition, condition_status, set_condition};
pub use service::PodGrpc;

/// Condition that gates a pod's readiness while it is being restarted in place.
pub const KRUISE_POD_READY: &str = "KruisePodReady";
/// Condition that gates a pod's readiness during an in-place update.
pub const IN_PLACE_UPDATE_READY: &str = "InPlaceUpdateReady";
/// The only conditions the agent sets. The admission policy lets the agent's service
/// account change nothing else in a pod's status, so refusing others here gives the
/// caller a clear answer instead of the apiserver's denial.
pub const OWNED_CONDITIONS: [&str; 2] = [IN_PLACE_UPDATE_READY, KRUISE_POD_READY];

/// Refuses a condition type the agent does not own.
pub fn check_owned_condition(type_: &str) -> Result<(), PodError> {
    if OWNED_CONDITIONS.contains(&type_) {
        Ok(())
    } else {
        Err(PodError::NotOwned {
            type_: type_.to_owned(),
        })
    }
}

/// The longest condition message the agent writes: `metav1.Condition`'s bound (32 KiB),
/// so a caller cannot grow the pod object (and every watch of pods) by its messages.
pub const MAX_CONDITION_MESSAGE_BYTES: usize = 32 << 10;
/// The longest condition reason: `metav1.Condition`'s bound.
pub const MAX_CONDITION_REASON_BYTES: usize = 1024;

/// Refuses a reason or message longer than a condition may hold.
pub fn check_condition_text(reason: &str, message: &str) -> Result<(), PodError> {
    for (field, text, limit) in [
        ("reason", reason, MAX_CONDITION_REASON_BYTES),
        ("message", message, MAX_CONDITION_MESSAGE_BYTES),
    ] {
        if text.len() > limit {
            return Err(PodError::TooLong {
                field,
                len: text.len(),
                limit,
            });
        }
    }
    Ok(())
}

/// Identifies one pod, as `PodRef` in the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodKey {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodKey {
    /// Validates an API `PodRef`: all three fields are required.
    pub fn from_proto(
        pod: Option<stevedore_proto::stevedore::agent::v1::PodRef>,
    ) -> Result<Self, PodError> {
        let pod = pod.ok_or(PodError::Invalid("pod is required"))?;
        if pod.namespace.is_empty() {
            return Err(PodError::Invalid("pod.namespace is required"));
        }
        if pod.name.is_empty() {
            return Err(PodError::Invalid("pod.name is required"));
        }
        if pod.uid.is_empty() {
            return Err(PodError::Invalid("pod.uid is required"));
        }
        Ok(Self {
            namespace: pod.namespace,
            name: pod.name,
            uid: pod.uid,
        })
    }
}

/// Why a pod could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum PodError {
    #[error("invalid request: {0}")]
    Invalid(&'static str),
    #[error(
        "invalid request: the agent sets only the conditions InPlaceUpdateReady and KruisePodReady, not {type_:?}"
    )]
    NotOwned { type_: String },
    #[error(
        "invalid request: {field} is {len} bytes, more than the {limit} a condition's {field} may hold"
    )]
    TooLong {
        field: &'static str,
        len: usize,
        limit: usize,
    },
    #[error("pod {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    #[error("pod {namespace}/{name} is bound to node {bound:?}, not to this agent's node {node}")]
    OtherNode {
        namespace: String,
        name: String,
        bound: Option<String>,
        node: String,
    },
    #[error("pod {namespace}/{name} has UID {actual}, not {expected}")]
    UidMismatch {
        namespace: String,
        name: String,
        expected: String,
        actual: String,
    },
    #[error("Kubernetes API: {0}")]
    Api(#[from] kube::Error),
}

impl From<PodError> for Status {
    fn from(err: PodError) -> Self {
        let message = err.to_string();
        match err {
            PodError::Invalid(_) | PodError::NotOwned { .. } | PodError::TooLong { .. } => {
                Status::invalid_argument(message)
            }
            PodError::NotFound { .. } => Status::not_found(message),
            PodError::OtherNode { .. } => Status::permission_denied(message),
            PodError::UidMismatch { .. } => Status::failed_precondition(message),
            PodError::Api(kube::Error::Api(status)) => match status.code {
                404 => Status::not_found(message),
                // A conflict on our patch is the UID precondition failing.
                409 => Status::failed_precondition(message),
                403 => Status::permission_denied(message),
                _ => Status::unavailable(message),
            },
            PodError::Api(_) => Status::unavailable(message),
        }
    }
}

/// The pods of one node, as the agent may touch them.
#[derive(Clone)]
pub struct NodePods<P> {
    api: P,
    node: String,
}

impl<P: PodApi> NodePods<P> {
    pub fn new(api: P, node: impl Into<String>) -> Self {
        Self {
            api,
            node: node.into(),
        }
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// The pod, after checking it exists, is bound to this node and has the UID.
    pub async fn get(&self, key: &PodKey) -> Result<Pod, PodError> {
        let pod = self
            .api
            .get(&key.namespace, &key.name)
            .await?
            .ok_or_else(|| PodError::NotFound {
                namespace: key.namespace.clone(),
                name: key.name.clone(),
            })?;
        let bound = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        if bound.as_deref() != Some(self.node.as_str()) {
            return Err(PodError::OtherNode {
                namespace: key.namespace.clone(),
                name: key.name.clone(),
                bound,
                node: self.node.clone(),
            });
        }
        let actual = pod.metadata.uid.clone().unwrap_or_default();
        if actual != key.uid {
            return Err(PodError::UidMismatch {
                namespace: key.namespace.clone(),
                name: key.name.clone(),
                expected: key.uid.clone(),
                actual,
            });
        }
        Ok(pod)
    }

    /// Sets one condition; returns whether the pod was patched (false: already so).
    #[tracing::instrument(skip_all, fields(node = %self.node, namespace = %key.namespace, pod = %key.name, condition = %desired.type_, status = %desired.status))]
    pub async fn set_condition(
        &self,
        key: &PodKey,
        desired: &DesiredCondition,
    ) -> Result<bool, PodError> {
        check_owned_condition(&desired.type_)?;
        check_condition_text(&desired.reason, &desired.message)?;
        let pod = self.get(key).await?;
        let current = pod.status.and_then(|s| s.conditions).unwrap_or_default();
        let Some(next) = set_condition(&current, desired, Time(Timestamp::now())) else {
            tracing::debug!("condition already set");
            return Ok(false);
        };
        let changed: Vec<_> = next.iter().filter(|c| c.type_ == desired.type_).collect();
        // The UID in the body is a precondition: the API server refuses the patch with
        // 409 Conflict if the pod was replaced by another of the same name meanwhile.
        let patch = json!({
            "metadata": { "uid": key.uid },
            "status": { "conditions": changed },
        });
        self.api
            .patch_status(&key.namespace, &key.name, patch)
            .await?;
        tracing::info!("condition set");
        Ok(true)
    }
}

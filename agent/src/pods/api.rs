//! The narrow slice of the Kubernetes API the agent uses for pods, behind a trait so
//! the rules above it can be tested with a double.

use std::future::Future;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};

/// Reads pods and patches their status.
pub trait PodApi: Clone + Send + Sync + 'static {
    /// The pod, or `None` when it does not exist.
    fn get(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Pod>, kube::Error>> + Send;

    /// Applies a strategic-merge patch to `pods/status`.
    fn patch_status(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;
}

/// [`PodApi`] over a real API server.
#[derive(Clone)]
pub struct KubePods {
    client: kube::Client,
}

impl KubePods {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

/// Field manager of the agent's patches.
const FIELD_MANAGER: &str = "stevedore-agent";

impl PodApi for KubePods {
    async fn get(&self, namespace: &str, name: &str) -> Result<Option<Pod>, kube::Error> {
        kube::Api::<Pod>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await
    }

    async fn patch_status(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> Result<(), kube::Error> {
        kube::Api::<Pod>::namespaced(self.client.clone(), namespace)
            .patch_status(
                name,
                &PatchParams {
                    field_manager: Some(FIELD_MANAGER.to_owned()),
                    ..PatchParams::default()
                },
                &Patch::Strategic(patch),
            )
            .await
            .map(drop)
    }
}

//! `stevedore.agent.v1.NodeService`: what the agent runs on and its limits.

use stevedore_proto::stevedore::agent::v1::{
    GetNodeInfoRequest, GetNodeInfoResponse, node_service_server::NodeService,
};
use tonic::{Request, Response, Status};

use crate::containers::Containerd;

/// The agent's own version.
pub const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The gRPC face of the node description.
#[derive(Clone)]
pub struct NodeGrpc {
    pub node_name: String,
    pub containerd: Containerd,
    pub snapshotter: String,
    pub max_concurrent_pulls: u32,
    pub max_concurrent_restarts: u32,
}

#[tonic::async_trait]
impl NodeService for NodeGrpc {
    #[tracing::instrument(skip_all, fields(node = %self.node_name))]
    async fn get_node_info(
        &self,
        _request: Request<GetNodeInfoRequest>,
    ) -> Result<Response<GetNodeInfoResponse>, Status> {
        let containerd_version = self
            .containerd
            .version()
            .await
            .map_err(|err| Status::unavailable(err.to_string()))?;
        Ok(Response::new(GetNodeInfoResponse {
            node_name: self.node_name.clone(),
            containerd_version,
            snapshotter: self.snapshotter.clone(),
            agent_version: AGENT_VERSION.to_owned(),
            max_concurrent_pulls: self.max_concurrent_pulls,
            max_concurrent_restarts: self.max_concurrent_restarts,
            platform: crate::images::platform::Platform::host().to_string(),
        }))
    }
}

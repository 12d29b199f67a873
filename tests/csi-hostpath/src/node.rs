//! CSI Node: publishing a volume bind-mounts its directory onto the kubelet's target path;
//! expansion on the node has nothing to grow (a directory), so it confirms the size.

use std::io;
use std::path::Path;
use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::csi::node_server::Node;
use crate::csi::node_service_capability::{self, rpc};
use crate::csi::{
    NodeExpandVolumeRequest, NodeExpandVolumeResponse, NodeGetCapabilitiesRequest,
    NodeGetCapabilitiesResponse, NodeGetInfoRequest, NodeGetInfoResponse, NodePublishVolumeRequest,
    NodePublishVolumeResponse, NodeServiceCapability, NodeUnpublishVolumeRequest,
    NodeUnpublishVolumeResponse,
};
use crate::layout::Layout;
use crate::mounts::Mounter;
use crate::validate;

pub struct NodeService<M> {
    pub node_name: String,
    pub layout: Layout,
    pub mounter: Arc<M>,
}

fn io_status(what: &str, path: &Path, error: &io::Error) -> Status {
    Status::internal(format!("{what} {}: {error}", path.display()))
}

impl<M: Mounter> NodeService<M> {
    fn existing_volume_dir(&self, id: &str) -> Result<std::path::PathBuf, Status> {
        let dir = self.layout.volume_dir(id);
        if dir.is_dir() {
            Ok(dir)
        } else {
            Err(Status::not_found(format!(
                "volume {id:?} does not exist on this node"
            )))
        }
    }

    /// Runs a mount step off the async workers: mount(8) blocks until it returns.
    async fn blocking<T: Send + 'static>(
        &self,
        step: impl FnOnce(&M) -> Result<T, Status> + Send + 'static,
    ) -> Result<T, Status> {
        let mounter = Arc::clone(&self.mounter);
        tokio::task::spawn_blocking(move || step(&mounter))
            .await
            .map_err(|e| Status::internal(format!("mount task failed: {e}")))?
    }
}

#[tonic::async_trait]
impl<M: Mounter> Node for NodeService<M> {
    async fn node_publish_volume(
        &self,
        request: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let request = request.into_inner();
        let id = validate::volume_id("volume_id", &request.volume_id)?;
        let target = validate::absolute_path("target_path", &request.target_path)?.to_owned();
        let capability = request
            .volume_capability
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("volume_capability is missing"))?;
        validate::capability("volume_capability", capability)?;
        let source = self.existing_volume_dir(id)?;
        let readonly = request.readonly;
        self.blocking(move |mounter| {
            // Published already (the kubelet retries after a timeout): nothing to do.
            if mounter.is_mount_point(&target)? {
                return Ok(());
            }
            std::fs::create_dir_all(&target).map_err(|e| io_status("creating", &target, &e))?;
            Ok(mounter.bind(&source, &target, readonly)?)
        })
        .await?;
        tracing::info!(
            volume = id,
            target = request.target_path,
            "volume published"
        );
        Ok(Response::new(NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let request = request.into_inner();
        validate::volume_id("volume_id", &request.volume_id)?;
        let target = validate::absolute_path("target_path", &request.target_path)?.to_owned();
        self.blocking(move |mounter| {
            if mounter.is_mount_point(&target)? {
                mounter.unmount(&target)?;
            }
            match std::fs::remove_dir(&target) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    Err(io_status("removing", &target, &e))
                }
                _ => Ok(()),
            }
        })
        .await?;
        tracing::info!(
            volume = request.volume_id,
            target = request.target_path,
            "volume unpublished"
        );
        Ok(Response::new(NodeUnpublishVolumeResponse {}))
    }

    /// A directory grows with its filesystem: there is nothing to resize, so the call
    /// confirms the size the kubelet asks for, after checking the volume is here.
    async fn node_expand_volume(
        &self,
        request: Request<NodeExpandVolumeRequest>,
    ) -> Result<Response<NodeExpandVolumeResponse>, Status> {
        let request = request.into_inner();
        let id = validate::volume_id("volume_id", &request.volume_id)?;
        validate::absolute_path("volume_path", &request.volume_path)?;
        self.existing_volume_dir(id)?;
        let capacity_bytes = request.capacity_range.map_or(0, |r| r.required_bytes);
        tracing::info!(volume = id, capacity_bytes, "volume expanded on the node");
        Ok(Response::new(NodeExpandVolumeResponse { capacity_bytes }))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        let expand = NodeServiceCapability {
            r#type: Some(node_service_capability::Type::Rpc(
                node_service_capability::Rpc {
                    r#type: rpc::Type::ExpandVolume as i32,
                },
            )),
        };
        Ok(Response::new(NodeGetCapabilitiesResponse {
            capabilities: vec![expand],
        }))
    }

    async fn node_get_info(
        &self,
        _: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        Ok(Response::new(NodeGetInfoResponse {
            node_id: self.node_name.clone(),
            max_volumes_per_node: 0,
        }))
    }
}

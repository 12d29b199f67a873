//! CSI Identity: the driver's name and what it offers (a controller service and online
//! expansion, that is, of volumes in use by a running pod).

use tonic::{Request, Response, Status};

use crate::csi::identity_server::Identity;
use crate::csi::plugin_capability::{self, volume_expansion};
use crate::csi::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest,
    GetPluginInfoResponse, PluginCapability, ProbeRequest, ProbeResponse,
};

#[derive(Debug, Clone)]
pub struct IdentityService {
    pub driver_name: String,
}

fn capability(kind: plugin_capability::Type) -> PluginCapability {
    PluginCapability { r#type: Some(kind) }
}

#[tonic::async_trait]
impl Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: self.driver_name.clone(),
            vendor_version: env!("CARGO_PKG_VERSION").to_owned(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        let service = plugin_capability::Service {
            r#type: plugin_capability::service::Type::ControllerService as i32,
        };
        let expansion = plugin_capability::VolumeExpansion {
            r#type: volume_expansion::Type::Online as i32,
        };
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities: vec![
                capability(plugin_capability::Type::Service(service)),
                capability(plugin_capability::Type::VolumeExpansion(expansion)),
            ],
        }))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        Ok(Response::new(ProbeResponse { ready: Some(true) }))
    }
}

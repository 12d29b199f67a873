//! The kubelet's plugin registration API: the kubelet finds this service's socket in its
//! `plugins_registry` directory, asks who it is, then calls the CSI endpoint it names
//! (NodeGetInfo first, to add the driver to the node's CSINode object).

use tonic::{Request, Response, Status};

use crate::pluginregistration::registration_server::Registration;
use crate::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};

/// The plugin type the kubelet's CSI plugin handler serves.
const CSI_PLUGIN_TYPE: &str = "CSIPlugin";
/// The CSI spec versions this driver speaks (the kubelet accepts any 1.x).
const CSI_VERSIONS: [&str; 1] = ["1.0.0"];

#[derive(Debug, Clone)]
pub struct RegistrationService {
    pub driver_name: String,
    /// The CSI socket's path, as the kubelet will dial it.
    pub csi_endpoint: String,
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        Ok(Response::new(PluginInfo {
            r#type: CSI_PLUGIN_TYPE.to_owned(),
            name: self.driver_name.clone(),
            endpoint: self.csi_endpoint.clone(),
            supported_versions: CSI_VERSIONS.iter().map(|v| (*v).to_owned()).collect(),
        }))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        if status.plugin_registered {
            tracing::info!(
                driver = self.driver_name,
                "the kubelet registered the driver"
            );
        } else {
            tracing::error!(
                driver = self.driver_name,
                error = status.error,
                "the kubelet refused the driver's registration"
            );
        }
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

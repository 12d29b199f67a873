//! CSI Controller: volumes are directories, their capacity a record in the state file.
//! One lock serialises the calls, which keeps "record, then save" whole; the sidecars
//! send a handful of calls a minute.

use std::io;

use tokio::sync::Mutex;
use tonic::{Request, Response, Status};

use crate::capacity::Bounds;
use crate::csi::controller_server::Controller;
use crate::csi::controller_service_capability::{self, rpc};
use crate::csi::validate_volume_capabilities_response::Confirmed;
use crate::csi::{
    CapacityRange, ControllerExpandVolumeRequest, ControllerExpandVolumeResponse,
    ControllerGetCapabilitiesRequest, ControllerGetCapabilitiesResponse,
    ControllerServiceCapability, CreateVolumeRequest, CreateVolumeResponse, DeleteVolumeRequest,
    DeleteVolumeResponse, ValidateVolumeCapabilitiesRequest, ValidateVolumeCapabilitiesResponse,
    Volume,
};
use crate::layout::Layout;
use crate::state::{StateFile, StateFileError, VolumeTable};
use crate::validate;

pub struct ControllerService {
    layout: Layout,
    state: StateFile,
    table: Mutex<VolumeTable>,
}

pub fn bounds(range: Option<&CapacityRange>) -> Option<Bounds> {
    range.map(|r| Bounds {
        required_bytes: r.required_bytes,
        limit_bytes: r.limit_bytes,
    })
}

fn io_status(what: &str, error: &io::Error) -> Status {
    Status::internal(format!("{what}: {error}"))
}

impl ControllerService {
    /// Opens the volumes recorded under `layout` (none on the first start).
    pub fn open(layout: Layout) -> Result<Self, StateFileError> {
        let state = layout.state_file();
        let table = state.load()?;
        Ok(Self {
            layout,
            state,
            table: Mutex::new(table),
        })
    }
}

#[tonic::async_trait]
impl Controller for ControllerService {
    async fn create_volume(
        &self,
        request: Request<CreateVolumeRequest>,
    ) -> Result<Response<CreateVolumeResponse>, Status> {
        let request = request.into_inner();
        let id = validate::volume_id("name", &request.name)?;
        validate::capabilities("volume_capabilities", &request.volume_capabilities)?;
        let mut table = self.table.lock().await;
        let record = table.create(id, bounds(request.capacity_range.as_ref()))?;
        let dir = self.layout.volume_dir(id);
        std::fs::create_dir_all(&dir)
            .map_err(|e| io_status(&format!("creating {}", dir.display()), &e))?;
        self.state.save(&table)?;
        tracing::info!(
            volume = id,
            capacity_bytes = record.capacity_bytes,
            "volume created"
        );
        Ok(Response::new(CreateVolumeResponse {
            volume: Some(Volume {
                capacity_bytes: record.capacity_bytes,
                volume_id: id.to_owned(),
                volume_context: Default::default(),
            }),
        }))
    }

    async fn delete_volume(
        &self,
        request: Request<DeleteVolumeRequest>,
    ) -> Result<Response<DeleteVolumeResponse>, Status> {
        let request = request.into_inner();
        let id = validate::volume_id("volume_id", &request.volume_id)?;
        let mut table = self.table.lock().await;
        let dir = self.layout.volume_dir(id);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_status(&format!("removing {}", dir.display()), &e)),
        }
        if table.delete(id) {
            self.state.save(&table)?;
            tracing::info!(volume = id, "volume deleted");
        }
        Ok(Response::new(DeleteVolumeResponse {}))
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<ValidateVolumeCapabilitiesResponse>, Status> {
        let request = request.into_inner();
        let id = validate::volume_id("volume_id", &request.volume_id)?;
        if request.volume_capabilities.is_empty() {
            return Err(Status::invalid_argument("volume_capabilities is empty"));
        }
        if self.table.lock().await.get(id).is_none() {
            return Err(Status::not_found(format!("volume {id:?} does not exist")));
        }
        // Unsupported capabilities are an answer, not an error (the spec: no `confirmed`).
        let response =
            match validate::capabilities("volume_capabilities", &request.volume_capabilities) {
                Ok(()) => ValidateVolumeCapabilitiesResponse {
                    confirmed: Some(Confirmed {
                        volume_context: request.volume_context,
                        volume_capabilities: request.volume_capabilities,
                        parameters: request.parameters,
                    }),
                    message: String::new(),
                },
                Err(refusal) => ValidateVolumeCapabilitiesResponse {
                    confirmed: None,
                    message: refusal.to_string(),
                },
            };
        Ok(Response::new(response))
    }

    async fn controller_get_capabilities(
        &self,
        _: Request<ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<ControllerGetCapabilitiesResponse>, Status> {
        let capability = |kind: rpc::Type| ControllerServiceCapability {
            r#type: Some(controller_service_capability::Type::Rpc(
                controller_service_capability::Rpc {
                    r#type: kind as i32,
                },
            )),
        };
        Ok(Response::new(ControllerGetCapabilitiesResponse {
            capabilities: vec![
                capability(rpc::Type::CreateDeleteVolume),
                capability(rpc::Type::ExpandVolume),
            ],
        }))
    }

    /// Records the new size and asks for node expansion, as a driver with a filesystem on
    /// the volume does: the kubelet then calls NodeExpandVolume on the node where the volume
    /// is mounted, and only after that does the claim's `status.capacity` change.
    async fn controller_expand_volume(
        &self,
        request: Request<ControllerExpandVolumeRequest>,
    ) -> Result<Response<ControllerExpandVolumeResponse>, Status> {
        let request = request.into_inner();
        let id = validate::volume_id("volume_id", &request.volume_id)?;
        let mut table = self.table.lock().await;
        let capacity_bytes = table.expand(id, bounds(request.capacity_range.as_ref()))?;
        self.state.save(&table)?;
        tracing::info!(volume = id, capacity_bytes, "volume expanded");
        Ok(Response::new(ControllerExpandVolumeResponse {
            capacity_bytes,
            node_expansion_required: true,
        }))
    }
}

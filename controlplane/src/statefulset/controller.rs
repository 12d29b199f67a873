//! The StatefulSet controller's state, shared by its workers, and the error of one sync.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource as _;

use super::plan::StatefulSetPlanError;
use crate::api::StatefulSet;
use crate::caches::Stores;
use crate::controller::api_error::ApiError;
use crate::controller::events::EventSink;
use crate::controller::pod_conditions::PodConditions;
use crate::workload::execute::ExecuteError;
use crate::workload::history::HistoryError;
use crate::workload::revision::RevisionError;
use crate::workload::set_controller::PodSetParts;

/// Why a StatefulSet sync failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Plan(#[from] StatefulSetPlanError),
    #[error(transparent)]
    Revision(#[from] RevisionError),
    #[error(transparent)]
    Execute(#[from] ExecuteError),
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// The StatefulSet controller's state, shared by its workers: the pod-set parts every
/// such controller holds.
pub struct StatefulSetController {
    pub(super) parts: PodSetParts,
}

impl StatefulSetController {
    pub fn new(
        client: kube::Client,
        stores: Stores,
        agents: Arc<dyn PodConditions>,
        events: EventSink,
    ) -> Self {
        Self {
            parts: PodSetParts::new(client, stores, agents, events),
        }
    }
}

/// The reference Events are attached to.
pub(super) fn reference(set: &StatefulSet) -> ObjectReference {
    set.object_ref(&())
}

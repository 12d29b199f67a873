//! The CloneSet controller's state, shared by its workers, and the error of one sync. Kept
//! apart from `reconcile` so the steps it calls (`execute`, `guards`) depend on this and
//! not on the reconciler that calls them.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource as _;

use super::plan::PlanError;
use crate::api::CloneSet;
use crate::caches::Stores;
use crate::controller::events::EventSink;
use crate::controller::pod_conditions::PodConditions;
use crate::workload::set_controller::{PodSetParts, PodSetSyncError};

/// Why a CloneSet sync failed; it is retried with backoff.
pub type SyncError = PodSetSyncError<PlanError>;

impl From<PlanError> for SyncError {
    fn from(err: PlanError) -> Self {
        Self::Plan(err)
    }
}

/// The CloneSet controller's state, shared by its workers: the pod-set parts every such
/// controller holds.
pub struct CloneSetController {
    pub(super) parts: PodSetParts,
}

impl CloneSetController {
    /// What every pod-set kind keeps, for the wiring tests to look into.
    #[cfg(test)]
    pub(crate) fn parts(&self) -> &PodSetParts {
        &self.parts
    }

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
pub(super) fn reference(cloneset: &CloneSet) -> ObjectReference {
    cloneset.object_ref(&())
}

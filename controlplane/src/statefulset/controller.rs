//! The StatefulSet controller's state, shared by its workers, and the error of one sync.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource as _;

use super::plan::StatefulSetPlanError;
use crate::api::StatefulSet;
use crate::workload::set_controller::{PodSetParts, PodSetSyncError};

/// Why a StatefulSet sync failed; it is retried with backoff.
pub type SyncError = PodSetSyncError<StatefulSetPlanError>;

impl From<StatefulSetPlanError> for SyncError {
    fn from(err: StatefulSetPlanError) -> Self {
        Self::Plan(err)
    }
}

/// The StatefulSet controller's state, shared by its workers: the pod-set parts every
/// such controller holds.
pub struct StatefulSetController {
    pub(super) parts: PodSetParts,
}

impl StatefulSetController {
    /// What every pod-set kind keeps, for the wiring tests to look into.
    #[cfg(test)]
    pub(crate) fn parts(&self) -> &PodSetParts {
        &self.parts
    }

    /// The controller over `parts`, which the wiring builds (with the budgets it hands in).
    pub fn new(parts: PodSetParts) -> Self {
        Self { parts }
    }
}

/// The reference Events are attached to.
pub(super) fn reference(set: &StatefulSet) -> ObjectReference {
    set.object_ref(&())
}

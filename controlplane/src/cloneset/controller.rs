//! The CloneSet controller's state, shared by its workers, and the error of one sync. Kept
//! apart from `reconcile` so the steps it calls (`execute`, `guards`) depend on this and
//! not on the reconciler that calls them.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource as _;

use super::plan::PlanError;
use crate::api::CloneSet;
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

    /// The controller over `parts`, which the wiring builds (with the budgets it hands in).
    pub fn new(parts: PodSetParts) -> Self {
        Self { parts }
    }
}

/// The reference Events are attached to.
pub(super) fn reference(cloneset: &CloneSet) -> ObjectReference {
    cloneset.object_ref(&())
}

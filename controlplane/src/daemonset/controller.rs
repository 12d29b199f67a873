//! The DaemonSet controller's state, shared by its workers, and the error of one sync.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource as _;

use super::plan::DaemonSetPlanError;
use super::unplaced::UnplacedNodes;
use crate::api::DaemonSet;
use crate::controller::ObjectKey;
use crate::controller::api_error::ApiError;
use crate::controller::create_backoff::CreateBackoff;
use crate::workload::execute::ExecuteError;
use crate::workload::history::HistoryError;
use crate::workload::revision::RevisionError;
use crate::workload::set_controller::PodSetParts;

/// Why a DaemonSet sync failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Plan(#[from] DaemonSetPlanError),
    #[error(transparent)]
    Revision(#[from] RevisionError),
    #[error(transparent)]
    Execute(#[from] ExecuteError),
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// The DaemonSet controller's state, shared by its workers: what every pod-set kind
/// holds, and its own per-node backoff.
pub struct DaemonSetController {
    pub(super) parts: PodSetParts,
    /// Failed pods deleted, per DaemonSet and node: a crash-looping template replaces
    /// its pod on a node at a growing interval, not in a hot loop.
    pub(super) failed_pod_backoff: CreateBackoff<(ObjectKey, String)>,
    /// Nodes wanted but without room, shared with the triggers.
    pub(super) unplaced: Arc<UnplacedNodes>,
}

impl DaemonSetController {
    /// What every pod-set kind keeps, for the wiring tests to look into.
    #[cfg(test)]
    pub(crate) fn parts(&self) -> &PodSetParts {
        &self.parts
    }

    /// The controller over `parts`, which the wiring builds (with the budgets it hands in).
    pub fn new(parts: PodSetParts) -> Self {
        Self {
            parts,
            failed_pod_backoff: CreateBackoff::default(),
            unplaced: Arc::default(),
        }
    }

    /// The nodes waiting for room, for the triggers to requeue on a pod event there.
    pub fn unplaced(&self) -> Arc<UnplacedNodes> {
        self.unplaced.clone()
    }
}

/// The reference Events are attached to.
pub(super) fn reference(ds: &DaemonSet) -> ObjectReference {
    ds.object_ref(&())
}

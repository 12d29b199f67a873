//! The CloneSet controller: the generic pod-set controller over the CloneSet kind, and the
//! error of one sync.

use super::kind::CloneSetKind;
use super::plan::PlanError;
use crate::pod_set::sync::PodSetController;
use crate::workload::set_controller::PodSetSyncError;

/// Why a CloneSet sync failed; it is retried with backoff.
pub type SyncError = PodSetSyncError<PlanError>;

/// The CloneSet controller, shared by its workers.
pub type CloneSetController = PodSetController<CloneSetKind>;

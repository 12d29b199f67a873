//! The DaemonSet controller: the generic pod-set controller over the DaemonSet kind, and
//! the error of one sync.

use super::kind::DaemonSetKind;
use super::plan::DaemonSetPlanError;
use crate::pod_set::sync::PodSetController;
use crate::workload::set_controller::PodSetSyncError;

/// Why a DaemonSet sync failed; it is retried with backoff.
pub type SyncError = PodSetSyncError<DaemonSetPlanError>;

/// The DaemonSet controller, shared by its workers.
pub type DaemonSetController = PodSetController<DaemonSetKind>;

//! The StatefulSet controller: the generic pod-set controller over the StatefulSet kind,
//! and the error of one sync.

use super::kind::StatefulSetKind;
use super::plan::StatefulSetPlanError;
use crate::pod_set::sync::PodSetController;
use crate::workload::set_controller::PodSetSyncError;

/// Why a StatefulSet sync failed; it is retried with backoff.
pub type SyncError = PodSetSyncError<StatefulSetPlanError>;

/// The StatefulSet controller, shared by its workers.
pub type StatefulSetController = PodSetController<StatefulSetKind>;

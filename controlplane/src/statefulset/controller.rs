//! The StatefulSet controller's state, shared by its workers, and the error of one sync.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource as _;
use kube::runtime::reflector::ObjectRef;

use super::plan::StatefulSetPlanError;
use crate::api::StatefulSet;
use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::ApiError;
use crate::controller::create_backoff::CreateBackoff;
use crate::controller::events::EventSink;
use crate::controller::expectations::{EXPECTATION_TIMEOUT, Expectations, Seen};
use crate::controller::pod_conditions::PodConditions;
use crate::workload::execute::ExecuteError;
use crate::workload::history::HistoryError;
use crate::workload::revision::RevisionError;

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

/// The StatefulSet controller's state, shared by its workers.
pub struct StatefulSetController {
    pub(super) client: kube::Client,
    pub(super) stores: Stores,
    pub(super) agents: Arc<dyn PodConditions>,
    pub(super) events: EventSink,
    pub(super) expectations: Expectations<ObjectKey>,
    pub(super) create_backoff: CreateBackoff<ObjectKey>,
}

impl StatefulSetController {
    pub fn new(
        client: kube::Client,
        stores: Stores,
        agents: Arc<dyn PodConditions>,
        events: EventSink,
    ) -> Self {
        Self {
            client,
            stores,
            agents,
            events,
            expectations: Expectations::new(EXPECTATION_TIMEOUT),
            create_backoff: CreateBackoff::default(),
        }
    }

    /// What the cache shows of an object a sync wrote (for expectations).
    pub(super) fn seen(&self, namespace: &str, kind: &str, name: &str) -> Option<Seen> {
        match kind {
            "Pod" => self
                .stores
                .pods
                .get(&ObjectRef::new(name).within(namespace))
                .map(|p| Seen::of(&p.metadata)),
            "PersistentVolumeClaim" => self
                .stores
                .pvcs
                .get(&ObjectRef::new(name).within(namespace))
                .map(|p| Seen::of(&p.metadata)),
            _ => None,
        }
    }
}

/// The reference Events are attached to.
pub(super) fn reference(set: &StatefulSet) -> ObjectReference {
    set.object_ref(&())
}

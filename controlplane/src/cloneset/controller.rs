//! The CloneSet controller's state, shared by its workers, and the error of one sync. Kept
//! apart from `reconcile` so the steps it calls (`execute`, `guards`) depend on this and
//! not on the reconciler that calls them.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource as _;
use kube::runtime::reflector::ObjectRef;

use super::plan::PlanError;
use crate::api::CloneSet;
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
use crate::workload::template_check::TemplateChecks;

/// Why a CloneSet sync failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Revision(#[from] RevisionError),
    #[error(transparent)]
    Execute(#[from] ExecuteError),
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// The CloneSet controller's state, shared by its workers.
pub struct CloneSetController {
    pub(super) client: kube::Client,
    pub(super) stores: Stores,
    pub(super) agents: Arc<dyn PodConditions>,
    pub(super) events: EventSink,
    pub(super) expectations: Expectations<ObjectKey>,
    pub(super) create_backoff: CreateBackoff<ObjectKey>,
    pub(super) template_checks: TemplateChecks<ObjectKey>,
}

impl CloneSetController {
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
            template_checks: TemplateChecks::default(),
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
pub(super) fn reference(cloneset: &CloneSet) -> ObjectReference {
    cloneset.object_ref(&())
}

//! What every pod-set controller (CloneSet, Advanced StatefulSet, Advanced DaemonSet) holds
//! and the writes around its plan that do not depend on the kind: the cache lookup behind
//! expectations, the parts the shared executor writes through, the status write, and the
//! revision history's writer and truncation. A kind keeps only what is its own beside these.

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Resource;
use kube::api::Api;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::budget::{BudgetSource, NamespaceBudgets};
use super::deletion::REVISION_LABEL;
use super::execute::{ExecuteError, Executor, KubeParts, KubePodWrites, NewPods};
use super::history::{History, HistoryError, HistoryWriter};
use super::revision::RevisionError;
use super::template_check::TemplateChecks;
use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::ApiError;
use crate::controller::create_backoff::CreateBackoff;
use crate::controller::events::EventSink;
use crate::controller::expectations::{EXPECTATION_TIMEOUT, Expectations};
use crate::controller::pod_conditions::PodConditions;
use crate::controller::status_patch::write_changed_status;

/// Why a pod-set sync failed (it is retried with backoff); `P` is the kind's plan error,
/// which the kind converts with a `From` of its own.
#[derive(Debug, thiserror::Error)]
pub enum PodSetSyncError<P: std::error::Error + 'static> {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Plan(P),
    #[error(transparent)]
    Revision(#[from] RevisionError),
    #[error(transparent)]
    Execute(#[from] ExecuteError),
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// The writes and budgets a shared executor of one set goes through, held while it runs.
pub struct ExecutorParts<'a> {
    parts: &'a PodSetParts,
    key: &'a ObjectKey,
    generation: i64,
    writes: KubePodWrites<'a>,
    budgets: NamespaceBudgets<'a>,
}

impl<'a> ExecutorParts<'a> {
    /// The executor that builds pods with `new_pods`.
    pub fn executor<'b, N: NewPods>(
        &'b self,
        new_pods: &'b N,
    ) -> Executor<'b, ObjectKey, KubePodWrites<'a>, N, NamespaceBudgets<'a>> {
        Executor {
            key: self.key,
            generation: self.generation,
            writes: &self.writes,
            budgets: &self.budgets,
            new_pods,
            expectations: &self.parts.expectations,
            create_backoff: &self.parts.create_backoff,
        }
    }
}

/// A pod-set controller's state, shared by its workers.
pub struct PodSetParts {
    pub client: kube::Client,
    pub stores: Stores,
    pub agents: Arc<dyn PodConditions>,
    pub events: EventSink,
    pub expectations: Expectations<ObjectKey>,
    pub create_backoff: CreateBackoff<ObjectKey>,
    /// The apiserver's verdict on each set's update revision (`template_check`).
    pub template_checks: TemplateChecks<ObjectKey>,
    /// The disruption budgets, as the wiring hands them in.
    pub budgets: Arc<dyn BudgetSource>,
}

impl PodSetParts {
    pub fn new(
        client: kube::Client,
        stores: Stores,
        agents: Arc<dyn PodConditions>,
        events: EventSink,
        budgets: Arc<dyn BudgetSource>,
    ) -> Self {
        Self {
            client,
            stores,
            agents,
            events,
            budgets,
            expectations: Expectations::new(EXPECTATION_TIMEOUT),
            create_backoff: CreateBackoff::default(),
            template_checks: TemplateChecks::default(),
        }
    }

    /// Forgets what was kept about a set that is gone.
    pub fn forget(&self, key: &ObjectKey) {
        self.create_backoff.forget(key);
        self.template_checks.forget(key);
    }

    /// The disruption budgets that admit a disruption of a pod of the set in `namespace`.
    pub fn budgets<'a>(&'a self, namespace: &'a str) -> NamespaceBudgets<'a> {
        NamespaceBudgets {
            source: self.budgets.as_ref(),
            namespace,
        }
    }

    /// What the shared executor's pod writes go through.
    pub fn kube_parts(&self) -> KubeParts<'_> {
        KubeParts {
            client: &self.client,
            claims: &self.stores.pvcs,
            nodes: &self.stores.nodes,
            agents: &self.agents,
            events: &self.events,
        }
    }

    /// What the shared executor of the set `key` at `generation` writes through
    /// (`object` in its events).
    pub fn executor_parts<'a>(
        &'a self,
        key: &'a ObjectKey,
        object: &'a ObjectReference,
        generation: Option<i64>,
    ) -> ExecutorParts<'a> {
        ExecutorParts {
            parts: self,
            key,
            generation: generation.unwrap_or(0),
            writes: KubePodWrites::new(self.kube_parts(), &key.namespace, object),
            budgets: self.budgets(&key.namespace),
        }
    }

    /// The writer of the revisions of the set `owner_name` of kind `K` in `namespace`.
    pub fn history_writer<'a, K>(
        &self,
        namespace: &str,
        owner_name: &'a str,
    ) -> HistoryWriter<'a, K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        HistoryWriter {
            revisions: Api::namespaced(self.client.clone(), namespace),
            owner: Api::namespaced(self.client.clone(), namespace),
            owner_name,
        }
    }

    /// Writes the set's status when it changed from `old`, as a merge patch that spells out
    /// as null what `new` leaves out.
    pub async fn write_status<K, S>(
        &self,
        key: &ObjectKey,
        old: Option<&S>,
        new: &S,
    ) -> Result<(), ApiError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
        S: Serialize + PartialEq,
    {
        let api: Api<K> = Api::namespaced(self.client.clone(), &key.namespace);
        write_changed_status(&api, &key.name, old, new).await?;
        Ok(())
    }

    /// Deletes the revisions of the set `owner_name` beyond `limit` that none of `pods`
    /// uses.
    pub async fn truncate_history<K>(
        &self,
        key: &ObjectKey,
        owner_name: &str,
        history: &History,
        pods: &[Arc<Pod>],
        limit: i32,
    ) -> Result<(), ApiError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        let pod_labels: Vec<Option<&str>> = (pods.iter())
            .map(|p| {
                (p.metadata.labels.as_ref())
                    .and_then(|l| l.get(REVISION_LABEL))
                    .map(String::as_str)
            })
            .collect();
        (self.history_writer::<K>(&key.namespace, owner_name))
            .truncate(history, &pod_labels, limit)
            .await
    }
}

//! What a pod-set kind (CloneSet, Advanced StatefulSet, Advanced DaemonSet) hands the one
//! generic sync (`pod_set::sync`): its API type, its adapter, its pure plan and status, and
//! hooks for only what is truly its own. Everything else — the selector guard, the claim,
//! the history, the update guard, the executor, the status write, the pre-download, the
//! history truncation and the requeue — is the sync's, the same for every kind.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::runtime::reflector::Store;

use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::ApiError;
use crate::predownload::workload::PreDownloadRollout;
use crate::workload::actions::Plan;
use crate::workload::history::History;
use crate::workload::revision_spec::RevisionSpec;
use crate::workload::selector_guard::GuardedSet;
use crate::workload::set_controller::{PodSetParts, PodSetSyncError};

/// Which claims a sync reads beside the pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimScope {
    /// None: the kind makes no claims.
    None,
    /// The claims the set controls (CloneSet).
    Controlled,
    /// Every claim of the namespace; the plan finds the set's by name (StatefulSet, whose
    /// claims carry no controller reference, as the native controller's do not).
    Namespace,
}

/// What one sync read: the pods the set controls (after adoption and release), the claims
/// in its scope, its revision history and what each revision records.
pub struct Owned<R> {
    pub pods: Vec<Arc<Pod>>,
    pub claims: Vec<Arc<PersistentVolumeClaim>>,
    pub history: History,
    /// Revision name → what it records, as the adapter reads it.
    pub revisions: BTreeMap<String, R>,
}

impl<R> Owned<R> {
    pub fn pods(&self) -> Vec<&Pod> {
        self.pods.iter().map(AsRef::as_ref).collect()
    }

    pub fn claims(&self) -> Vec<&PersistentVolumeClaim> {
        self.claims.iter().map(AsRef::as_ref).collect()
    }
}

/// One sync of one set, as the kind's hooks see it.
pub struct SyncScope<'a, K: PodSetKind> {
    pub parts: &'a PodSetParts,
    pub key: &'a ObjectKey,
    pub set: &'a K::Set,
    /// The set, for events.
    pub object: ObjectReference,
    pub owned: Owned<K::Revision>,
    pub now: Timestamp,
}

/// The part of a kind's sync problems the shared steps fill in: what failed to create
/// (the create condition's message) and what failed or was refused to update.
pub trait SharedProblems {
    fn create_and_update(&mut self) -> (&mut Option<String>, &mut Option<String>);
}

/// The status a kind's pure status function computed, and when to look again for it (a
/// pod turning available after minReadySeconds, a progress deadline).
pub struct KindStatus<S> {
    pub status: S,
    pub requeue: Option<Duration>,
}

/// The error of a kind's sync.
pub type KindSyncError<K> = PodSetSyncError<<K as PodSetKind>::PlanError>;

/// A pod-set kind as the generic sync runs it.
pub trait PodSetKind: Sized + Send + Sync + 'static {
    /// The API type.
    type Set: GuardedSet<Status: Send + Sync> + Resource<DynamicType = ()> + Send + Sync + 'static;
    /// What one revision records, as the adapter reads it (the whole `RevisionSpec`, or
    /// only its template).
    type Revision: From<RevisionSpec> + Send + Sync + 'static;
    /// The adapter the shared planning, the executor's pods and the pre-download read.
    type Workload<'a>: PreDownloadRollout<Revision = Self::Revision> + Clone + Send + Sync + 'a
    where
        Self: 'a;
    /// The kind's plan: the shared `Plan` and what is the kind's own beside it.
    type Planned: Send + Sync;
    type PlanError: std::error::Error + Send + Sync + 'static;
    /// What the sync ran into, for the kind's conditions.
    type Problems: SharedProblems + Send + Sync;

    /// The kind's name, which is also the name of its cache.
    const KIND: &'static str;
    /// The condition a refused or failed update sets (FailedUpdate, FailedUpdatePod).
    const UPDATE_CONDITION: &'static str;
    const CLAIMS: ClaimScope;
    /// The kinds of the shared caches the sync reads (`Reconciler::READS`): the kind, its
    /// pods, the nodes, revisions and claims (when it makes any), and the budgets the
    /// executor's disruptions are admitted by.
    const READS: &'static [&'static str] = match Self::CLAIMS {
        ClaimScope::None => &[
            Self::KIND,
            "Pod",
            "Node",
            "ControllerRevision",
            "PodUnavailableBudget",
            "PodDisruptionBudget",
        ],
        ClaimScope::Controlled | ClaimScope::Namespace => &[
            Self::KIND,
            "Pod",
            "Node",
            "ControllerRevision",
            "PersistentVolumeClaim",
            "PodUnavailableBudget",
            "PodDisruptionBudget",
        ],
    };

    /// The kind's store.
    fn objects(stores: &Stores) -> &Store<Self::Set>;

    /// The adapter of `set` for claims, revisions, new pods and the update guard.
    fn workload<'a>(&'a self, set: &'a Self::Set) -> Cow<'a, Self::Workload<'a>>;

    /// What a revision of `set`'s current spec records: by default the pod template alone
    /// (OpenKruise's `getPatch` of Advanced StatefulSet and DaemonSet).
    fn revision_spec(set: &Self::Set) -> RevisionSpec {
        RevisionSpec::template_only(set.template().clone())
    }

    /// `status.currentRevision` as the kind keeps it ("" when it keeps none), and
    /// `status.collisionCount`.
    fn recorded_revisions(set: &Self::Set) -> (String, i32);

    /// `spec.revisionHistoryLimit`.
    fn history_limit(set: &Self::Set) -> i32;

    /// The kind's pure plan over what the sync read.
    fn plan(&self, scope: &SyncScope<'_, Self>) -> Result<Self::Planned, Self::PlanError>;

    /// Whether a plan error holds the set (its create condition and a Warning event, no
    /// retry: only a spec change fixes it) rather than failing the sync with backoff.
    fn plan_error_holds_set(_err: &Self::PlanError) -> bool {
        false
    }

    fn shared_plan(planned: &Self::Planned) -> &Plan;
    fn shared_plan_mut(planned: &mut Self::Planned) -> &mut Plan;

    /// The problems the plan found, before the shared steps add theirs.
    fn problems(planned: &Self::Planned) -> Self::Problems;

    /// The pod of the update revision the update guard dry-runs; `None` when it cannot be
    /// built.
    fn update_revision_pod(&self, scope: &SyncScope<'_, Self>) -> Option<Pod>;

    /// An instance id for a create the plan left unnamed (CloneSet); kinds that name every
    /// pod they create are never asked.
    fn fresh_instance_id(_planned: &Self::Planned, _taken: &BTreeSet<String>) -> String {
        String::new()
    }

    /// The kind's last touch on a pod built by the adapter (DaemonSet: a name of its own).
    fn finish_new_pod(_set: &Self::Set, _pod: &mut Pod) {}

    /// The kind's own writes before the executor; a failure ends the sync before any pod
    /// is touched (StatefulSet: claim owner references, DaemonSet: failed-pod backoff).
    fn before_execute<'a>(
        &'a self,
        _scope: &'a SyncScope<'a, Self>,
        _planned: &'a Self::Planned,
    ) -> impl Future<Output = Result<(), ApiError>> + Send + 'a {
        async { Ok(()) }
    }

    /// Claims no pod uses that the plan deletes once the executor ran (CloneSet's
    /// `disablePVCReuse`).
    fn unused_claims(_planned: &Self::Planned) -> &[String] {
        &[]
    }

    /// The kind's own writes after the executor (CloneSet: the podsToDelete clean-up); a
    /// failure is returned after the status is written.
    fn after_execute<'a>(
        &'a self,
        _scope: &'a SyncScope<'a, Self>,
        _planned: &'a Self::Planned,
    ) -> impl Future<Output = Result<(), KindSyncError<Self>>> + Send + 'a {
        async { Ok(()) }
    }

    /// The kind's pure status.
    fn status(
        &self,
        scope: &SyncScope<'_, Self>,
        planned: &Self::Planned,
        problems: &Self::Problems,
    ) -> KindStatus<<Self::Set as GuardedSet>::Status>;

    /// The kind's events once its status is written (CloneSet's progress, StatefulSet's
    /// stuck pod, DaemonSet's unplaced nodes).
    fn after_status<'a>(
        &'a self,
        _scope: &'a SyncScope<'a, Self>,
        _planned: &'a Self::Planned,
        _problems: &'a Self::Problems,
        _status: &'a <Self::Set as GuardedSet>::Status,
    ) -> impl Future<Output = ()> + Send + 'a {
        async {}
    }

    /// The adapter the pre-download reads, once the status is known (DaemonSet: the desired
    /// nodes and the pods held back).
    fn rollout_workload<'a>(
        &'a self,
        set: &'a Self::Set,
        _planned: &Self::Planned,
        _status: &<Self::Set as GuardedSet>::Status,
    ) -> Cow<'a, Self::Workload<'a>> {
        self.workload(set)
    }

    /// How many updated pods are ready (for the pre-download's minUpdatedReadyPods).
    fn updated_ready(
        scope: &SyncScope<'_, Self>,
        planned: &Self::Planned,
        status: &<Self::Set as GuardedSet>::Status,
    ) -> i32;

    /// When to look again for a reason of the kind's own (StatefulSet: a halt, DaemonSet: a
    /// failed pod's backoff).
    fn requeue(_planned: &Self::Planned, _problems: &Self::Problems) -> Option<Duration> {
        None
    }

    /// Forgets the kind's own state about a set that is gone.
    fn forget(&self, _parts: &PodSetParts, _key: &ObjectKey) {}
}

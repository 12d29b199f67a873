//! The one sync of every pod-set kind (CloneSet, Advanced StatefulSet, Advanced
//! DaemonSet), over the kind's `PodSetKind`: in one place and with one behaviour, the
//! selector guard, the claim, the history, the kind's pure plan, the update guard, the
//! shared executor, the status write, the pre-download, the history truncation and the
//! requeue. The runner's shared preamble (`controller::object`) has already found the set
//! in the cache and waited out the writes of earlier syncs.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::Store;
use kube::{Resource as _, ResourceExt as _};

use super::kind::{KindStatus, KindSyncError, PodSetKind, SharedProblems, SyncScope};
use super::pods::SetPods;
use super::read::read_owned;
use crate::controller::ObjectKey;
use crate::controller::conditions::set_problem;
use crate::controller::expectations::Expectations;
use crate::controller::object::ObjectReconciler;
use crate::controller::runner::Outcome;
use crate::predownload::workload as predownload;
use crate::runtime::stores::SyncState;
use crate::workload::execute::Problems;
use crate::workload::selector_guard::{GuardedSet, RefusableStatus, refuse_unselected_template};
use crate::workload::set_controller::{PodSetParts, PodSetSyncError};
use crate::workload::update_guard;

/// A refused update is looked at again this soon, without backoff growing: nothing is
/// wrong with the set itself.
pub const PROBLEM_RECHECK: Duration = Duration::from_secs(15);

/// A pod-set controller: the parts every kind holds and the kind's own state.
pub struct PodSetController<K> {
    pub(crate) parts: PodSetParts,
    pub(crate) kind: K,
}

impl<K: PodSetKind> PodSetController<K> {
    /// The controller of `kind` over `parts`, which the wiring builds (with the budgets it
    /// hands in).
    pub fn with_kind(parts: PodSetParts, kind: K) -> Self {
        Self { parts, kind }
    }

    /// What every pod-set kind keeps, for the wiring tests to look into.
    #[cfg(test)]
    pub(crate) fn parts(&self) -> &PodSetParts {
        &self.parts
    }
}

impl<K: PodSetKind + Default> PodSetController<K> {
    /// The controller over `parts`, which the wiring builds (with the budgets it hands in).
    pub fn new(parts: PodSetParts) -> Self {
        Self::with_kind(parts, K::default())
    }
}

impl<K: PodSetKind> ObjectReconciler for PodSetController<K> {
    type Object = K::Set;
    type Error = KindSyncError<K>;
    const KIND: &'static str = K::KIND;
    const READS: &'static [&'static str] = K::READS;
    const EXPECTATIONS_RECHECK: Duration = Duration::from_secs(5);

    fn objects(&self) -> &Store<K::Set> {
        K::objects(&self.parts.stores)
    }

    fn expectations(&self) -> &Expectations<ObjectKey> {
        &self.parts.expectations
    }

    fn caches(&self) -> &SyncState {
        &self.parts.stores.sync
    }

    /// What every pod-set kind keeps per set (create backoff, the template's verdict),
    /// then the kind's own.
    fn forget(&self, key: &ObjectKey) {
        self.parts.forget(key);
        self.kind.forget(&self.parts, key);
    }

    /// Garbage collection removes the pods, claims and revisions a deleted set owns.
    fn needs_no_sync(&self, set: &K::Set) -> bool {
        set.meta().deletion_timestamp.is_some()
    }

    async fn sync(&self, key: &ObjectKey, set: Arc<K::Set>) -> Result<Outcome, Self::Error> {
        sync(self, key, &set).await
    }
}

async fn sync<K: PodSetKind>(
    ctl: &PodSetController<K>,
    key: &ObjectKey,
    set: &K::Set,
) -> Result<Outcome, KindSyncError<K>> {
    let (kind, parts) = (&ctl.kind, &ctl.parts);
    // Before any claim or create: a selector that misses the template would release every
    // pod, and create pods it cannot own without end.
    let object = set.object_ref(&());
    if let Some(refused) = refuse_unselected_template(parts, key, &object, set).await? {
        return Ok(refused);
    }
    let Some(owned) = read_owned(kind, parts, key, set).await? else {
        return Ok(Outcome::RequeueAfter(Duration::ZERO));
    };
    let scope = SyncScope {
        parts,
        key,
        set,
        object,
        owned,
        now: Timestamp::now(),
    };
    let mut planned = match kind.plan(&scope) {
        Ok(planned) => planned,
        Err(err) if K::plan_error_holds_set(&err) => {
            return hold_set(&scope, &err.to_string()).await;
        }
        Err(err) => return Err(PodSetSyncError::Plan(err)),
    };
    let mut problems = K::problems(&planned);
    if let Some(held) = hold_refused_update(kind, &scope, &mut planned).await {
        *problems.create_and_update().1 = Some(held);
    }
    kind.before_execute(&scope, &planned).await?;
    let executed = execute(kind, &scope, &planned, &mut problems).await;
    let KindStatus { status, requeue } = kind.status(&scope, &planned, &problems);
    parts
        .write_status::<K::Set, _>(key, set.status(), &status)
        .await?;
    kind.after_status(&scope, &planned, &problems, &status)
        .await;
    pre_download(kind, &scope, &planned, &status).await;
    let limit = K::history_limit(set);
    let owned = &scope.owned;
    (parts)
        .truncate_history::<K::Set>(key, &set.name_any(), &owned.history, &owned.pods, limit)
        .await?;
    let refused = problems.create_and_update().1.is_some();
    let requeues = [
        executed?,
        K::shared_plan(&planned).requeue_after,
        requeue,
        refused.then_some(PROBLEM_RECHECK),
        K::requeue(&planned, &problems),
    ];
    Ok(soonest(requeues))
}

/// The soonest of the requeues asked for; done when none is.
pub fn soonest(requeues: impl IntoIterator<Item = Option<Duration>>) -> Outcome {
    (requeues.into_iter().flatten()).fold(Outcome::Done, |outcome, after| {
        outcome.min(Outcome::RequeueAfter(after))
    })
}

/// Before a rollout disrupts its first pod: if the apiserver refuses (or could not be
/// asked about) the update revision's pod, every update disruption of the plan is held;
/// the message says why.
async fn hold_refused_update<K: PodSetKind>(
    kind: &K,
    scope: &SyncScope<'_, K>,
    planned: &mut K::Planned,
) -> Option<String> {
    let revision = &scope.owned.history.update_revision;
    let pod = || kind.update_revision_pod(scope);
    let plan = K::shared_plan_mut(planned);
    let (parts, key, object) = (scope.parts, scope.key, &scope.object);
    update_guard::hold_refused_update(parts, key, object, K::UPDATE_CONDITION, revision, pod, plan)
        .await
}

/// Runs the plan through the shared executor, then the kind's own writes after it; the
/// problems for the status conditions are filled in. The executor is seeded with what the
/// sync found before (the update guard's refusal), so it alone decides which message a
/// problem keeps: a held disruption adds to a problem already there, a failed write
/// replaces it. `Ok(Some(wait))`: creates failed or
/// are backing off, or a budget held a disruption.
async fn execute<K: PodSetKind>(
    kind: &K,
    scope: &SyncScope<'_, K>,
    planned: &K::Planned,
    problems: &mut K::Problems,
) -> Result<Option<Duration>, KindSyncError<K>> {
    let workload = kind.workload(scope.set);
    let new_pods = SetPods::<K> {
        set: scope.set,
        workload: &*workload,
        revisions: &scope.owned.revisions,
        planned,
    };
    let (create, update) = problems.create_and_update();
    let mut shared = Problems {
        scale: create.take(),
        update: update.take(),
    };
    let generation = scope.set.meta().generation;
    let parts = (scope.parts).executor_parts(scope.key, &scope.object, generation);
    let plan = K::shared_plan(planned);
    let executor = parts.executor(&new_pods);
    let executed = executor.execute(plan, &mut shared).await;
    let after = kind.after_execute(scope, planned).await;
    let unused_claims = executor
        .delete_unused_claims(K::unused_claims(planned))
        .await;
    let (create, update) = problems.create_and_update();
    (*create, *update) = (shared.scale, shared.update);
    after?;
    unused_claims?;
    Ok(executed?)
}

/// Pre-pulls the update revision's new images ahead of an in-place rollout
/// (`predownload::workload`, which decides whether this rollout pre-pulls).
async fn pre_download<K: PodSetKind>(
    kind: &K,
    scope: &SyncScope<'_, K>,
    planned: &K::Planned,
    status: &<K::Set as GuardedSet>::Status,
) {
    let workload = kind.rollout_workload(scope.set, planned, status);
    let updated_ready = K::updated_ready(scope, planned, status);
    let (owned, namespace) = (&scope.owned, &scope.key.namespace);
    let (history, revisions) = (&owned.history, &owned.revisions);
    let object = &scope.object;
    predownload::sync(
        scope.parts,
        namespace,
        &*workload,
        object,
        history,
        revisions,
        updated_ready,
    )
    .await;
}

/// Holds the set on a plan error only a spec change fixes: no create or delete, the
/// kind's create condition saying why and a Warning event.
async fn hold_set<K: PodSetKind>(
    scope: &SyncScope<'_, K>,
    message: &str,
) -> Result<Outcome, KindSyncError<K>> {
    let condition = <K::Set as GuardedSet>::CREATE_CONDITION;
    let old = scope.set.status();
    let mut status = old.cloned().unwrap_or_default();
    set_problem(status.conditions_mut(), condition, Some(message), scope.now);
    (scope.parts)
        .write_status::<K::Set, _>(scope.key, old, &status)
        .await?;
    (scope.parts.events)
        .warning(&scope.object, condition, "Create", message.to_owned())
        .await;
    Ok(Outcome::Done)
}

#[cfg(test)]
#[path = "sync_tests.rs"]
mod tests;

//! Carries out a pod-set plan for any workload kind: creates in slow-start batches (with
//! the workload's create backoff), deletes with UID preconditions (`deletes.rs`), pod changes as agent
//! conditions then one patch, claim deletes, and the claims a live pod lost made again.
//! Every write is recorded as an expectation before the next sync may plan again. Every
//! disruption (a delete, the start of an in-place update) is first admitted by the
//! disruption budgets (`disruption.rs`). All I/O goes through `PodWrites` and
//! `DisruptionBudgets`, so the rules here are unit-tested against recording doubles
//! (`tests.rs`).

mod changes;
mod claim_resizes;
mod deletes;
mod disruption;

pub use self::disruption::DISRUPTION_HELD;
#[cfg(test)]
mod budget_tests;
pub mod kube_writes;
#[cfg(test)]
pub(crate) mod recording;
#[cfg(test)]
mod restart_tests;
#[cfg(test)]
mod selector_tests;
#[cfg(test)]
mod tests;
pub mod writes;

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hash;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use tokio::time::Instant;

pub use self::kube_writes::{KubeParts, KubePodWrites};
pub use self::writes::{ConditionWriteError, NewPod, NewPods, PodWrites, WorkloadEvent};
use crate::controller::api_error::{ApiError, api_error};
use crate::controller::create_backoff::CreateBackoff;
use crate::controller::expectations::{Expectation, Expectations};
use crate::workload::actions::{Create, Plan};
use crate::workload::budget::DisruptionBudgets;
use crate::workload::selector::{SELECTOR_MISMATCH, selector_selects_created_pod};

/// Why the creates of one sync stopped: the message for the Warning event and the
/// workload's create-failure condition.
enum CreatesStopped {
    /// A create failed (how many were created and skipped is in the message).
    Failed(String),
    /// A pod about to be created is not selected by the workload's selector; nothing of
    /// its batch was created.
    Unselected(String),
}

pub use crate::workload::plan::MAX_CREATES_PER_SYNC;

/// The reason of the Warning event when InPlaceOnly refuses a template change.
pub const IN_PLACE_ONLY_REFUSED: &str = "InPlaceOnlyRefused";

/// What the sync ran into, for the workload's FailedScale / FailedUpdate conditions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problems {
    /// Creating pods failed (or is backing off): the error.
    pub scale: Option<String>,
    /// Updating pods failed or was refused (InPlaceOnly, an unreachable agent).
    pub update: Option<String>,
}

/// Why carrying out a plan failed; the sync is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("creating pods: {0}")]
    Create(String),
}

/// Pod changes written at once: enough that a wave of in-place updates (10% of 500 nodes)
/// takes a few round trips, few enough not to flood the apiserver or one node's agent.
pub const CONCURRENT_POD_WRITES: usize = 16;

/// How soon a sync whose disruption a budget held looks again (budgets also free up
/// without any event on the workload: a pod of another workload became ready).
pub const BUDGET_RETRY: Duration = Duration::from_secs(5);

/// What names the workload object an executor works for: its key in the expectations and
/// the create backoff, shared by the executor's workers.
pub trait WorkloadKey: Clone + Eq + Hash + Send + Sync {}

impl<T: Clone + Eq + Hash + Send + Sync> WorkloadKey for T {}

/// Carries out plans of the workload object `key` (at `generation`, for the create
/// backoff) through `writes`, building pods with `new_pods`, disrupting pods only as
/// `budgets` admit.
pub struct Executor<'a, K, W, N, B> {
    pub key: &'a K,
    pub generation: i64,
    pub writes: &'a W,
    pub new_pods: &'a N,
    pub budgets: &'a B,
    pub expectations: &'a Expectations<K>,
    pub create_backoff: &'a CreateBackoff<K>,
}

impl<K: WorkloadKey, W: PodWrites, N: NewPods, B: DisruptionBudgets> Executor<'_, K, W, N, B> {
    /// Runs the plan; the first hard error is returned after the rest that can still run
    /// has run, and `problems` is filled in for the status conditions. `Ok(Some(wait))`:
    /// creates failed or are backing off, or a budget held a disruption: come back after
    /// `wait`.
    pub async fn execute(
        &self,
        plan: &Plan,
        problems: &mut Problems,
    ) -> Result<Option<Duration>, ExecuteError> {
        let mut first_error = None;
        let mut retry = if plan.creates.is_empty() {
            None
        } else {
            self.create_with_backoff(plan, problems).await
        };
        if let Err(err) = self.create_missing_claims(&plan.missing_claims).await {
            first_error.get_or_insert(err);
        }
        let (mut held, delete_error) = self.delete_pods(&plan.deletes, problems).await;
        if let Some(err) = delete_error {
            first_error.get_or_insert(err);
        }
        if let Err(err) = self.resize_claims(plan, problems).await {
            first_error.get_or_insert(err);
        }
        let (changes_held, changes_error) = self.apply_changes(&plan.pod_changes, problems).await;
        held |= changes_held;
        if let Some(err) = changes_error {
            first_error.get_or_insert(err);
        }
        if held {
            retry = Some(retry.map_or(BUDGET_RETRY, |wait| wait.min(BUDGET_RETRY)));
        }
        if let Some(refusal) = &plan.refusal {
            problems.update = Some(refusal.clone());
            let event = WorkloadEvent::warning(IN_PLACE_ONLY_REFUSED, "Update", refusal.clone());
            self.writes.publish(event).await;
        }
        first_error.map_or(Ok(retry), Err)
    }

    /// Creates unless the workload is backing off from failed creates (see
    /// `controller::create_backoff`); a failure is reported once per attempt, with the
    /// apiserver's message, and not returned as an error so the queue adds no retries. A
    /// pod the selector would not select stops the creates the same way (a new generation
    /// of the workload, perhaps the fix, checks again at once).
    async fn create_with_backoff(&self, plan: &Plan, problems: &mut Problems) -> Option<Duration> {
        let backoff = self.create_backoff;
        let now = Instant::now();
        if let Some(waiting) = backoff.waiting(self.key, self.generation, now) {
            tracing::debug!(remaining = ?waiting.remaining, "creates back off after a failure");
            problems.scale = Some(waiting.message);
            return Some(waiting.remaining);
        }
        let (reason, message) = match self.create_slow_start(plan).await {
            Ok(()) => {
                backoff.succeeded(self.key);
                return None;
            }
            Err(CreatesStopped::Failed(message)) => ("FailedCreate", message),
            Err(CreatesStopped::Unselected(message)) => {
                tracing::warn!(%message, "a pod to create is not selected; nothing more is created");
                (SELECTOR_MISMATCH, message)
            }
        };
        let wait = backoff.failed(self.key, self.generation, message.clone(), now);
        let event = WorkloadEvent::warning(reason, "Create", message.clone());
        self.writes.publish(event).await;
        problems.scale = Some(message);
        Some(wait)
    }

    /// Kubernetes' `slowStartBatch`: 1, 2, 4, ... pods at once, stopping at the first
    /// batch with a failure, so a template that cannot be created costs a few calls, not
    /// hundreds. Each batch's pods are built and checked against the selector before any of
    /// them is created: a pod the workload could not claim is never created.
    async fn create_slow_start(&self, plan: &Plan) -> Result<(), CreatesStopped> {
        let creates = self.with_instance_ids(plan);
        let selector = self.new_pods.selector();
        let no_labels = BTreeMap::new();
        let mut batch = 1;
        let mut done = 0;
        let mut created = 0;
        while done < creates.len() {
            let end = (done + batch).min(creates.len());
            let pods: Vec<Option<NewPod>> = creates[done..end]
                .iter()
                .map(|c| self.new_pods.new_pod(c))
                .collect();
            if let Some(unselected) = pods.iter().flatten().find_map(|new| {
                let meta = &new.pod.metadata;
                let name = meta.name.as_deref().unwrap_or_default();
                let labels = meta.labels.as_ref().unwrap_or(&no_labels);
                selector_selects_created_pod(selector, name, labels).err()
            }) {
                return Err(CreatesStopped::Unselected(if created == 0 {
                    unselected.to_string()
                } else {
                    format!("{unselected} ({created} created before it)")
                }));
            }
            let batch_creates = creates[done..end].iter().zip(&pods);
            let results =
                join_all(batch_creates.map(|(c, p)| self.create_one(c, p.as_ref()))).await;
            let (names, failures): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
            let failures: Vec<ExecuteError> =
                failures.into_iter().filter_map(Result::err).collect();
            created += names.len();
            // One event per pod, as OpenKruise's controllers record them, published as the
            // batch lands: the events' times then show when each pod was created.
            for name in names.into_iter().filter_map(Result::ok) {
                let note = format!("succeed to create pod {name}");
                let event =
                    WorkloadEvent::normal("SuccessfulCreate", "Create", note).about_pod(&name);
                self.writes.publish(event).await;
            }
            if let Some(err) = failures.into_iter().next() {
                let skipped = creates.len() - end;
                let stopped = ExecuteError::Create(format!(
                    "{err} ({created} created, {skipped} skipped by slow start)"
                ));
                return Err(CreatesStopped::Failed(stopped.to_string()));
            }
            done = end;
            batch *= 2;
        }
        Ok(())
    }

    /// The plan's creates (at most [`MAX_CREATES_PER_SYNC`]), each with an instance id:
    /// the planned one, or a fresh one no other create of the batch has (the workload's
    /// `NewPods` knows the ids its pods and claims hold).
    fn with_instance_ids(&self, plan: &Plan) -> Vec<Create> {
        let mut taken = BTreeSet::new();
        plan.creates
            .iter()
            .take(MAX_CREATES_PER_SYNC)
            .map(|create| {
                let mut create = create.clone();
                if create.instance_id.is_empty() {
                    create.instance_id = self.new_pods.fresh_instance_id(&taken);
                }
                taken.insert(create.instance_id.clone());
                create
            })
            .collect()
    }

    /// Creates the pod's claims (a claim already in the cache is reused), then the pod;
    /// `new` is what the workload built for `create` (`None`: its revision is not known).
    /// Returns the created pod's name.
    async fn create_one(
        &self,
        create: &Create,
        new: Option<&NewPod>,
    ) -> Result<String, ExecuteError> {
        let Some(new) = new else {
            return Err(ExecuteError::Create(format!(
                "revision {} is not known",
                create.revision
            )));
        };
        self.create_claims(&new.claims).await?;
        let name = new.pod.metadata.name.clone().unwrap_or_default();
        self.writes
            .create_pod(&new.pod)
            .await
            .map_err(api_error(format!("creating pod {name}")))?;
        self.expect(Expectation::Create {
            kind: "Pod",
            name: name.clone(),
        });
        Ok(name)
    }

    /// Creates the claims the cache does not show (one already there is reused; one
    /// created meanwhile is taken as made); returns the names it created.
    async fn create_claims(
        &self,
        claims: &[PersistentVolumeClaim],
    ) -> Result<Vec<String>, ExecuteError> {
        let mut created = Vec::new();
        for claim in claims {
            let name = claim.metadata.name.clone().unwrap_or_default();
            if self.writes.cached_claim_uid(&name).is_some() {
                continue; // reused
            }
            match self.writes.create_claim(claim).await {
                Ok(()) => {
                    self.expect(Expectation::Create {
                        kind: "PersistentVolumeClaim",
                        name: name.clone(),
                    });
                    created.push(name);
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(err) => return Err(api_error(format!("creating claim {name}"))(err).into()),
            }
        }
        Ok(created)
    }

    /// Makes again the claims of live pods that lost them, as the workload builds them for
    /// each create (the pods themselves stay); each claim made is a Normal event about its
    /// pod. Every create is tried; the first failure is returned.
    async fn create_missing_claims(&self, creates: &[Create]) -> Result<(), ExecuteError> {
        let mut first_error = None;
        for create in creates {
            let Some(new) = self.new_pods.new_pod(create) else {
                continue; // its revision is gone: the next sync plans from the new history
            };
            let pod = new.pod.metadata.name.clone().unwrap_or_default();
            match self.create_claims(&new.claims).await {
                Ok(created) => {
                    for claim in created {
                        let note = format!("created claim {claim} again for pod {pod}");
                        let event = WorkloadEvent::normal("SuccessfulCreate", "Create", note)
                            .about_pod(&pod);
                        self.writes.publish(event).await;
                    }
                }
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Deletes the claims named that no pod uses (a kind's own decision, such as CloneSet's
    /// `disablePVCReuse`), each if the cache still shows it; the first error is returned
    /// after the rest were tried.
    pub async fn delete_unused_claims(&self, names: &[String]) -> Result<(), ExecuteError> {
        let mut first_error = None;
        for name in names {
            if let Err(err) = self.delete_claim(name, None).await {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Deletes the claim the cache shows under `name`, if it still has that UID.
    async fn delete_claim(&self, name: &str, why: Option<&str>) -> Result<(), ExecuteError> {
        let Some(uid) = self.writes.cached_claim_uid(name) else {
            return Ok(());
        };
        match self.writes.delete_claim(name, &uid).await {
            Ok(()) => {}
            Err(err) if is_not_found(&err) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
            Err(err) => return Err(api_error(format!("deleting claim {name}"))(err).into()),
        }
        self.expect(Expectation::Delete {
            kind: "PersistentVolumeClaim",
            name: name.to_owned(),
            uid,
        });
        tracing::info!(
            claim = name,
            why = why.unwrap_or("no pod uses it"),
            "deleted claim"
        );
        Ok(())
    }

    fn expect(&self, write: Expectation) {
        self.expectations.expect(self.key, write);
    }
}

pub(crate) fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}

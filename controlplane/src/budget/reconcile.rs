//! The PodUnavailableBudget status controller, the disruption controller of seed 003 for
//! PUBs: reads the protected pods from the shared cache, computes the status
//! (`arithmetic::compute`), and writes it with the resourceVersion it was computed from,
//! so a disruption admitted meanwhile (`admission`) is never overwritten: a conflict
//! looks again once the cache shows the newer budget.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Resource as _;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::Store;

use super::arithmetic::{Amount, BudgetPod, Observed, compute};
use super::target::{protected, selects};
use crate::api::PodUnavailableBudget;
use crate::api::podunavailablebudget::PodUnavailableBudgetStatus;
use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::{ApiError, api_error, status_code};
use crate::controller::events::EventSink;
use crate::controller::expectations::{EXPECTATION_TIMEOUT, Expectations};
use crate::controller::object::ObjectReconciler;
use crate::controller::runner::Outcome;
use crate::runtime::stores::SyncState;

/// How soon to look again after a status write lost a race with an admission.
const CONFLICT_RETRY: Duration = Duration::from_secs(1);

/// Why a budget sync failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// The PodUnavailableBudget controller's state, shared by its workers.
pub struct BudgetController {
    client: kube::Client,
    stores: Stores,
    events: EventSink,
    expectations: Expectations<ObjectKey>,
}

impl BudgetController {
    pub fn new(client: kube::Client, stores: Stores, events: EventSink) -> Self {
        Self {
            client,
            stores,
            events,
            expectations: Expectations::new(EXPECTATION_TIMEOUT),
        }
    }
}

/// The amount the spec states; `None` for a spec with neither (admission refuses it).
pub fn amount(budget: &PodUnavailableBudget) -> Option<Amount> {
    let spec = &budget.spec;
    match (&spec.max_unavailable, &spec.min_available) {
        (Some(max), _) => Some(Amount::MaxUnavailable(max.clone())),
        (None, Some(min)) => Some(Amount::MinAvailable(min.clone())),
        (None, None) => None,
    }
}

fn times(entries: &BTreeMap<String, Time>) -> BTreeMap<String, Timestamp> {
    entries.iter().map(|(k, v)| (k.clone(), v.0)).collect()
}

fn to_times(entries: BTreeMap<String, Timestamp>) -> BTreeMap<String, Time> {
    entries.into_iter().map(|(k, v)| (k, Time(v))).collect()
}

impl ObjectReconciler for BudgetController {
    type Object = PodUnavailableBudget;
    type Error = SyncError;
    const KIND: &'static str = "PodUnavailableBudget";
    const READS: &'static [&'static str] =
        &["PodUnavailableBudget", "Pod", "CloneSet", "StatefulSet"];
    const EXPECTATIONS_RECHECK: Duration = Duration::from_secs(1);

    fn objects(&self) -> &Store<PodUnavailableBudget> {
        &self.stores.podunavailablebudgets
    }

    fn expectations(&self) -> &Expectations<ObjectKey> {
        &self.expectations
    }

    fn caches(&self) -> &SyncState {
        &self.stores.sync
    }

    fn needs_no_sync(&self, budget: &PodUnavailableBudget) -> bool {
        budget.metadata.deletion_timestamp.is_some()
    }

    async fn sync(
        &self,
        key: &ObjectKey,
        budget: Arc<PodUnavailableBudget>,
    ) -> Result<Outcome, SyncError> {
        let Some(amount) = amount(&budget) else {
            return Ok(Outcome::Done);
        };
        let protected = match protected(&budget, &self.stores, &self.client).await {
            Ok(Some(protected)) => protected,
            Ok(None) => return Ok(Outcome::Done),
            Err(err) => {
                let reference = budget.object_ref(&());
                self.events
                    .warning(&reference, "TargetNotFound", "Compute", err.to_string())
                    .await;
                // A new target (or its change) triggers the next sync; look again anyway.
                return Ok(Outcome::RequeueAfter(Duration::from_secs(30)));
            }
        };
        let pods: Vec<BudgetPod> = (self.stores.pods.state().iter())
            .filter(|pod| pod.metadata.namespace.as_deref() == Some(&key.namespace))
            .filter(|pod| selects(&protected.selector, pod))
            .map(|pod| BudgetPod::of(pod))
            .collect();
        let old = budget.status.clone().unwrap_or_default();
        let (disrupted, unavailable) = (times(&old.disrupted_pods), times(&old.unavailable_pods));
        let observed = Observed {
            target_replicas: protected.replicas,
            amount: &amount,
            pods: &pods,
            disrupted: &disrupted,
            unavailable: &unavailable,
            now: Timestamp::now(),
        };
        let computed = match compute(&observed) {
            Ok(computed) => computed,
            Err(err) => {
                let reference = budget.object_ref(&());
                self.events
                    .warning(&reference, "InvalidBudget", "Compute", err.to_string())
                    .await;
                return Ok(Outcome::Done);
            }
        };
        let recheck = computed.recheck_after;
        let status = PodUnavailableBudgetStatus {
            observed_generation: budget.metadata.generation,
            disrupted_pods: to_times(computed.disrupted),
            unavailable_pods: to_times(computed.unavailable),
            unavailable_allowed: computed.unavailable_allowed,
            current_available: computed.current_available,
            desired_available: computed.desired_available,
            total_replicas: computed.total_replicas,
        };
        if status != old && !self.write_status(key, &budget, status).await? {
            return Ok(Outcome::RequeueAfter(CONFLICT_RETRY));
        }
        Ok(recheck.map_or(Outcome::Done, |wait| {
            Outcome::RequeueAfter(wait + Duration::from_secs(1))
        }))
    }
}

impl BudgetController {
    /// Replaces the status, conditional on the resourceVersion of the cached budget;
    /// `false` when that lost a race (an admission wrote first).
    async fn write_status(
        &self,
        key: &ObjectKey,
        budget: &PodUnavailableBudget,
        status: PodUnavailableBudgetStatus,
    ) -> Result<bool, SyncError> {
        let api: Api<PodUnavailableBudget> = Api::namespaced(self.client.clone(), &key.namespace);
        let mut new = budget.clone();
        new.metadata.managed_fields = None;
        new.status = Some(status);
        match api
            .replace_status(&key.name, &PostParams::default(), &new)
            .await
        {
            Ok(written) => {
                self.expect_own_write(key, &written.metadata);
                Ok(true)
            }
            Err(err) if status_code(&err) == Some(409) => Ok(false),
            Err(err) => Err(api_error("writing status")(err).into()),
        }
    }
}

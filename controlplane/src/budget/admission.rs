//! The check-and-decrement of PodUnavailableBudgets, as the eviction handler does it for
//! PodDisruptionBudgets (seed 003): for each budget protecting the pod, read it fresh,
//! decide (`decision::decide`), and record an admitted disruption with a write
//! conditional on the resourceVersion read; a conflict reads again and decides again, so
//! concurrent disruptions never exceed a budget. Native PodDisruptionBudgets selecting
//! the pod turn its delete into an eviction, which the apiserver checks.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::ObjectRef;

use super::arithmetic::BudgetPod;
use super::decision::{Decision, decide};
use super::target::{protected, selects};
use crate::api::PodUnavailableBudget;
use crate::caches::Stores;
use crate::controller::api_error::{ApiError, api_error, status_code};
use crate::workload::budget::{Admission, BudgetSource, DisruptionBudgets, DisruptionKind};

/// Reads and conditional writes of one budget before giving up on conflicts (the
/// eviction handler's `EvictionsRetry` has 5 steps).
const ATTEMPTS: usize = 5;

/// The budgets of `namespace`, from the shared caches, written through `client`.
pub struct KubeBudgets<'a> {
    pub client: &'a kube::Client,
    pub stores: &'a Stores,
    pub namespace: &'a str,
}

/// The budgets of every namespace, from the shared caches, written through `client`: what
/// the wiring hands the pod-set controllers.
pub struct KubeBudgetSource {
    pub client: kube::Client,
    pub stores: Stores,
}

impl BudgetSource for KubeBudgetSource {
    fn admit<'a>(
        &'a self,
        namespace: &'a str,
        pod: &'a str,
        kind: DisruptionKind,
    ) -> BoxFuture<'a, Result<Admission, ApiError>> {
        Box::pin(async move {
            let budgets = KubeBudgets {
                client: &self.client,
                stores: &self.stores,
                namespace,
            };
            budgets.admit(pod, kind).await
        })
    }
}

impl DisruptionBudgets for KubeBudgets<'_> {
    async fn admit(&self, pod: &str, kind: DisruptionKind) -> Result<Admission, ApiError> {
        let found = self
            .stores
            .pods
            .get(&ObjectRef::new(pod).within(self.namespace));
        let Some(pod) = found else {
            return Ok(Admission::Allowed { evict: false });
        };
        self.admit_pod(&pod, kind, Recording::Record).await
    }
}

impl KubeBudgets<'_> {
    /// Asks every budget protecting `pod` (as given, not as cached) to admit its
    /// disruption: the admission webhook asks about the pod its request carries.
    pub async fn admit_pod(
        &self,
        pod: &Pod,
        kind: DisruptionKind,
        recording: Recording,
    ) -> Result<Admission, ApiError> {
        for budget in self.protecting(pod).await {
            let api = Api::namespaced(self.client.clone(), self.namespace);
            let taken = take(&api, &budget, &BudgetPod::of(pod), kind, recording).await?;
            if let Some(message) = taken {
                return Ok(Admission::Held(message));
            }
        }
        let evict = kind == DisruptionKind::Delete
            && (self.stores.poddisruptionbudgets.state().iter())
                .filter(|pdb| pdb.metadata.namespace.as_deref() == Some(self.namespace))
                .filter_map(|pdb| pdb.spec.as_ref()?.selector.as_ref())
                .any(|selector| selects(selector, pod));
        Ok(Admission::Allowed { evict })
    }

    /// The names of the PodUnavailableBudgets protecting `pod`.
    async fn protecting(&self, pod: &Pod) -> Vec<String> {
        let mut names = Vec::new();
        let budgets = self.stores.podunavailablebudgets.state();
        let here = budgets
            .iter()
            .filter(|b| b.metadata.namespace.as_deref() == Some(self.namespace));
        for budget in here {
            match protected(budget, self.stores, self.client).await {
                Ok(Some(protected)) if selects(&protected.selector, pod) => {
                    names.push(budget.metadata.name.clone().unwrap_or_default());
                }
                Ok(_) => {}
                // Its status controller reports it; a budget without pods holds nothing.
                Err(err) => tracing::debug!(%err, "a budget's target cannot be read"),
            }
        }
        names
    }
}

/// Whether an admitted disruption is written into the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recording {
    Record,
    /// A server-side dry run: the same decision, nothing written.
    DryRun,
}

/// Takes one disruption of `pod` from the budget `name`: `None` when admitted (and
/// recorded, unless a dry run) or free, the refusal otherwise. Each attempt reads the budget fresh and
/// writes conditional on what it read; a conflict decides again on the newer budget.
pub async fn take(
    api: &Api<PodUnavailableBudget>,
    name: &str,
    pod: &BudgetPod,
    kind: DisruptionKind,
    recording: Recording,
) -> Result<Option<String>, ApiError> {
    for _ in 0..ATTEMPTS {
        let budget = match api.get(name).await {
            Ok(budget) => budget,
            Err(err) if status_code(&err) == Some(404) => return Ok(None),
            Err(err) => {
                return Err(api_error(format!("reading PodUnavailableBudget {name}"))(
                    err,
                ));
            }
        };
        let decision = decide(
            name,
            budget.metadata.generation,
            budget.status.as_ref(),
            pod,
            kind,
            Timestamp::now(),
        );
        let status = match decision {
            Decision::Free => return Ok(None),
            Decision::Refuse(message) => return Ok(Some(message)),
            Decision::Take(_) if recording == Recording::DryRun => return Ok(None),
            Decision::Take(status) => status,
        };
        let mut taken = budget;
        taken.metadata.managed_fields = None;
        taken.status = Some(status);
        match api
            .replace_status(name, &PostParams::default(), &taken)
            .await
        {
            Ok(_) => return Ok(None),
            Err(err) if status_code(&err) == Some(409) => continue,
            Err(err) => {
                let action = format!("recording a disruption in PodUnavailableBudget {name}");
                return Err(api_error(action)(err));
            }
        }
    }
    Ok(Some(format!(
        "the PodUnavailableBudget {name} kept changing while the disruption was being recorded; trying again"
    )))
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;

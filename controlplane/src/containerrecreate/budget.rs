//! The recreate's budget step. Recreating containers leaves the pod in place but
//! unavailable until they run again, as an in-place update does, so a request asks the
//! same shared check (`workload::budget`, `budget::admission::KubeBudgets` in the control
//! plane) for an in-place disruption: an admitted one is recorded in the budget's
//! `unavailablePods`, a held one keeps the request Pending with the budget's sentence.

use super::plan::{self, Plan};
use crate::api::containerrecreaterequest::ContainerRecreateRequestStatus;
use crate::controller::api_error::ApiError;
use crate::workload::budget::{Admission, DisruptionBudgets, DisruptionKind};

/// Asks `budgets` to admit recreating containers of `pod`: `None` when admitted (and
/// recorded), the Pending plan naming the budget when held.
pub async fn admit(
    budgets: &impl DisruptionBudgets,
    pod: &str,
    status: &ContainerRecreateRequestStatus,
) -> Result<Option<Plan>, ApiError> {
    match budgets.admit(pod, DisruptionKind::InPlaceUpdate).await? {
        Admission::Allowed { .. } => Ok(None),
        Admission::Held(message) => {
            tracing::info!(pod, %message, "a disruption budget holds the recreate");
            Ok(Some(plan::held(status, &message)))
        }
    }
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;

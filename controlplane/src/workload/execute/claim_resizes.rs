//! Growing claims before their pods' rolling update (`workload::claim_resize`): each
//! planned claim is patched to its template's storage request. A refusal of the apiserver
//! (a storage class that does not allow expansion, a quota) is reported as the
//! FailedUpdate problem and a Warning event naming the claim and its storage class and
//! quoting the apiserver; it is not a sync error, so the queue adds no fast retries: the
//! sync looks again after `PROBLEM_RECHECK`, and the pod keeps its revision meanwhile.

use std::hash::Hash;

use super::writes::{NewPods, PodWrites, WorkloadEvent};
use super::{ExecuteError, Executor, Problems, is_not_found};
use crate::controller::api_error::{api_error, api_message};
use crate::controller::expectations::Expectation;
use crate::workload::actions::Plan;
use crate::workload::budget::DisruptionBudgets;
use crate::workload::claim_resize::{ClaimResize, resize_patch};

/// The reason of the Warning event when a claim cannot be updated to its template
/// (OpenKruise's reason for a claim that differs in more than size).
pub const FAILED_UPDATE_PVC: &str = "FailedUpdatePVC";
/// The reasons of the events of a claim patched to a larger request, OpenKruise's (the
/// native controller's `recordClaimEvent` with the verb Resize).
pub const SUCCESSFUL_RESIZE: &str = "SuccessfulResize";
pub const FAILED_RESIZE: &str = "FailedResize";

/// The sentence for a resize the apiserver refused: the claim, its class, the request and
/// the apiserver's own message.
pub fn resize_refused(resize: &ClaimResize, apiserver: &str) -> String {
    let class = match &resize.storage_class {
        Some(class) => format!("storage class {class}"),
        None => "the default storage class".to_owned(),
    };
    format!(
        "claim {} of pod {} ({class}) cannot grow to {}; the pod keeps its revision until it can: {apiserver}",
        resize.claim, resize.pod, resize.request
    )
}

impl<K, W, N, B> Executor<'_, K, W, N, B>
where
    K: Clone + Eq + Hash + Send + Sync,
    W: PodWrites,
    N: NewPods,
    B: DisruptionBudgets,
{
    /// Patches the plan's claims to grow, and reports a claim the plan could not patch.
    /// Only an apiserver that could not be asked is an error.
    pub(super) async fn resize_claims(
        &self,
        plan: &Plan,
        problems: &mut Problems,
    ) -> Result<(), ExecuteError> {
        if let Some(refusal) = &plan.claim_refusal {
            problems.update.get_or_insert_with(|| refusal.clone());
            let event = WorkloadEvent::warning(FAILED_UPDATE_PVC, "Update", refusal.clone());
            self.writes.publish(event).await;
        }
        let mut first_error = None;
        for resize in &plan.claim_resizes {
            if let Err(err) = self.resize_claim(resize, problems).await {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn resize_claim(
        &self,
        resize: &ClaimResize,
        problems: &mut Problems,
    ) -> Result<(), ExecuteError> {
        let name = &resize.claim;
        match self.writes.patch_claim(name, resize_patch(resize)).await {
            Ok(resource_version) => {
                self.expect(Expectation::Update {
                    kind: "PersistentVolumeClaim",
                    name: name.clone(),
                    resource_version,
                });
                let note = format!(
                    "resized claim {name} of pod {} to {}",
                    resize.pod, resize.request
                );
                let event =
                    WorkloadEvent::normal(SUCCESSFUL_RESIZE, "Resize", note).about_pod(&resize.pod);
                self.writes.publish(event).await;
                Ok(())
            }
            // Gone, or changed since the plan: the next sync plans from the new claim.
            Err(err) if is_not_found(&err) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(err @ kube::Error::Api(_)) if is_refusal(&err) => {
                let message = resize_refused(resize, &api_message(&err));
                tracing::warn!(claim = %name, %message, "the apiserver refused to grow a claim");
                problems.update.get_or_insert_with(|| message.clone());
                let event = WorkloadEvent::warning(FAILED_RESIZE, "Resize", message);
                self.writes.publish(event.about_pod(&resize.pod)).await;
                Ok(())
            }
            Err(err) => Err(api_error(format!("growing claim {name}"))(err).into()),
        }
    }
}

/// An answer only a change of the claim, its class or the set fixes (403 Forbidden from
/// the resize admission, 422 Invalid), as opposed to an apiserver that could not answer.
fn is_refusal(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if (400..500).contains(&s.code) && s.code != 429)
}

#[cfg(test)]
#[path = "claim_resizes_tests.rs"]
mod tests;

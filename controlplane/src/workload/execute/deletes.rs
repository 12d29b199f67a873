//! Pod deletes: each admitted by the disruption budgets in plan order, then written
//! concurrently (`disruption.rs`) with the planned UID as precondition, through the
//! Eviction API when a native budget selects the pod, then the pod's claims.

use super::disruption::Disrupted;
use super::writes::{NewPods, PodWrites, WorkloadEvent};
use super::{ExecuteError, Executor, Problems, WorkloadKey, is_not_found};
use crate::controller::api_error::api_error;
use crate::controller::expectations::Expectation;
use crate::workload::actions::{Delete, DeleteReason};
use crate::workload::budget::{DisruptionBudgets, DisruptionKind};

impl<K: WorkloadKey, W: PodWrites, N: NewPods, B: DisruptionBudgets> Executor<'_, K, W, N, B> {
    /// Deletes the pods of `deletes` the budgets admit ([`Self::admit_then_write`]).
    /// Returns whether a budget held a delete, and the first hard error.
    pub(super) async fn delete_pods(
        &self,
        deletes: &[Delete],
        problems: &mut Problems,
    ) -> (bool, Option<ExecuteError>) {
        let write = |delete, evict| async move {
            let mut own = Problems::default();
            (self.delete_admitted(delete, evict, &mut own).await, own)
        };
        // A failed pod is unavailable already: replacing it disrupts nothing, so the
        // budgets are not asked about it.
        let asks = |delete: &Delete| delete.reason != DeleteReason::Failed;
        self.admit_then_write(deletes, DisruptionKind::Delete, asks, problems, write)
            .await
    }

    /// Deletes the pod if it still has the planned UID, then its claims.
    async fn delete_admitted(
        &self,
        delete: &Delete,
        evict: bool,
        problems: &mut Problems,
    ) -> Result<Disrupted, ExecuteError> {
        let deleted = if evict {
            self.writes.evict_pod(&delete.pod, &delete.uid).await
        } else {
            self.writes.delete_pod(&delete.pod, &delete.uid).await
        };
        match deleted {
            Ok(()) => {}
            Err(err) if is_not_found(&err) => {}
            // The UID precondition failed: a new pod took the name; nothing to do.
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok(Disrupted::Done),
            Err(kube::Error::Api(s)) if s.code == 429 => {
                let message = format!("pod {}: {}", delete.pod, s.message);
                self.hold(message, problems).await;
                return Ok(Disrupted::Held);
            }
            Err(err) => {
                return Err(api_error(format!("deleting pod {}", delete.pod))(err).into());
            }
        }
        self.expect(Expectation::Delete {
            kind: "Pod",
            name: delete.pod.clone(),
            uid: delete.uid.clone(),
        });
        let why = delete.reason.describe();
        let note = if delete.detail.is_empty() {
            format!("deleted pod {} ({why})", delete.pod)
        } else {
            format!("deleted pod {} ({why}; {})", delete.pod, delete.detail)
        };
        // About the pod, as a create's event is: events that differ only in their note are
        // folded into one series, which would name only the first pod deleted.
        let event =
            WorkloadEvent::normal("SuccessfulDelete", "Delete", note).about_pod(&delete.pod);
        self.writes.publish(event).await;
        for claim in &delete.pvcs {
            self.delete_claim(claim, Some(why)).await?;
        }
        Ok(Disrupted::Done)
    }
}

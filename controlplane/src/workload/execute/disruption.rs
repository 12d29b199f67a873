//! The budget gate of the shared executor: before a pod is deleted or its in-place update
//! starts, the disruption budgets are asked; a held disruption is skipped for this sync,
//! reported in the FailedUpdate problem and a Warning event naming the budget, and the
//! sync comes back after `BUDGET_RETRY`.

use super::writes::{NewPods, PodWrites, WorkloadEvent};
use super::{ExecuteError, Executor, Problems, WorkloadKey};
use crate::workload::budget::{Admission, DisruptionBudgets, DisruptionKind};

/// The reason of the Warning event when a budget holds a disruption.
pub const DISRUPTION_HELD: &str = "DisruptionHeld";

/// What became of one disruption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Disrupted {
    /// Carried out (or nothing to do).
    Done,
    /// A budget held it.
    Held,
}

impl<K: WorkloadKey, W: PodWrites, N: NewPods, B: DisruptionBudgets> Executor<'_, K, W, N, B> {
    /// Asks the budgets to admit disrupting `pod`: `Some(evict)` when admitted (`evict`:
    /// delete through the Eviction API), `None` when held (reported here).
    pub(super) async fn admit(
        &self,
        pod: &str,
        kind: DisruptionKind,
        problems: &mut Problems,
    ) -> Result<Option<bool>, ExecuteError> {
        match self.budgets.admit(pod, kind).await? {
            Admission::Allowed { evict } => Ok(Some(evict)),
            Admission::Held(message) => {
                self.hold(format!("pod {pod}: {message}"), problems).await;
                Ok(None)
            }
        }
    }

    /// Reports a held disruption: the FailedUpdate problem (the first one held) and a
    /// Warning event.
    pub(super) async fn hold(&self, message: String, problems: &mut Problems) {
        tracing::info!(%message, "a disruption budget holds the disruption");
        problems.update.get_or_insert_with(|| message.clone());
        let event = WorkloadEvent::warning(DISRUPTION_HELD, "Update", message);
        self.writes.publish(event).await;
    }
}

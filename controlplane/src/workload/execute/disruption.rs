//! The budget gate of the shared executor, and the shape every disrupting step shares.
//! Before a pod is deleted or its in-place update starts, the disruption budgets are asked;
//! a held disruption is skipped for this sync, reported in the FailedUpdate problem and a
//! Warning event naming the budget, and the sync comes back after `BUDGET_RETRY`. The
//! admitted writes then run concurrently ([`Executor::admit_then_write`]).

use futures::StreamExt as _;

use super::writes::{NewPods, PodWrites, WorkloadEvent};
use super::{CONCURRENT_POD_WRITES, ExecuteError, Executor, Problems, WorkloadKey};
use crate::workload::actions::{Delete, PodChange};
use crate::workload::budget::{Admission, DisruptionBudgets};

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

/// A planned action on one pod, which the budgets may have to admit.
pub(super) trait PodAction: Sync {
    fn pod(&self) -> &str;
}

impl PodAction for Delete {
    fn pod(&self) -> &str {
        &self.pod
    }
}

impl PodAction for PodChange {
    fn pod(&self) -> &str {
        &self.pod
    }
}

/// What one admitted write came to, and the problems it ran into.
pub(super) type Written = (Result<Disrupted, ExecuteError>, Problems);

impl<K: WorkloadKey, W: PodWrites, N: NewPods, B: DisruptionBudgets> Executor<'_, K, W, N, B> {
    /// Carries out `actions` as every disrupting step of a plan does. `admit` asks the
    /// budgets about one action, one at a time in plan order (each admission records a
    /// disruption in its budget, so asking in parallel would race on the budget's status);
    /// a held action is reported and skipped. `write` then writes each admitted action
    /// (`true`: through the Eviction API), each to its own pod, up to
    /// [`CONCURRENT_POD_WRITES`] at once: a wave of 700 deletes costs about 44 round trips,
    /// not 700 (a recreate roll of 3,500 pods spent 16 s and more in one sync deleting one
    /// by one). Each write reports into problems of its own, merged in plan order keeping
    /// the first, as [`Self::hold`] keeps the first disruption held. Returns whether a budget
    /// held anything, and the first hard error.
    pub(super) async fn admit_then_write<'s, T, Admitting, Writing>(
        &'s self,
        actions: &'s [T],
        problems: &mut Problems,
        admit: impl Fn(&'s T) -> Admitting,
        write: impl Fn(&'s T, bool) -> Writing,
    ) -> (bool, Option<ExecuteError>)
    where
        T: PodAction,
        Admitting: Future<Output = Result<Admission, ExecuteError>>,
        Writing: Future<Output = Written>,
    {
        let mut held = false;
        let mut first_error = None;
        let mut writes = Vec::with_capacity(actions.len());
        for action in actions {
            match admit(action).await {
                Ok(Admission::Allowed { evict }) => writes.push(write(action, evict)),
                Ok(Admission::Held(message)) => {
                    self.hold(format!("pod {}: {message}", action.pod()), problems)
                        .await;
                    held = true;
                }
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        let results: Vec<Written> = futures::stream::iter(writes)
            .buffered(CONCURRENT_POD_WRITES)
            .collect()
            .await;
        for (result, own) in results {
            if let Some(message) = own.update {
                problems.update.get_or_insert(message);
            }
            match result {
                Ok(Disrupted::Held) => held = true,
                Ok(Disrupted::Done) => {}
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        (held, first_error)
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

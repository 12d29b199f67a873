//! The budget gate of the shared executor, and the shape every disrupting step shares.
//! Before a pod is deleted or its in-place update starts, the disruption budgets are asked;
//! a held disruption is skipped for this sync, reported in the FailedUpdate problem and a
//! Warning event naming the budget, and the sync comes back after `BUDGET_RETRY`. The
//! admitted writes then run concurrently ([`Executor::admit_then_write`]).

use futures::StreamExt as _;

use super::writes::{NewPods, PodWrites, WorkloadEvent};
use super::{CONCURRENT_POD_WRITES, ExecuteError, Executor, Problems, WorkloadKey};
use crate::workload::actions::{Delete, PodChange};
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
    /// Carries out `actions` as every disrupting step of a plan does. The budgets are
    /// asked about the actions `asks` picks, all at once in plan order (an admission
    /// records a disruption in its budget, so the answers are those of asking one at a
    /// time, and a budget records a wave in one write); a held action is reported and
    /// skipped, the others need no asking. `write` then writes each admitted action
    /// (`true`: through the Eviction API), each to its own pod, up to
    /// [`CONCURRENT_POD_WRITES`] at once: a wave of 700 deletes costs about 44 round trips,
    /// not 700 (a recreate roll of 3,500 pods spent 16 s and more in one sync deleting one
    /// by one). Each write reports into problems of its own, merged in plan order keeping
    /// the first, as [`Self::hold`] keeps the first disruption held. Returns whether a budget
    /// held anything, and the first hard error.
    pub(super) async fn admit_then_write<'s, T, Writing>(
        &'s self,
        actions: &'s [T],
        kind: DisruptionKind,
        asks: impl Fn(&T) -> bool,
        problems: &mut Problems,
        write: impl Fn(&'s T, bool) -> Writing,
    ) -> (bool, Option<ExecuteError>)
    where
        T: PodAction,
        Writing: Future<Output = Written>,
    {
        let mut held = false;
        let mut first_error = None;
        let asked: Vec<&str> = (actions.iter())
            .filter(|a| asks(a))
            .map(|a| a.pod())
            .collect();
        // Nothing to ask, nothing asked: most syncs disrupt no pod, and reading the
        // namespace's budgets costs each of them.
        let answered = if asked.is_empty() {
            Ok(Vec::new())
        } else {
            self.budgets.admit_all(&asked, kind).await
        };
        let mut answers = match answered {
            Ok(answers) => answers.into_iter(),
            Err(err) => {
                first_error = Some(err.into());
                Vec::new().into_iter()
            }
        };
        let mut writes = Vec::with_capacity(actions.len());
        for action in actions {
            let admission = if asks(action) {
                // None: the budgets could not be asked; the error is returned.
                let Some(answer) = answers.next() else {
                    continue;
                };
                answer
            } else {
                Admission::Allowed { evict: false }
            };
            match admission {
                Admission::Allowed { evict } => writes.push(write(action, evict)),
                Admission::Held(message) => {
                    self.hold(format!("pod {}: {message}", action.pod()), problems)
                        .await;
                    held = true;
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

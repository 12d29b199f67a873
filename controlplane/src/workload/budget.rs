//! The one budget check every voluntary disruption a workload makes goes through (an
//! in-place update, a recreate delete, a scale-down or specified delete): the shared
//! executor asks `DisruptionBudgets` before it disrupts a pod, and holds the disruption
//! when a budget refuses. The budgets come from a `BudgetSource` the wiring hands in
//! (`app.rs`), so this module imports no budget controller; the real one is
//! `budget::admission::KubeBudgetSource` over `budget::admission::KubeBudgets`
//! (PodUnavailableBudget check-and-decrement, native PodDisruptionBudgets through the
//! Eviction API); unit tests use `ScriptedBudgets`.

use std::future::Future;

use futures::future::BoxFuture;

use crate::controller::api_error::ApiError;

/// What a disruption does to the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisruptionKind {
    /// The pod goes (a delete or an eviction).
    Delete,
    /// The pod stays but is unavailable while it is updated in place.
    InPlaceUpdate,
}

/// The budgets' answer for one disruption.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Go ahead. `evict`: a native PodDisruptionBudget selects the pod, so it is deleted
    /// through the Eviction API (where the apiserver checks that budget).
    Allowed { evict: bool },
    /// Held: the message names the budget and says why.
    Held(String),
}

/// The budgets protecting the pods of one namespace.
pub trait DisruptionBudgets: Send + Sync {
    /// Asks every budget protecting `pod` to admit its disruption; an admitted one is
    /// recorded in the budget before this returns.
    fn admit(
        &self,
        pod: &str,
        kind: DisruptionKind,
    ) -> impl Future<Output = Result<Admission, ApiError>> + Send;

    /// [`Self::admit`] for each of `pods` in turn, in their order, with the same answers;
    /// an implementation may record them in fewer writes (one per budget).
    fn admit_all(
        &self,
        pods: &[&str],
        kind: DisruptionKind,
    ) -> impl Future<Output = Result<Vec<Admission>, ApiError>> + Send {
        admit_each(self, pods, kind)
    }
}

/// [`DisruptionBudgets::admit`] for each of `pods` in turn: the default `admit_all`, for
/// implementations that record each disruption in a write of its own.
pub async fn admit_each<B: DisruptionBudgets + ?Sized>(
    budgets: &B,
    pods: &[&str],
    kind: DisruptionKind,
) -> Result<Vec<Admission>, ApiError> {
    let mut answers = Vec::with_capacity(pods.len());
    for pod in pods {
        answers.push(budgets.admit(pod, kind).await?);
    }
    Ok(answers)
}

/// Where the budgets of every namespace come from: handed in by the wiring, so the shared
/// pod-set machinery asks budgets without knowing how they are kept.
pub trait BudgetSource: Send + Sync {
    /// [`DisruptionBudgets::admit`] for `pod` of `namespace`.
    fn admit<'a>(
        &'a self,
        namespace: &'a str,
        pod: &'a str,
        kind: DisruptionKind,
    ) -> BoxFuture<'a, Result<Admission, ApiError>>;

    /// [`DisruptionBudgets::admit_all`] for `pods` of `namespace`.
    fn admit_all<'a>(
        &'a self,
        namespace: &'a str,
        pods: &'a [&'a str],
        kind: DisruptionKind,
    ) -> BoxFuture<'a, Result<Vec<Admission>, ApiError>> {
        Box::pin(async move {
            let mut answers = Vec::with_capacity(pods.len());
            for pod in pods {
                answers.push(self.admit(namespace, pod, kind).await?);
            }
            Ok(answers)
        })
    }
}

/// The budgets of one namespace, from a [`BudgetSource`].
pub struct NamespaceBudgets<'a> {
    pub source: &'a dyn BudgetSource,
    pub namespace: &'a str,
}

impl DisruptionBudgets for NamespaceBudgets<'_> {
    async fn admit(&self, pod: &str, kind: DisruptionKind) -> Result<Admission, ApiError> {
        self.source.admit(self.namespace, pod, kind).await
    }

    async fn admit_all(
        &self,
        pods: &[&str],
        kind: DisruptionKind,
    ) -> Result<Vec<Admission>, ApiError> {
        self.source.admit_all(self.namespace, pods, kind).await
    }
}

/// No budget anywhere: every disruption is allowed as a plain delete.
pub struct NoBudgets;

impl DisruptionBudgets for NoBudgets {
    async fn admit(&self, _pod: &str, _kind: DisruptionKind) -> Result<Admission, ApiError> {
        Ok(Admission::Allowed { evict: false })
    }
}

impl BudgetSource for NoBudgets {
    fn admit<'a>(
        &'a self,
        _namespace: &'a str,
        _pod: &'a str,
        _kind: DisruptionKind,
    ) -> BoxFuture<'a, Result<Admission, ApiError>> {
        Box::pin(async { Ok(Admission::Allowed { evict: false }) })
    }
}

#[cfg(test)]
pub use scripted::ScriptedBudgets;

#[cfg(test)]
mod scripted {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;

    /// Answers from a script (pod → admission; others are allowed as plain deletes) and
    /// records every question in order.
    #[derive(Default)]
    pub struct ScriptedBudgets {
        pub answers: BTreeMap<String, Admission>,
        pub asked: Mutex<Vec<(String, DisruptionKind)>>,
        /// The pods of each `admit_all` call, in order: one per wave asked about.
        pub waves: Mutex<Vec<Vec<String>>>,
    }

    impl ScriptedBudgets {
        pub fn asked(&self) -> Vec<(String, DisruptionKind)> {
            self.asked.lock().expect("lock").clone()
        }

        pub fn waves(&self) -> Vec<Vec<String>> {
            self.waves.lock().expect("lock").clone()
        }
    }

    impl DisruptionBudgets for ScriptedBudgets {
        async fn admit_all(
            &self,
            pods: &[&str],
            kind: DisruptionKind,
        ) -> Result<Vec<Admission>, ApiError> {
            let wave = pods.iter().map(|p| (*p).to_owned()).collect();
            self.waves.lock().expect("lock").push(wave);
            admit_each(self, pods, kind).await
        }

        async fn admit(&self, pod: &str, kind: DisruptionKind) -> Result<Admission, ApiError> {
            self.asked
                .lock()
                .expect("lock")
                .push((pod.to_owned(), kind));
            Ok(self
                .answers
                .get(pod)
                .cloned()
                .unwrap_or(Admission::Allowed { evict: false }))
        }
    }
}

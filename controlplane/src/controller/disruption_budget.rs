//! The one question every voluntary disruption Stevedore starts asks first: may this pod
//! be disrupted now? PodUnavailableBudgets and native PodDisruptionBudgets will answer it
//! (issue 16, items 1–3); until then [`NoBudgets`] allows every disruption. Callers ask
//! only when they are about to disrupt, because a budget's answer will consume it.

use std::future::Future;
use std::pin::Pin;

use k8s_openapi::api::core::v1::Pod;

/// The answer of the budgets that cover a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BudgetVerdict {
    /// The disruption may go ahead (and has been counted against the budgets).
    Allowed,
    /// A budget has no disruption left; ask again later.
    Blocked {
        /// The budget that refused, as `Kind namespace/name`.
        budget: String,
        /// Why, as a sentence.
        message: String,
    },
}

pub type VerdictFuture<'a> = Pin<Box<dyn Future<Output = BudgetVerdict> + Send + 'a>>;

/// The disruption budgets, as the controllers that disrupt pods see them.
pub trait DisruptionBudgets: Send + Sync + 'static {
    /// Whether `pod` may be disrupted now; an `Allowed` answer counts the disruption.
    fn may_disrupt<'a>(&'a self, pod: &'a Pod) -> VerdictFuture<'a>;
}

/// No budgets yet: every disruption is allowed. The seam PodUnavailableBudget fills.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoBudgets;

impl DisruptionBudgets for NoBudgets {
    fn may_disrupt<'a>(&'a self, _pod: &'a Pod) -> VerdictFuture<'a> {
        Box::pin(async { BudgetVerdict::Allowed })
    }
}

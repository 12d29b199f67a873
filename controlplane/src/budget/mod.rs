//! PodUnavailableBudget: `arithmetic` computes a budget's status from its pods and its
//! target's scale (seed 003's disruption controller), `decision` is the check-and-decrement
//! of one disruption, which the workloads (`admission`) and the admission webhook for
//! deletes and evictions from outside (`webhook`) share.

pub mod admission;
pub mod arithmetic;
#[cfg(test)]
mod arithmetic_tests;
pub mod decision;
pub mod reconcile;
pub mod target;
pub mod triggers;
pub mod webhook;

pub use reconcile::BudgetController;

//! PodUnavailableBudgets against disruptions from outside the control plane: a person's
//! `kubectl delete pod`, `kubectl drain` (evictions), other controllers' deletes and
//! evictions. A validating admission webhook on pod DELETE and `pods/eviction` CREATE
//! runs the same check-and-decrement the workloads use (`admission::KubeBudgets`), so a
//! person and a rollout disrupting the same pods at once never exceed a budget. It is
//! served by the shared webhook server (`crate::admission`).
//!
//! Why a webhook and not a ValidatingAdmissionPolicy (docs/architecture.md, "Budgets"):
//! a policy can only read, so two deletes admitted at once both see the same
//! `unavailableAllowed` and both pass; and an eviction's admission object is the
//! Eviction, which carries the pod's name but not its labels, so CEL cannot tell which
//! budget protects it.
//!
//! - [`review`]: which requests are checked, whether the pod a review names exists with
//!   that UID (a forged review is answered, never recorded), and the message (pure);
//! - [`handler`]: the route, reading the pod and asking the budgets.

pub mod handler;
pub mod review;

pub use handler::{REVIEW_PATH, routes};

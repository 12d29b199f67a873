//! PodUnavailableBudgets against disruptions from outside the control plane: a person's
//! `kubectl delete pod`, `kubectl drain` (evictions), other controllers' deletes and
//! evictions. A validating admission webhook on pod DELETE and `pods/eviction` CREATE
//! runs the same check-and-decrement the workloads use (`admission::KubeBudgets`), so a
//! person and a rollout disrupting the same pods at once never exceed a budget.
//!
//! Why a webhook and not a ValidatingAdmissionPolicy (docs/architecture.md, "Budgets"):
//! a policy can only read, so two deletes admitted at once both see the same
//! `unavailableAllowed` and both pass; and an eviction's admission object is the
//! Eviction, which carries the pod's name but not its labels, so CEL cannot tell which
//! budget protects it.
//!
//! - [`caller`]: which callers are answered, by their client certificate (pure);
//! - [`review`]: which requests are checked, whether the pod a review names exists with
//!   that UID (a forged review is answered, never recorded), and the response (pure);
//! - [`server`]: the HTTPS endpoint every replica serves, with a certificate from the
//!   control plane's own webhook CA; it also answers the PodUnavailableBudget CRD's
//!   conversion reviews (`crate::conversion`), whatever `podunavailablebudget-webhook` says;
//! - [`trust`]: the CA put into the ValidatingWebhookConfiguration's `caBundle` and the
//!   CRD's conversion webhook, before the control plane reports ready.

pub mod caller;
pub mod review;
pub mod server;
pub mod trust;

pub use server::{Callers, Prepared, WebhookConfig, WebhookError, prepare};

//! The control plane's webhook server, shared by every webhook it serves: the HTTPS
//! listener with a certificate from its own webhook CA, the CA written where the
//! apiserver looks for it, caller authentication, and the `AdmissionReview` read and
//! answered. The webhooks bring only their routes and their decisions:
//! `budget::webhook` (PodUnavailableBudgets against pod deletes and evictions) and
//! `containerrecreate::webhook` (ContainerRecreateRequest defaulting and immutability).
//!
//! - [`caller`]: which callers are answered, by their client certificate (pure);
//! - [`review`]: the `AdmissionReview` request and the answers (allow, refuse, patch);
//! - [`pod_create`]: the answer the pod-create webhooks share (SidecarSet injection,
//!   launch priority), which bring only their decision about the created pod;
//! - [`server`]: the HTTPS endpoint every replica serves; it also answers the
//!   PodUnavailableBudget CRD's conversion reviews (`crate::conversion`);
//! - [`trust`]: the CA put into the webhook configurations' `caBundle` and the CRD's
//!   conversion webhook, before the control plane reports ready.

pub mod caller;
pub mod pod_create;
pub mod review;
pub mod server;
pub mod trust;

pub use server::{Callers, Prepared, WebhookConfig, WebhookError, prepare};
pub use trust::WebhookConfiguration;

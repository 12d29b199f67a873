//! Serving certificates of the node agents through the CSR API (certificates.k8s.io/v1)
//! with a Stevedore signer, `stevedore.dev/agent-serving`, for which the control plane is
//! approver and signer: an agent asks for a certificate naming its own node, and only
//! its own (docs/security.md, "Serving certificates").
//!
//! - [`approval`]: the rule (pure); [`request`]: a CSR object read for it;
//! - [`decision`]: the next step on one CSR (pure): approve, deny, sign, fail, nothing;
//! - [`authority`]: the CA and the leaves it signs; [`ca_secret`]: the CA kept in a
//!   kube-system Secret, created by the first replica that starts;
//! - [`signer`]: the loop that carries the steps out while this replica leads.

pub mod approval;
pub mod authority;
pub mod ca_secret;
pub mod decision;
pub mod request;
pub mod signer;

#[cfg(test)]
mod test_support;

pub use approval::{AGENT_SERVING_SIGNER, CertificateRequest, NODE_NAME_EXTRA, Verdict, decide};
pub use authority::{Authority, AuthorityError, CA_LIFETIME, LEAF_LIFETIME};
pub use ca_secret::{CA_CERT_KEY, CA_KEY_KEY, CaSecretError, load_or_create};
pub use decision::{Step, next_step};
pub use signer::{CsrSigner, SignerError};

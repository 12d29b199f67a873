//! Serving certificates of the node agents through the CSR API (certificates.k8s.io/v1)
//! with a Stevedore signer, `stevedore.dev/agent-serving`, for which the control plane is
//! the approver: an agent asks for a certificate naming its own node, and only its own.
//!
//! Today this module holds the approval rule ([`approval::decide`]); the watch loop
//! that approves and signs, the CA Secret and the agent's requesting side are not built
//! yet (docs/security.md, "Status of the certificate work").

pub mod approval;

pub use approval::{AGENT_SERVING_SIGNER, CertificateRequest, NODE_NAME_EXTRA, Verdict, decide};

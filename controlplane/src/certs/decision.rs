//! The signer's next step on one CSR, decided from the object alone (and the requester's
//! Node): approve or deny a pending request, sign an approved one, or leave it be.

use std::net::IpAddr;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;

use super::approval::{self, NODE_NAME_EXTRA, Verdict};
use super::request::{ParsedCsr, parse};

/// What to do with a CSR next.
#[derive(Debug, Clone)]
pub enum Step {
    /// Another signer's, or already settled (issued, denied or failed).
    Nothing,
    /// Add the Approved condition: a serving certificate for this node.
    Approve { node: String },
    /// Add the Denied condition with this reason.
    Deny(String),
    /// Approved (by us or by someone allowed to): issue the certificate.
    Sign(Box<ParsedCsr>),
    /// Approved but cannot be issued: add the Failed condition with this reason.
    Fail(String),
}

/// The next step on `csr`, whose requester must be `agent_user`; `node_addresses` gives a
/// Node's addresses (None when there is no such Node).
pub fn next_step(
    csr: &CertificateSigningRequest,
    agent_user: &str,
    node_addresses: impl Fn(&str) -> Option<Vec<IpAddr>>,
) -> Step {
    if csr.spec.signer_name != approval::AGENT_SERVING_SIGNER || is_settled(csr) {
        return Step::Nothing;
    }
    let approved = has_condition(csr, "Approved");
    let parsed = match parse(csr) {
        Ok(parsed) => parsed,
        Err(reason) if approved => return Step::Fail(reason),
        Err(reason) => return Step::Deny(reason),
    };
    if approved {
        // As the built-in signers do: whoever may approve for this signer decides, so an
        // administrator can approve a request the rule would not.
        return Step::Sign(Box::new(parsed));
    }
    match approval::decide(&parsed.request, agent_user, node_addresses) {
        Verdict::NotOurs => Step::Nothing,
        Verdict::Approve { node } => Step::Approve { node },
        Verdict::Deny(reason) => Step::Deny(reason),
    }
}

/// The node the requester's token is bound to, when it names exactly one: the Node whose
/// addresses [`next_step`] will ask for.
pub fn requester_node(csr: &CertificateSigningRequest) -> Option<&str> {
    match csr.spec.extra.as_ref()?.get(NODE_NAME_EXTRA)?.as_slice() {
        [node] => Some(node),
        _ => None,
    }
}

/// Issued, denied or failed: nothing more for the signer to do.
fn is_settled(csr: &CertificateSigningRequest) -> bool {
    let status = csr.status.as_ref();
    status
        .and_then(|s| s.certificate.as_ref())
        .is_some_and(|cert| !cert.0.is_empty())
        || has_condition(csr, "Denied")
        || has_condition(csr, "Failed")
}

fn has_condition(csr: &CertificateSigningRequest, type_: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == type_ && c.status == "True")
        })
}

#[cfg(test)]
#[path = "decision_tests.rs"]
mod tests;

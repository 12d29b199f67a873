//! Whether a CertificateSigningRequest for an agent serving certificate is approved: the
//! pure rule, fed what the CSR object and its PEM request say and the requester's Node.

use std::{collections::BTreeMap, net::IpAddr};

/// The signer agents ask; the control plane approves and signs for it alone.
pub const AGENT_SERVING_SIGNER: &str = "stevedore.dev/agent-serving";

/// The `extra` key under which the apiserver records the node of the pod a bound
/// service-account token was issued to, and copies into a CSR's `spec.extra`.
pub const NODE_NAME_EXTRA: &str = "authentication.kubernetes.io/node-name";

/// Key usages an agent serving certificate may carry; `server auth` is required.
const ALLOWED_USAGES: [&str; 3] = ["digital signature", "key encipherment", "server auth"];

/// What a CSR asks for and who asked.
#[derive(Debug, Clone, Default)]
pub struct CertificateRequest {
    /// `spec.signerName`.
    pub signer: String,
    /// `spec.username`: set by the apiserver from the requester's credential.
    pub username: String,
    /// `spec.extra`: likewise set by the apiserver.
    pub extra: BTreeMap<String, Vec<String>>,
    /// `spec.usages`.
    pub usages: Vec<String>,
    /// From the PEM request: the subject's common name and the SANs.
    pub common_name: String,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
}

/// The decision on one CSR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Another signer's request: leave it alone.
    NotOurs,
    /// Approve: a serving certificate for this node.
    Approve { node: String },
    /// Deny, with the reason recorded in the Denied condition.
    Deny(String),
}

/// Decides on `request`, made by `agent_user` (the agent's service account) or not;
/// `node_addresses` gives a Node's addresses (None when there is no such Node).
///
/// Approved only when: our signer; requested by the agent's service account with a
/// token bound to a pod on exactly one node; usages within digital signature, key
/// encipherment and server auth, including server auth; common name = that node; every
/// DNS SAN = the node name and every IP SAN one of that Node's addresses. So root on a
/// node, holding that node's agent token, can get a certificate for its own node only.
pub fn decide(
    request: &CertificateRequest,
    agent_user: &str,
    node_addresses: impl Fn(&str) -> Option<Vec<IpAddr>>,
) -> Verdict {
    if request.signer != AGENT_SERVING_SIGNER {
        return Verdict::NotOurs;
    }
    match check(request, agent_user, node_addresses) {
        Ok(node) => Verdict::Approve { node },
        Err(reason) => Verdict::Deny(reason),
    }
}

fn check(
    request: &CertificateRequest,
    agent_user: &str,
    node_addresses: impl Fn(&str) -> Option<Vec<IpAddr>>,
) -> Result<String, String> {
    if request.username != agent_user {
        return Err(format!(
            "Requested by {}, not by the agent's service account {agent_user}.",
            request.username
        ));
    }
    let node = match request.extra.get(NODE_NAME_EXTRA).map(Vec::as_slice) {
        Some([node]) if !node.is_empty() => node.clone(),
        _ => {
            return Err(format!(
                "The requester's token names no single node ({NODE_NAME_EXTRA}); request with the agent pod's own token."
            ));
        }
    };
    check_usages(&request.usages)?;
    if request.common_name != node {
        return Err(format!(
            "The common name {:?} is not the requester's node {node}.",
            request.common_name
        ));
    }
    if let Some(name) = request.dns_names.iter().find(|n| **n != node) {
        return Err(format!(
            "The DNS name {name} is not the requester's node {node}."
        ));
    }
    let addresses = node_addresses(&node).ok_or_else(|| format!("There is no Node {node}."))?;
    if let Some(ip) = request
        .ip_addresses
        .iter()
        .find(|ip| !addresses.contains(ip))
    {
        return Err(format!(
            "The IP address {ip} is not an address of node {node}."
        ));
    }
    if request.dns_names.is_empty() && request.ip_addresses.is_empty() {
        return Err("The request names no DNS name or IP address to serve.".to_owned());
    }
    Ok(node)
}

fn check_usages(usages: &[String]) -> Result<(), String> {
    if let Some(usage) = usages
        .iter()
        .find(|u| !ALLOWED_USAGES.contains(&u.as_str()))
    {
        return Err(format!(
            "The usage {usage:?} is not one a serving certificate needs."
        ));
    }
    if !usages.iter().any(|u| u == "server auth") {
        return Err("The usages lack \"server auth\".".to_owned());
    }
    Ok(())
}

#[cfg(test)]
#[path = "approval_tests.rs"]
mod tests;

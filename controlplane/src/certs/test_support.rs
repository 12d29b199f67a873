//! CSR objects for the certificate tests, made the way an agent makes them.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

use super::{AGENT_SERVING_SIGNER, NODE_NAME_EXTRA};

pub const AGENT: &str = "system:serviceaccount:kube-system:stevedore-agent";

/// A PEM request for `common_name` with these DNS names and IP addresses.
pub fn pem_request(common_name: &str, dns: &[&str], ips: &[&str]) -> (String, KeyPair) {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    for name in dns {
        params
            .subject_alt_names
            .push(SanType::DnsName((*name).try_into().expect("DNS name")));
    }
    for ip in ips {
        let ip: IpAddr = ip.parse().expect("IP");
        params.subject_alt_names.push(SanType::IpAddress(ip));
    }
    let pem = params
        .serialize_request(&key)
        .expect("request")
        .pem()
        .expect("PEM");
    (pem, key)
}

/// The CSR node-a's agent creates for itself (10.0.0.1), as the apiserver stores it.
pub fn node_a_csr() -> CertificateSigningRequest {
    let (pem, _) = pem_request("node-a", &["node-a"], &["10.0.0.1"]);
    csr_object(&pem, "node-a")
}

/// A CSR object carrying `pem`, made by the agent's service account bound to `node`.
pub fn csr_object(pem: &str, node: &str) -> CertificateSigningRequest {
    CertificateSigningRequest {
        metadata: kube::api::ObjectMeta {
            name: Some("agent-node-a".into()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(pem.as_bytes().to_vec()),
            signer_name: AGENT_SERVING_SIGNER.into(),
            username: Some(AGENT.into()),
            extra: Some(BTreeMap::from([(
                NODE_NAME_EXTRA.to_owned(),
                vec![node.to_owned()],
            )])),
            usages: Some(vec![
                "digital signature".into(),
                "key encipherment".into(),
                "server auth".into(),
            ]),
            ..Default::default()
        },
        status: None,
    }
}

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequestCondition, CertificateSigningRequestStatus,
};

use super::*;
use crate::certs::test_support::{AGENT, csr_object, node_a_csr, pem_request};

fn addresses(node: &str) -> Option<Vec<IpAddr>> {
    match node {
        "node-a" => Some(vec!["10.0.0.1".parse().expect("ip")]),
        "node-b" => Some(vec!["10.0.0.2".parse().expect("ip")]),
        _ => None,
    }
}

fn with_condition(mut csr: CertificateSigningRequest, type_: &str) -> CertificateSigningRequest {
    let status = csr.status.get_or_insert_with(Default::default);
    status
        .conditions
        .get_or_insert_with(Vec::new)
        .push(CertificateSigningRequestCondition {
            type_: type_.into(),
            status: "True".into(),
            ..Default::default()
        });
    csr
}

fn issued(csr: CertificateSigningRequest) -> CertificateSigningRequest {
    CertificateSigningRequest {
        status: Some(CertificateSigningRequestStatus {
            certificate: Some(ByteString(b"-----BEGIN CERTIFICATE-----".to_vec())),
            ..csr.status.clone().unwrap_or_default()
        }),
        ..csr
    }
}

/// A short name for a step, so the table reads as a table.
fn kind(step: &Step) -> String {
    match step {
        Step::Nothing => "nothing".into(),
        Step::Approve { node } => format!("approve {node}"),
        Step::Deny(reason) => format!("deny: {reason}"),
        Step::Sign(parsed) => format!("sign {}", parsed.request.common_name),
        Step::Fail(reason) => format!("fail: {reason}"),
    }
}

#[test]
fn next_step_table() {
    let other_ip = {
        let (pem, _) = pem_request("node-a", &["node-a"], &["10.0.0.2"]);
        csr_object(&pem, "node-a")
    };
    let garbage = {
        let mut csr = node_a_csr();
        csr.spec.request = ByteString(b"not a request".to_vec());
        csr
    };
    let other_signer = {
        let mut csr = node_a_csr();
        csr.spec.signer_name = "kubernetes.io/kubelet-serving".into();
        csr
    };
    let cases: Vec<(&str, CertificateSigningRequest, &str)> = vec![
        ("pending, own node", node_a_csr(), "approve node-a"),
        (
            "pending, another node's IP",
            other_ip.clone(),
            "deny: The IP address 10.0.0.2 is not an address of node node-a.",
        ),
        (
            "pending, unreadable",
            garbage.clone(),
            "deny: The PEM request",
        ),
        (
            "approved",
            with_condition(node_a_csr(), "Approved"),
            "sign node-a",
        ),
        (
            "approved by an administrator despite the rule",
            with_condition(other_ip.clone(), "Approved"),
            "sign node-a",
        ),
        (
            "approved but unreadable",
            with_condition(garbage, "Approved"),
            "fail: The PEM request",
        ),
        (
            "issued",
            issued(with_condition(node_a_csr(), "Approved")),
            "nothing",
        ),
        ("denied", with_condition(other_ip, "Denied"), "nothing"),
        (
            "failed",
            with_condition(with_condition(node_a_csr(), "Approved"), "Failed"),
            "nothing",
        ),
        ("another signer's", other_signer, "nothing"),
    ];
    for (name, csr, expected) in cases {
        let step = kind(&next_step(&csr, AGENT, addresses));
        assert!(step.starts_with(expected), "{name}: {step}");
    }
}

#[test]
fn the_requester_node_is_the_one_the_token_names() {
    let mut csr = node_a_csr();
    assert_eq!(requester_node(&csr), Some("node-a"));
    csr.spec.extra = Some(
        [(
            NODE_NAME_EXTRA.to_owned(),
            vec!["node-a".to_owned(), "node-b".to_owned()],
        )]
        .into(),
    );
    assert_eq!(requester_node(&csr), None);
    csr.spec.extra = None;
    assert_eq!(requester_node(&csr), None);
}

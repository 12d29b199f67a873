use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequestCondition, CertificateSigningRequestStatus,
};
use rcgen::CertificateSigningRequestParams;

use super::*;

fn settings() -> CsrSettings {
    CsrSettings {
        signer: "stevedore.dev/agent-serving".into(),
        node: "node-a".into(),
        addresses: vec![
            "10.0.0.1".parse().expect("ip"),
            "fd00::1".parse().expect("ip"),
        ],
        lifetime: Duration::from_secs(24 * 3600),
        poll: Duration::from_secs(1),
        wait: Duration::from_secs(10),
    }
}

#[test]
fn the_request_names_this_node_and_its_addresses_only() {
    let key = KeyPair::generate().expect("key");
    let settings = settings();
    let pem = pem_request(&key, &settings.node, &settings.addresses).expect("request");
    let parsed = CertificateSigningRequestParams::from_pem(&pem).expect("valid request");
    let common_name = parsed
        .params
        .distinguished_name
        .get(&DnType::CommonName)
        .expect("common name");
    assert_eq!(common_name, &rcgen::DnValue::Utf8String("node-a".into()));
    assert_eq!(
        parsed.params.subject_alt_names,
        [
            SanType::DnsName("node-a".try_into().expect("name")),
            SanType::IpAddress("10.0.0.1".parse().expect("ip")),
            SanType::IpAddress("fd00::1".parse().expect("ip")),
        ]
    );

    let object = csr_object(&settings, pem);
    assert_eq!(object.spec.signer_name, "stevedore.dev/agent-serving");
    assert_eq!(
        object.spec.usages.as_deref(),
        Some(&SERVING_USAGES.map(str::to_owned)[..])
    );
    assert_eq!(object.spec.expiration_seconds, Some(86_400));
    assert_eq!(
        object.metadata.generate_name.as_deref(),
        Some("stevedore-agent-node-a-")
    );
}

fn with_status(status: CertificateSigningRequestStatus) -> CertificateSigningRequest {
    CertificateSigningRequest {
        status: Some(status),
        ..Default::default()
    }
}

fn condition(type_: &str, message: &str) -> CertificateSigningRequestCondition {
    CertificateSigningRequestCondition {
        type_: type_.into(),
        status: "True".into(),
        message: Some(message.into()),
        ..Default::default()
    }
}

#[test]
fn answers_are_read_from_conditions_and_the_certificate() {
    let pending = with_status(CertificateSigningRequestStatus::default());
    assert!(answer("c", &pending).is_none());
    let approved = with_status(CertificateSigningRequestStatus {
        conditions: Some(vec![condition("Approved", "ok")]),
        ..Default::default()
    });
    assert!(answer("c", &approved).is_none(), "approved, not yet issued");

    let denied = with_status(CertificateSigningRequestStatus {
        conditions: Some(vec![condition(
            "Denied",
            "The IP address 10.0.0.2 is not ours.",
        )]),
        ..Default::default()
    });
    match answer("c", &denied) {
        Some(Err(CsrError::Denied { reason, .. })) => assert!(reason.contains("10.0.0.2")),
        other => panic!("{other:?}"),
    }
    let failed = with_status(CertificateSigningRequestStatus {
        conditions: Some(vec![
            condition("Approved", "ok"),
            condition("Failed", "bad"),
        ]),
        ..Default::default()
    });
    assert!(matches!(
        answer("c", &failed),
        Some(Err(CsrError::Failed { .. }))
    ));

    let issued = with_status(CertificateSigningRequestStatus {
        conditions: Some(vec![condition("Approved", "ok")]),
        certificate: Some(ByteString(b"PEM".to_vec())),
    });
    assert!(matches!(answer("c", &issued), Some(Ok(pem)) if pem == "PEM"));
}

#[test]
fn the_validity_is_read_from_the_certificate() {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(vec!["node-a".to_owned()]).expect("params");
    params.not_before = rcgen::date_time_ymd(2030, 1, 1);
    params.not_after = rcgen::date_time_ymd(2030, 1, 2);
    let pem = params.self_signed(&key).expect("cert").pem();
    let (not_before, not_after) = validity(&pem).expect("validity");
    assert_eq!(
        not_after.duration_since(not_before).expect("ordered"),
        Duration::from_secs(86_400)
    );
    assert_eq!(
        not_before
            .duration_since(UNIX_EPOCH)
            .expect("after epoch")
            .as_secs(),
        1_893_456_000
    );
}

use super::*;

const AGENT: &str = "system:serviceaccount:kube-system:stevedore-agent";

fn addresses(node: &str) -> Option<Vec<IpAddr>> {
    match node {
        "node-a" => Some(vec!["10.0.0.1".parse().expect("ip")]),
        "node-b" => Some(vec!["10.0.0.2".parse().expect("ip")]),
        _ => None,
    }
}

/// A request node-a's agent would make for itself.
fn from_node_a() -> CertificateRequest {
    CertificateRequest {
        signer: AGENT_SERVING_SIGNER.into(),
        username: AGENT.into(),
        extra: [(NODE_NAME_EXTRA.to_owned(), vec!["node-a".to_owned()])].into(),
        usages: vec![
            "digital signature".into(),
            "key encipherment".into(),
            "server auth".into(),
        ],
        common_name: "node-a".into(),
        dns_names: vec!["node-a".into()],
        ip_addresses: vec!["10.0.0.1".parse().expect("ip")],
    }
}

#[test]
fn approval_table() {
    type Edit = fn(&mut CertificateRequest);
    let cases: [(&str, Edit, Option<&str>); 13] = [
        ("right node", |_| {}, None),
        ("IP only", |r| r.dns_names.clear(), None),
        (
            "other node's IP",
            |r| r.ip_addresses = vec!["10.0.0.2".parse().expect("ip")],
            Some("10.0.0.2"),
        ),
        (
            "other node's name",
            |r| r.dns_names.push("node-b".into()),
            Some("node-b"),
        ),
        (
            "common name of another node",
            |r| r.common_name = "node-b".into(),
            Some("common name"),
        ),
        (
            "wrong requester",
            |r| r.username = "system:serviceaccount:default:default".into(),
            Some("not by the agent"),
        ),
        (
            "token bound to no node",
            |r| r.extra.clear(),
            Some("no single node"),
        ),
        (
            "token naming two nodes",
            |r| {
                r.extra.insert(
                    NODE_NAME_EXTRA.into(),
                    vec!["node-a".into(), "node-b".into()],
                );
            },
            Some("no single node"),
        ),
        (
            "client auth usage",
            |r| r.usages.push("client auth".into()),
            Some("client auth"),
        ),
        (
            "no server auth",
            |r| r.usages = vec!["digital signature".into()],
            Some("server auth"),
        ),
        (
            "node not known",
            |r| {
                r.extra
                    .insert(NODE_NAME_EXTRA.into(), vec!["node-x".into()]);
                r.common_name = "node-x".into();
                r.dns_names = vec!["node-x".into()];
            },
            Some("no Node node-x"),
        ),
        (
            "no SAN",
            |r| {
                r.dns_names.clear();
                r.ip_addresses.clear();
            },
            Some("no DNS name"),
        ),
        (
            "wildcard name",
            |r| r.dns_names = vec!["*.cluster".into()],
            Some("*.cluster"),
        ),
    ];
    for (name, edit, denial) in cases {
        let mut request = from_node_a();
        edit(&mut request);
        let verdict = decide(&request, AGENT, addresses);
        match denial {
            None => assert_eq!(
                verdict,
                Verdict::Approve {
                    node: "node-a".into()
                },
                "{name}"
            ),
            Some(part) => match verdict {
                Verdict::Deny(reason) => assert!(reason.contains(part), "{name}: {reason}"),
                other => panic!("{name}: {other:?}"),
            },
        }
    }
}

#[test]
fn other_signers_are_left_alone() {
    let request = CertificateRequest {
        signer: "kubernetes.io/kubelet-serving".into(),
        ..from_node_a()
    };
    assert_eq!(decide(&request, AGENT, addresses), Verdict::NotOurs);
}

//! Where a node's agent listens: the Node's InternalIP and the agent port. Part of the
//! API because both the control plane and the kubectl plugin call the agents.

use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::Node;

/// Why a Node gives no address for its agent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeAddressError {
    /// The Node reports no InternalIP yet, so there is nowhere to call.
    #[error("node {node} has no InternalIP in .status.addresses")]
    NoInternalIp { node: String },

    /// The Node's InternalIP is not an IP address.
    #[error("node {node} has an InternalIP {address:?} that is not an IP address")]
    InvalidInternalIp { node: String, address: String },

    /// The port override annotation on the Node is not a port number.
    #[error("node {node} has annotation {annotation}={value:?}, which is not a port (1-65535)")]
    InvalidPortAnnotation {
        node: String,
        annotation: &'static str,
        value: String,
    },
}

impl NodeAddressError {
    /// Whether waiting can fix it: a Node without an InternalIP is usually still joining,
    /// while a malformed address or annotation stays wrong until someone changes it.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::NoInternalIp { .. })
    }
}

/// Node annotation that overrides the agent port for that one node.
///
/// The agent runs with `hostNetwork: true`, so normally every node's agent listens on
/// the same port (`--agent-port`). Simulated nodes (kwok) share one IP, and each needs
/// its own agent process; each such Node carries this annotation with the port its
/// agent listens on, e.g. `agent.stevedore.dev/port: "10361"`.
pub const AGENT_PORT_ANNOTATION: &str = "agent.stevedore.dev/port";

/// The address of `node`'s agent: its InternalIP and `default_port`, or the port in the
/// [`AGENT_PORT_ANNOTATION`] when the Node has one.
///
/// The InternalIP, not a host name, because the agent's serving certificate carries the
/// node IP as a SAN and the control plane must not depend on node DNS.
pub fn node_agent_address(node: &Node, default_port: u16) -> Result<SocketAddr, NodeAddressError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let internal_ip = node
        .status
        .as_ref()
        .and_then(|status| status.addresses.as_ref())
        .and_then(|addresses| addresses.iter().find(|a| a.type_ == "InternalIP"))
        .ok_or_else(|| NodeAddressError::NoInternalIp { node: name.clone() })?;
    let ip: IpAddr =
        internal_ip
            .address
            .trim()
            .parse()
            .map_err(|_| NodeAddressError::InvalidInternalIp {
                node: name.clone(),
                address: internal_ip.address.clone(),
            })?;
    let port = match node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(AGENT_PORT_ANNOTATION))
    {
        None => default_port,
        Some(value) => value
            .trim()
            .parse::<u16>()
            .ok()
            .filter(|port| *port != 0)
            .ok_or_else(|| NodeAddressError::InvalidPortAnnotation {
                node: name,
                annotation: AGENT_PORT_ANNOTATION,
                value: value.clone(),
            })?,
    };
    Ok(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeAddress, NodeStatus};
    use kube::api::ObjectMeta;

    use super::*;

    fn node(addresses: &[(&str, &str)], port_annotation: Option<&str>) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("node-a".into()),
                annotations: port_annotation
                    .map(|p| [(AGENT_PORT_ANNOTATION.to_owned(), p.to_owned())].into()),
                ..ObjectMeta::default()
            },
            status: Some(NodeStatus {
                addresses: Some(
                    addresses
                        .iter()
                        .map(|(type_, address)| NodeAddress {
                            type_: (*type_).into(),
                            address: (*address).into(),
                        })
                        .collect(),
                ),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    /// Node addresses (type, address), port annotation, expected agent address.
    type Case = (
        &'static [(&'static str, &'static str)],
        Option<&'static str>,
        &'static str,
    );

    #[test]
    fn picks_the_internal_ip_and_port() {
        let cases: &[Case] = &[
            (&[("InternalIP", "10.0.0.7")], None, "10.0.0.7:10350"),
            (
                &[
                    ("Hostname", "node-a"),
                    ("ExternalIP", "203.0.113.9"),
                    ("InternalIP", "10.0.0.7"),
                ],
                None,
                "10.0.0.7:10350",
            ),
            (&[("InternalIP", "fd00::7")], None, "[fd00::7]:10350"),
            (
                &[("InternalIP", "10.0.0.7")],
                Some("10361"),
                "10.0.0.7:10361",
            ),
            (
                &[("InternalIP", "10.0.0.7")],
                Some(" 10361 "),
                "10.0.0.7:10361",
            ),
        ];
        for (addresses, annotation, want) in cases {
            let got = node_agent_address(&node(addresses, *annotation), 10350)
                .unwrap_or_else(|e| panic!("{addresses:?} {annotation:?}: {e}"));
            assert_eq!(got.to_string(), *want);
        }
    }

    #[test]
    fn missing_internal_ip_names_the_node_and_is_transient() {
        for n in [
            node(&[("ExternalIP", "203.0.113.9")], None),
            Node {
                metadata: ObjectMeta {
                    name: Some("node-a".into()),
                    ..ObjectMeta::default()
                },
                ..Node::default()
            },
        ] {
            let err = node_agent_address(&n, 10350).expect_err("no InternalIP");
            assert!(
                matches!(err, NodeAddressError::NoInternalIp { .. }),
                "{err:?}"
            );
            assert!(err.to_string().contains("node-a"), "{err}");
            assert!(err.is_transient());
        }
    }

    #[test]
    fn malformed_address_or_port_is_an_error_not_a_guess() {
        let bad_ip = node(&[("InternalIP", "node-a.local")], None);
        let err = node_agent_address(&bad_ip, 10350).expect_err("not an IP");
        assert!(
            matches!(err, NodeAddressError::InvalidInternalIp { .. }),
            "{err:?}"
        );

        for port in ["0", "65536", "http", ""] {
            let err = node_agent_address(&node(&[("InternalIP", "10.0.0.7")], Some(port)), 10350)
                .expect_err(port);
            assert!(
                matches!(err, NodeAddressError::InvalidPortAnnotation { .. }),
                "{port}: {err:?}"
            );
            assert!(err.to_string().contains(AGENT_PORT_ANNOTATION), "{err}");
            assert!(!err.is_transient());
        }
    }
}

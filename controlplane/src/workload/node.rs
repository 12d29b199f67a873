//! What a Node says about itself that controllers act on. Readiness is decided here once,
//! for every caller: the ImageList distributor (which nodes get a list), ImagePullJob node
//! selection and its triggers (which nodes a job pulls on).

use k8s_openapi::api::core::v1::Node;

/// Whether `node` reports a `Ready` condition with status `True`. No status, no
/// conditions, `False` and `Unknown` (the node controller's verdict on a silent kubelet)
/// all count as not ready.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|condition| condition.type_ == "Ready" && condition.status == "True")
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};

    use super::*;

    fn node(conditions: Option<&[(&str, &str)]>) -> Node {
        Node {
            status: Some(NodeStatus {
                conditions: conditions.map(|cs| {
                    cs.iter()
                        .map(|(type_, status)| NodeCondition {
                            type_: (*type_).to_owned(),
                            status: (*status).to_owned(),
                            ..NodeCondition::default()
                        })
                        .collect()
                }),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    #[test]
    fn ready_only_with_a_ready_condition_that_is_true() {
        let cases: [(&str, Node, bool); 8] = [
            ("no status", Node::default(), false),
            ("no conditions", node(None), false),
            ("empty conditions", node(Some(&[])), false),
            ("Ready True", node(Some(&[("Ready", "True")])), true),
            ("Ready False", node(Some(&[("Ready", "False")])), false),
            ("Ready Unknown", node(Some(&[("Ready", "Unknown")])), false),
            (
                "other conditions True, no Ready",
                node(Some(&[
                    ("MemoryPressure", "True"),
                    ("DiskPressure", "True"),
                ])),
                false,
            ),
            (
                "Ready True among others",
                node(Some(&[("MemoryPressure", "False"), ("Ready", "True")])),
                true,
            ),
        ];
        for (name, node, ready) in cases {
            assert_eq!(is_ready(&node), ready, "{name}");
        }
    }
}

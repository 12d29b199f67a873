//! Pods that belong to one node (a DaemonSet's, a BroadcastJob's) are pinned to it by
//! required node affinity (`matchFields metadata.name`), as the native DaemonSet
//! controller pins them, never by `spec.nodeName`: the scheduler still binds them and
//! checks the node's resources. Here: the pin, and the node a pod is pinned to.

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
};

const NAME_FIELD: &str = "metadata.name";

/// Adds `metadata.name In [node]` to every required node selector term (or makes the one
/// term), so the template's own affinity still applies and the pod can run only there.
pub fn pin(affinity: &mut Option<Affinity>, node: &str) {
    let requirement = NodeSelectorRequirement {
        key: NAME_FIELD.to_owned(),
        operator: "In".to_owned(),
        values: Some(vec![node.to_owned()]),
    };
    let required = affinity
        .get_or_insert_with(Affinity::default)
        .node_affinity
        .get_or_insert_with(NodeAffinity::default)
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(NodeSelector::default);
    if required.node_selector_terms.is_empty() {
        required
            .node_selector_terms
            .push(NodeSelectorTerm::default());
    }
    for term in &mut required.node_selector_terms {
        let fields = term.match_fields.get_or_insert_with(Vec::new);
        fields.retain(|r| r.key != NAME_FIELD);
        fields.push(requirement.clone());
    }
}

/// The node a pod runs on or is pinned to (before the scheduler binds it).
pub fn pinned_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(node) = spec.node_name.clone().filter(|n| !n.is_empty()) {
        return Some(node);
    }
    spec.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms
        .iter()
        .flat_map(|term| term.match_fields.iter().flatten())
        .find(|r| r.key == NAME_FIELD && r.operator == "In")
        .and_then(|r| r.values.as_ref()?.first().cloned())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSpec;

    use super::*;

    #[test]
    fn the_pin_is_anded_with_every_term_of_the_template() {
        let mut spec = PodSpec::default();
        pin(&mut spec.affinity, "old");
        let mut two_terms = spec.clone();
        let required = two_terms
            .affinity
            .as_mut()
            .and_then(|a| a.node_affinity.as_mut())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_mut()
            })
            .expect("required affinity");
        required
            .node_selector_terms
            .push(NodeSelectorTerm::default());
        pin(&mut two_terms.affinity, "n1");
        let terms = two_terms
            .affinity
            .and_then(|a| a.node_affinity)
            .and_then(|a| a.required_during_scheduling_ignored_during_execution)
            .expect("required affinity")
            .node_selector_terms;
        assert_eq!(terms.len(), 2);
        for term in terms {
            let fields = term.match_fields.unwrap_or_default();
            assert_eq!(fields.len(), 1, "the old pin is replaced");
            assert_eq!(fields[0].values, Some(vec!["n1".to_owned()]));
        }
    }

    #[test]
    fn a_bound_pod_is_on_its_node() {
        let pod = Pod {
            spec: Some(PodSpec {
                node_name: Some("n7".to_owned()),
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        assert_eq!(pinned_node(&pod).as_deref(), Some("n7"));
        assert_eq!(pinned_node(&Pod::default()), None);
    }
}

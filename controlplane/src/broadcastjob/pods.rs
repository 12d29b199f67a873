//! A BroadcastJob's pods: built from the template and pinned to one node by required node
//! affinity (`matchFields metadata.name`, as the native DaemonSet controller pins its pods,
//! so the scheduler still checks the node's resources), and read back: the node a pod is
//! pinned to, and its restart count.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource as _;

use crate::api::BroadcastJob;

/// The label naming the job a pod belongs to (OpenKruise's).
pub const JOB_NAME_LABEL: &str = "broadcastjob-name";
/// The label carrying the job's UID (OpenKruise's).
pub const JOB_UID_LABEL: &str = "broadcastjob-controller-uid";
const NAME_FIELD: &str = "metadata.name";

/// The pod of `job` for `node`; `None` when the job has no name or UID yet.
pub fn new_pod(job: &BroadcastJob, node: &str) -> Option<Pod> {
    let name = job.metadata.name.clone()?;
    let uid = job.metadata.uid.clone()?;
    let template = &job.spec.template;
    let mut labels: BTreeMap<String, String> = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(JOB_NAME_LABEL.to_owned(), name.clone());
    labels.insert(JOB_UID_LABEL.to_owned(), uid.clone());
    let generate_name = format!("{name}-");
    let mut spec = template.spec.clone().unwrap_or_default();
    pin(&mut spec.affinity, node);
    Some(Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name),
            namespace: job.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.clone()),
            owner_references: Some(vec![owner_reference(name.clone(), uid)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    })
}

fn owner_reference(name: String, uid: String) -> OwnerReference {
    OwnerReference {
        api_version: BroadcastJob::api_version(&()).into_owned(),
        kind: BroadcastJob::kind(&()).into_owned(),
        name,
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Adds `metadata.name In [node]` to every required node selector term (or makes the one
/// term), so the template's own affinity still applies and the pod can run only there.
fn pin(affinity: &mut Option<Affinity>, node: &str) {
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

/// The sum of the restart counts of the pod's containers.
pub fn restart_count(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|c| c.restart_count)
        .fold(0, i32::saturating_add)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ContainerStatus, PodSpec, PodStatus, PodTemplateSpec};

    use super::*;
    use crate::api::BroadcastJobSpec;
    use crate::workload::node_eval;

    fn job(spec: PodSpec) -> BroadcastJob {
        let mut job = BroadcastJob::new(
            "upgrade",
            BroadcastJobSpec {
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("app".to_owned(), "up".to_owned())].into()),
                        ..ObjectMeta::default()
                    }),
                    spec: Some(spec),
                },
                ..BroadcastJobSpec::default()
            },
        );
        job.metadata.namespace = Some("ops".to_owned());
        job.metadata.uid = Some("uid-1".to_owned());
        job
    }

    fn named_node(name: &str) -> k8s_openapi::api::core::v1::Node {
        k8s_openapi::api::core::v1::Node {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_new_pod_is_pinned_owned_and_labelled() {
        let pod = new_pod(&job(PodSpec::default()), "n1").expect("a pod");
        assert_eq!(pinned_node(&pod).as_deref(), Some("n1"));
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("upgrade-"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("ops"));
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("app").map(String::as_str), Some("up"));
        assert_eq!(
            labels.get(JOB_NAME_LABEL).map(String::as_str),
            Some("upgrade")
        );
        let owner = pod
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.first());
        assert_eq!(
            owner.map(|o| (o.kind.as_str(), o.uid.as_str(), o.controller)),
            Some(("BroadcastJob", "uid-1", Some(true)))
        );
        let spec = pod.spec.as_ref().expect("a spec");
        assert!(node_eval::evaluate(spec, &named_node("n1")).should_run);
        assert!(!node_eval::evaluate(spec, &named_node("n2")).should_run);
    }

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
        let pod = new_pod(&job(two_terms), "n1").expect("a pod");
        let terms = pod
            .spec
            .and_then(|s| s.affinity)
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
    fn restart_count_sums_the_containers() {
        let status = |counts: &[i32]| Pod {
            status: Some(PodStatus {
                container_statuses: Some(
                    counts
                        .iter()
                        .map(|c| ContainerStatus {
                            restart_count: *c,
                            ..ContainerStatus::default()
                        })
                        .collect(),
                ),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        assert_eq!(restart_count(&Pod::default()), 0);
        assert_eq!(restart_count(&status(&[2, 3])), 5);
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

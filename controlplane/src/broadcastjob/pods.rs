//! A BroadcastJob's pods: built from the template and pinned to one node by required node
//! affinity (`matchFields metadata.name`, as the native DaemonSet controller pins its pods,
//! so the scheduler still checks the node's resources), and read back: the node a pod is
//! pinned to, and its restart count.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource as _;

use crate::api::BroadcastJob;
use crate::workload::node_pin::pin;
pub use crate::workload::node_pin::pinned_node;

/// The label naming the job a pod belongs to (OpenKruise's).
pub const JOB_NAME_LABEL: &str = "broadcastjob-name";
/// The label carrying the job's UID (OpenKruise's).
pub const JOB_UID_LABEL: &str = "broadcastjob-controller-uid";

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
}

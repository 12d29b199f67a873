//! Which BroadcastJobs a change concerns: the job itself; for a pod, its controlling job
//! (`workload::triggers::owner_keys`; a job adopts nothing); for a node, every job still
//! placing pods — and only when what node evaluation reads changed (labels, taints,
//! unschedulable, the node coming or going), not on every heartbeat.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::runtime::reflector::Store;

use crate::api::BroadcastJob;
use crate::api::common::CompletionPolicyType;
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::Triggers;
use crate::workload::node_changes::SeenNodes;
use crate::workload::triggers::owner_keys;

/// A BroadcastJob has no selector: its pods are found by controller reference only.
const NO_SELECTOR: LabelSelector = LabelSelector {
    match_expressions: None,
    match_labels: None,
};

/// Whether a job still places pods on nodes (a finished Always job does not).
fn placing(job: &BroadcastJob) -> bool {
    job.spec.completion_policy.policy_type() == CompletionPolicyType::Never
        || job
            .status
            .as_ref()
            .is_none_or(|s| s.completion_time.is_none())
}

/// The jobs a node's change may concern.
pub fn keys_for_node(jobs: &[Arc<BroadcastJob>]) -> Vec<ObjectKey> {
    jobs.iter()
        .filter(|job| placing(job))
        .map(|job| ObjectKey::of(job.as_ref()))
        .collect()
}

/// What the BroadcastJob controller listens to: its jobs, their pods (by controller
/// reference only), and nodes (only a change of what node evaluation reads).
pub fn watches(
    changes: &Changes,
    jobs: &Store<BroadcastJob>,
    nodes: Store<Node>,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    let placing_jobs = jobs.clone();
    let mut seen_nodes = SeenNodes::default();
    Triggers::of(jobs, queue)
        .watch_own(&changes.broadcastjobs)
        .watch(&changes.pods, |pod| {
            owner_keys::<BroadcastJob>(&pod.metadata, &[], |_| &NO_SELECTOR, false)
        })
        .watch(&changes.nodes, move |node| {
            if !seen_nodes.changed(&nodes, node) {
                return Vec::new();
            }
            keys_for_node(&placing_jobs.state())
        })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::api::broadcastjob::{BroadcastJobSpec, BroadcastJobStatus};
    use crate::api::common::CompletionPolicy;

    fn job(name: &str, never: bool, finished: bool) -> Arc<BroadcastJob> {
        let mut spec = BroadcastJobSpec::default();
        if never {
            spec.completion_policy = CompletionPolicy {
                type_: Some(CompletionPolicyType::Never),
                ..CompletionPolicy::default()
            };
        }
        let mut job = BroadcastJob::new(name, spec);
        job.metadata.namespace = Some("ns".to_owned());
        job.status = Some(BroadcastJobStatus {
            completion_time: finished.then_some(Time(Timestamp::UNIX_EPOCH)),
            ..BroadcastJobStatus::default()
        });
        Arc::new(job)
    }

    #[test]
    fn a_node_change_concerns_the_jobs_still_placing_pods() {
        let jobs = [
            job("running", false, false),
            job("done", false, true),
            job("never", true, false),
        ];
        let names: Vec<String> = keys_for_node(&jobs).into_iter().map(|k| k.name).collect();
        assert_eq!(names, ["running", "never"]);
    }

    #[test]
    fn a_pod_concerns_its_controlling_job_only() {
        let owned = ObjectMeta {
            namespace: Some("ns".to_owned()),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps.kruise.io/v1alpha1".to_owned(),
                kind: "BroadcastJob".to_owned(),
                name: "upgrade".to_owned(),
                uid: "u".to_owned(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        };
        let keys = owner_keys::<BroadcastJob>(&owned, &[], |_| &NO_SELECTOR, false);
        assert_eq!(
            keys,
            [ObjectKey::new("ns".to_owned(), "upgrade".to_owned())]
        );
        let orphan = ObjectMeta {
            namespace: Some("ns".to_owned()),
            ..ObjectMeta::default()
        };
        let jobs = [job("upgrade", false, false)];
        assert!(owner_keys::<BroadcastJob>(&orphan, &jobs, |_| &NO_SELECTOR, false).is_empty());
    }
}

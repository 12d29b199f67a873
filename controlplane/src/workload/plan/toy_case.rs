//! One sync's input for the toy workload, built case by case: pods named `toy-<id>` on
//! their own node, Running and Ready since `ts(0)`, claims named `data-<pod>`, a rollout
//! from OLD (`toy:v1`) to NEW (`toy:v2`) planned at `ts(1000)` — and the readers the rule
//! tables check a plan with.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::toy_tests::{Toy, V1, V2, plan_snapshot, template, toy, ts};
use super::{PlanError, PodSetSnapshot};
use crate::api::common::{LifecycleHook, PodUpdatePolicy};
use crate::workload::actions::{Delete, DeleteReason, Plan, PodChange};
use crate::workload::lifecycle;
use crate::workload::revision_adapter::RevisionAdapter;
pub(super) use crate::workload::test_pods::PodBuilder;
use crate::workload::test_pods::{new_pod, run_on};

pub(super) const OLD: &str = V1;
pub(super) const NEW: &str = V2;
pub(super) const OLD_IMAGE: &str = "toy:v1";
pub(super) const NEW_IMAGE: &str = "toy:v2";

/// When every case plans.
pub(super) fn now() -> Timestamp {
    ts(1_000)
}

/// A toy of `replicas` pods with the defaults of the kinds: ReCreate, maxUnavailable 20%.
pub(super) fn set(replicas: i32) -> Toy {
    let mut toy = toy(replicas, PodUpdatePolicy::ReCreate);
    toy.max_unavailable = None;
    toy
}

/// [`set`] updating by `policy`.
pub(super) fn set_with(replicas: i32, policy: PodUpdatePolicy) -> Toy {
    Toy {
        policy,
        ..set(replicas)
    }
}

pub(super) fn hook(labels: &[(&str, &str)], mark_pod_not_ready: bool) -> LifecycleHook {
    LifecycleHook {
        labels_handler: (labels.iter())
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        finalizers_handler: Vec::new(),
        mark_pod_not_ready,
    }
}

/// The pod `name` (`toy-<id>`) at `revision`, labelled by its short hash as the toy labels
/// its pods, running on `node-<id>`.
pub(super) fn pod(name: &str, revision: &str) -> PodBuilder {
    let id = name.strip_prefix("toy-").unwrap_or(name);
    let image = if revision == OLD {
        OLD_IMAGE
    } else {
        NEW_IMAGE
    };
    let mut labels = BTreeMap::from([("app".to_owned(), "toy".to_owned())]);
    labels.extend(RevisionAdapter::ShortHash.pod_labels(revision));
    let pod = new_pod(name, labels, template(image, None).spec);
    PodBuilder(run_on(pod, &format!("node-{id}")))
}

/// `n` pods `toy-p0`, `toy-p1`, ... at `revision`.
pub(super) fn names(n: usize, revision: &str) -> Vec<PodBuilder> {
    (0..n)
        .map(|i| pod(&format!("toy-p{i}"), revision))
        .collect()
}

/// The claim `name`, which the pod it names (`data-<pod>`) owns.
pub(super) fn claim(name: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            ..ObjectMeta::default()
        },
        spec: None,
        status: None,
    }
}

/// One sync's input.
pub(super) struct Case {
    toy: Toy,
    pods: Vec<Pod>,
    claims: Vec<PersistentVolumeClaim>,
    revisions: BTreeMap<String, PodTemplateSpec>,
    current: &'static str,
    named_for_deletion: BTreeSet<String>,
}

impl Case {
    /// A rollout from OLD to NEW.
    pub(super) fn new(toy: Toy) -> Self {
        Self {
            toy,
            pods: Vec::new(),
            claims: Vec::new(),
            revisions: BTreeMap::from([
                (OLD.to_owned(), template(OLD_IMAGE, None)),
                (NEW.to_owned(), template(NEW_IMAGE, None)),
            ]),
            current: OLD,
            named_for_deletion: BTreeSet::new(),
        }
    }

    /// No rollout: current and update revision are both NEW.
    pub(super) fn settled(toy: Toy) -> Self {
        Self {
            current: NEW,
            ..Self::new(toy)
        }
    }

    pub(super) fn pods(mut self, pods: Vec<PodBuilder>) -> Self {
        self.pods = pods.into_iter().map(|p| p.0).collect();
        self
    }

    pub(super) fn claims(mut self, claims: Vec<PersistentVolumeClaim>) -> Self {
        self.claims = claims;
        self
    }

    /// Pods the workload asks to delete by name (CloneSet's `podsToDelete`).
    pub(super) fn named_for_deletion(mut self, names: &[&str]) -> Self {
        self.named_for_deletion = names.iter().map(|n| (*n).to_owned()).collect();
        self
    }

    pub(super) fn new_revision(mut self, template: PodTemplateSpec) -> Self {
        self.revisions.insert(NEW.to_owned(), template);
        self
    }

    pub(super) fn try_plan(&self) -> Result<Plan, PlanError> {
        plan_snapshot(&PodSetSnapshot {
            workload: &self.toy,
            pods: self.pods.iter().collect(),
            claims: self.claims.iter().collect(),
            update_revision: NEW,
            current_revision: self.current,
            revisions: &self.revisions,
            named_for_deletion: &self.named_for_deletion,
            now: now(),
        })
    }

    pub(super) fn plan(&self) -> Plan {
        self.try_plan().expect("plan")
    }
}

pub(super) fn deleted(plan: &Plan) -> Vec<(&str, DeleteReason)> {
    (plan.deletes.iter())
        .map(|d| (d.pod.as_str(), d.reason))
        .collect()
}

/// The pods deleted, by name, sorted.
pub(super) fn deleted_sorted(plan: &Plan) -> Vec<&str> {
    let mut pods: Vec<&str> = plan.deletes.iter().map(|d| d.pod.as_str()).collect();
    pods.sort_unstable();
    pods
}

pub(super) fn changed(plan: &Plan) -> Vec<&str> {
    plan.pod_changes.iter().map(|c| c.pod.as_str()).collect()
}

pub(super) fn change<'p>(plan: &'p Plan, pod: &str) -> &'p PodChange {
    (plan.pod_changes.iter())
        .find(|c| c.pod == pod)
        .unwrap_or_else(|| panic!("no change for {pod} in {plan:#?}"))
}

pub(super) fn patch(change: &PodChange) -> &Value {
    change.patch.as_ref().expect("a patch")
}

pub(super) fn patch_label<'v>(change: &'v PodChange, key: &str) -> Option<&'v Value> {
    patch(change).get("metadata")?.get("labels")?.get(key)
}

pub(super) fn patch_annotation<'v>(change: &'v PodChange, key: &str) -> Option<&'v Value> {
    patch(change).get("metadata")?.get("annotations")?.get(key)
}

/// The lifecycle state `pod`'s change writes, if any.
pub(super) fn state_written<'p>(plan: &'p Plan, pod: &str) -> Option<&'p str> {
    (plan.pod_changes.iter())
        .find(|c| c.pod == pod)
        .and_then(|c| patch_label(c, lifecycle::STATE_LABEL))
        .and_then(Value::as_str)
}

pub(super) fn conditions(change: &PodChange) -> Vec<(&str, bool, &str)> {
    (change.conditions.iter())
        .map(|c| (c.condition_type, c.status, c.reason))
        .collect()
}

pub(super) fn is_quiet(plan: &Plan) -> bool {
    plan.creates.is_empty() && plan.deletes.is_empty() && plan.pod_changes.is_empty()
}

/// The deletes without their free-text detail, for exact comparison.
pub(super) fn without_detail(deletes: &[Delete]) -> Vec<Delete> {
    (deletes.iter())
        .map(|d| Delete {
            detail: String::new(),
            ..d.clone()
        })
        .collect()
}

//! A workload that is not a CloneSet — no instance ids, no claims, short revision hashes —
//! run through the shared planning: it creates, scales down by ranking, updates in place
//! (start, then completion once the kubelet restarted the container) and recreates.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Container, EnvVar, PersistentVolumeClaim, Pod, PodReadinessGate, PodSpec, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{PlanError, PodSet, PodSetSnapshot};
use crate::api::common::{Lifecycle, LifecycleHook, PodUpdatePolicy};
use crate::workload::actions::{ChangeReason, Create, DeleteReason, Plan};
use crate::workload::adapter::{PodSetWorkload, UpdateStrategyType, new_pod_and_claims};
use crate::workload::inplace::{
    INPLACE_UPDATE_READY, REASON_DONE, STATE_ANNOTATION, update_in_progress,
};
use crate::workload::revision_adapter::{
    CONTROLLER_REVISION_HASH_LABEL, POD_TEMPLATE_HASH_LABEL, RevisionAdapter,
};
use crate::workload::rollout::RolloutParams;
pub(super) use crate::workload::test_pods::at as ts;
use crate::workload::test_pods::{container_running, run_on};

pub(super) const V1: &str = "toy-aaa111";
pub(super) const V2: &str = "toy-bbb222";

/// The toy: a fixed number of pods named `toy-<n>`, revisions that are just templates.
pub(super) struct Toy {
    pub(super) replicas: i32,
    pub(super) policy: PodUpdatePolicy,
    pub(super) strategy: UpdateStrategyType,
    pub(super) partition: Option<IntOrString>,
    pub(super) max_surge: Option<IntOrString>,
    pub(super) max_unavailable: Option<IntOrString>,
    pub(super) paused: bool,
    pub(super) selector: LabelSelector,
    pub(super) lifecycle: Option<Lifecycle>,
    pub(super) min_ready_seconds: i32,
    pub(super) in_place_grace_seconds: i32,
    pub(super) scale_max_unavailable: Option<IntOrString>,
    /// How its pods name their revision (the toy's own: the short hash).
    pub(super) revision_labels: RevisionAdapter,
}

impl PodSetWorkload for Toy {
    type Revision = PodTemplateSpec;

    fn selector(&self) -> &LabelSelector {
        &self.selector
    }

    fn owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: "example.dev/v1".to_owned(),
            kind: "Toy".to_owned(),
            name: "toy".to_owned(),
            uid: "toy-uid".to_owned(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn update_policy(&self) -> PodUpdatePolicy {
        self.policy
    }

    fn update_strategy_type(&self) -> UpdateStrategyType {
        self.strategy
    }

    fn lifecycle(&self) -> Option<&Lifecycle> {
        self.lifecycle.as_ref()
    }

    fn in_place_grace_seconds(&self) -> i32 {
        self.in_place_grace_seconds
    }

    fn min_ready_seconds(&self) -> i32 {
        self.min_ready_seconds
    }

    fn revision_adapter(&self) -> RevisionAdapter {
        self.revision_labels
    }

    fn rollout_params(&self, current: &str, update: &str) -> RolloutParams {
        RolloutParams {
            replicas: self.replicas,
            max_unavailable: self.max_unavailable.clone(),
            paused: self.paused,
            partition: self.partition.clone(),
            max_surge: self.max_surge.clone(),
            scale_max_unavailable: self.scale_max_unavailable.clone(),
            revisions_consistent: current == update,
            ..RolloutParams::default()
        }
    }

    fn template<'r>(&self, revision: &'r PodTemplateSpec) -> &'r PodTemplateSpec {
        revision
    }

    fn new_pod(&self, create: &Create, revision: &PodTemplateSpec) -> Pod {
        let mut labels = self.selector.match_labels.clone().unwrap_or_default();
        labels.extend(self.revision_adapter().pod_labels(&create.revision));
        let mut spec = revision.spec.clone().unwrap_or_default();
        spec.readiness_gates = Some(
            self.readiness_gates()
                .into_iter()
                .map(|gate| PodReadinessGate {
                    condition_type: gate.to_owned(),
                })
                .collect(),
        );
        Pod {
            metadata: ObjectMeta {
                name: Some(format!("toy-{}", create.instance_id)),
                labels: Some(labels),
                owner_references: Some(vec![self.owner_reference()]),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
            status: None,
        }
    }

    /// A pod `toy-x` owns the claim `data-toy-x`, which goes with it.
    fn claims_of(&self, pod: &Pod, claims: &[&PersistentVolumeClaim]) -> Vec<String> {
        let own = format!("data-{}", pod.metadata.name.as_deref().unwrap_or_default());
        (claims.iter())
            .filter_map(|claim| claim.metadata.name.clone())
            .filter(|name| *name == own)
            .collect()
    }
}

pub(super) fn toy(replicas: i32, policy: PodUpdatePolicy) -> Toy {
    Toy {
        replicas,
        policy,
        strategy: UpdateStrategyType::RollingUpdate,
        partition: None,
        max_surge: None,
        max_unavailable: Some(IntOrString::Int(1)),
        paused: false,
        selector: LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_owned(), "toy".to_owned())])),
            ..LabelSelector::default()
        },
        lifecycle: None,
        min_ready_seconds: 0,
        in_place_grace_seconds: 0,
        scale_max_unavailable: None,
        revision_labels: RevisionAdapter::ShortHash,
    }
}

pub(super) fn template(image: &str, env: Option<&str>) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: None,
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".to_owned(),
                image: Some(image.to_owned()),
                env: env.map(|value| {
                    vec![EnvVar {
                        name: "MODE".to_owned(),
                        value: Some(value.to_owned()),
                        value_from: None,
                    }]
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    }
}

/// A pod of `toy` at `revision` as the kubelet runs it: scheduled, Running, Ready since
/// `ts(0)`, its readiness gates True.
pub(super) fn running_pod(toy: &Toy, n: usize, revision: &str, image: &str) -> Pod {
    let create = Create {
        instance_id: n.to_string(),
        revision: revision.to_owned(),
    };
    let mut pod = toy.new_pod(&create, &template(image, None));
    pod.metadata.uid = Some(format!("uid-{n}"));
    pod.metadata.creation_timestamp = Some(Time(ts(i64::try_from(n).unwrap())));
    run_on(pod, &format!("node-{n}"))
}

/// One sync of `toy` over `pods`, naming new pods `toy-new-<i>`.
pub(super) fn sync(toy: &Toy, pods: &[Pod], revisions: &BTreeMap<String, PodTemplateSpec>) -> Plan {
    try_sync(toy, pods, revisions).expect("plan")
}

/// [`sync`], returning the planner's error.
pub(super) fn try_sync(
    toy: &Toy,
    pods: &[Pod],
    revisions: &BTreeMap<String, PodTemplateSpec>,
) -> Result<Plan, PlanError> {
    let named = BTreeSet::new();
    plan_snapshot(&PodSetSnapshot {
        workload: toy,
        pods: pods.iter().collect(),
        claims: Vec::new(),
        update_revision: V2,
        current_revision: V1,
        revisions,
        named_for_deletion: &named,
        now: ts(100),
    })
}

/// One sync of the toy as its kind would run it: refresh, then scale (new pods named
/// `toy-new-<i>`) or update.
pub(super) fn plan_snapshot(snap: &PodSetSnapshot<'_, Toy>) -> Result<Plan, PlanError> {
    let mut set = PodSet::new(snap);
    let mut plan = Plan::default();
    set.refresh(&mut plan)?;
    set.scale_and_update(&mut plan, |scale, plan| {
        for (i, revision) in set.new_pod_revisions(scale).into_iter().enumerate() {
            plan.creates.push(Create {
                instance_id: format!("new-{i}"),
                revision: revision.to_owned(),
            });
        }
    })?;
    Ok(plan)
}

pub(super) fn revisions(v2: PodTemplateSpec) -> BTreeMap<String, PodTemplateSpec> {
    BTreeMap::from([
        (V1.to_owned(), template("toy:v1", None)),
        (V2.to_owned(), v2),
    ])
}

#[test]
fn toy_creates_missing_pods_on_the_update_revision_with_its_short_hash() {
    let toy = toy(3, PodUpdatePolicy::InPlaceIfPossible);
    let revisions = revisions(template("toy:v2", None));
    let existing = vec![running_pod(&toy, 0, V2, "toy:v2")];
    let plan = sync(&toy, &existing, &revisions);
    let created: Vec<(&str, &str)> = plan
        .creates
        .iter()
        .map(|c| (c.instance_id.as_str(), c.revision.as_str()))
        .collect();
    assert_eq!(created, [("new-0", V2), ("new-1", V2)]);
    assert!(plan.deletes.is_empty() && plan.pod_changes.is_empty());

    let (pod, claims) = new_pod_and_claims(&toy, &revisions, &plan.creates[0]).unwrap();
    assert!(claims.is_empty());
    let unknown = Create {
        instance_id: "x".to_owned(),
        revision: "toy-gone".to_owned(),
    };
    assert!(new_pod_and_claims(&toy, &revisions, &unknown).is_none());
    let labels = pod.metadata.labels.unwrap();
    assert_eq!(labels[CONTROLLER_REVISION_HASH_LABEL], "bbb222");
    assert_eq!(labels[POD_TEMPLATE_HASH_LABEL], "bbb222");
    let gates: Vec<String> = pod
        .spec
        .unwrap()
        .readiness_gates
        .unwrap()
        .into_iter()
        .map(|g| g.condition_type)
        .collect();
    assert_eq!(gates, [INPLACE_UPDATE_READY]);
}

#[test]
fn toy_scales_down_the_pods_least_worth_keeping_first() {
    let toy = toy(1, PodUpdatePolicy::InPlaceIfPossible);
    let revisions = revisions(template("toy:v2", None));
    let serving = running_pod(&toy, 0, V2, "toy:v2");
    let mut unscheduled = running_pod(&toy, 1, V2, "toy:v2");
    unscheduled.spec.get_or_insert_default().node_name = None;
    unscheduled.status.get_or_insert_default().phase = Some("Pending".to_owned());
    let mut not_ready = running_pod(&toy, 2, V2, "toy:v2");
    for c in not_ready
        .status
        .iter_mut()
        .flat_map(|s| s.conditions.iter_mut().flatten())
    {
        if c.type_ == "Ready" {
            c.status = "False".to_owned();
        }
    }
    let plan = sync(&toy, &[serving, not_ready, unscheduled], &revisions);
    let deleted: Vec<(&str, &str, DeleteReason)> = plan
        .deletes
        .iter()
        .map(|d| (d.pod.as_str(), d.uid.as_str(), d.reason))
        .collect();
    assert_eq!(
        deleted,
        [
            ("toy-1", "uid-1", DeleteReason::ScaleDown),
            ("toy-2", "uid-2", DeleteReason::ScaleDown)
        ]
    );
    assert!(plan.creates.is_empty());
}

#[test]
fn toy_updates_in_place_then_finishes_once_the_container_restarted() {
    let toy = toy(2, PodUpdatePolicy::InPlaceIfPossible);
    let revisions = revisions(template("toy:v2", None));
    let pods = vec![
        running_pod(&toy, 0, V1, "toy:v1"),
        running_pod(&toy, 1, V1, "toy:v1"),
    ];
    let plan = sync(&toy, &pods, &revisions);
    // maxUnavailable 1: one pod at a time; newer pods go first.
    assert_eq!(plan.pod_changes.len(), 1, "{plan:?}");
    let start = &plan.pod_changes[0];
    assert_eq!(
        (start.pod.as_str(), start.reason),
        ("toy-1", ChangeReason::InPlaceStart)
    );
    let not_ready: Vec<(&str, bool)> = start
        .conditions
        .iter()
        .map(|c| (c.condition_type, c.status))
        .collect();
    assert_eq!(not_ready, [(INPLACE_UPDATE_READY, false)]);
    let patch = start.patch.as_ref().unwrap();
    assert_eq!(
        patch["metadata"]["labels"][CONTROLLER_REVISION_HASH_LABEL],
        "bbb222"
    );
    assert_eq!(patch["spec"]["containers"][0]["image"], "toy:v2");
    assert!(plan.deletes.is_empty());

    // The patch landed and the kubelet restarted the container on the new image.
    let mut updated = pods[1].clone();
    let labels = updated.metadata.labels.get_or_insert_default();
    labels.insert(
        CONTROLLER_REVISION_HASH_LABEL.to_owned(),
        "bbb222".to_owned(),
    );
    let state = patch["metadata"]["annotations"][STATE_ANNOTATION]
        .as_str()
        .unwrap();
    updated.metadata.annotations = Some(BTreeMap::from([(
        STATE_ANNOTATION.to_owned(),
        state.to_owned(),
    )]));
    updated.spec.get_or_insert_default().containers[0].image = Some("toy:v2".to_owned());
    let status = updated.status.get_or_insert_default();
    status.container_statuses = Some(vec![container_running(
        "app",
        "toy:v2",
        "sha-toy:v2",
        ts(101),
        true,
    )]);
    for c in status.conditions.iter_mut().flatten() {
        if c.type_ == INPLACE_UPDATE_READY {
            c.status = "False".to_owned();
        }
    }
    let plan = sync(&toy, &[pods[0].clone(), updated], &revisions);
    let done = plan
        .pod_changes
        .iter()
        .find(|c| c.pod == "toy-1")
        .expect("toy-1 refreshed");
    assert_eq!(done.reason, ChangeReason::InPlaceDone);
    let ready: Vec<(&str, bool, &str)> = done
        .conditions
        .iter()
        .map(|c| (c.condition_type, c.status, c.reason))
        .collect();
    assert_eq!(ready, [(INPLACE_UPDATE_READY, true, REASON_DONE)]);
    let kept = &done.patch.as_ref().unwrap()["metadata"]["annotations"][STATE_ANNOTATION];
    assert!(
        kept.as_str().is_some_and(|s| !update_in_progress(s)),
        "the state is kept, marked finished: {kept}"
    );
}

#[test]
fn toy_recreates_when_the_change_cannot_be_made_in_place() {
    for (policy, v2) in [
        (
            PodUpdatePolicy::InPlaceIfPossible,
            template("toy:v2", Some("fast")),
        ),
        (PodUpdatePolicy::ReCreate, template("toy:v2", None)),
    ] {
        let toy = toy(1, policy);
        let revisions = revisions(v2);
        let plan = sync(&toy, &[running_pod(&toy, 0, V1, "toy:v1")], &revisions);
        assert_eq!(plan.deletes.len(), 1, "{policy:?}: {plan:?}");
        assert_eq!(
            plan.deletes[0].reason,
            DeleteReason::RecreateUpdate,
            "{policy:?}"
        );
        assert!(plan.pod_changes.is_empty(), "{policy:?}");
    }
}

#[test]
fn toy_pods_held_by_a_pre_delete_hook_prepare_instead_of_going() {
    let mut toy = toy(1, PodUpdatePolicy::InPlaceIfPossible);
    toy.lifecycle = Some(Lifecycle {
        pre_delete: Some(LifecycleHook {
            labels_handler: BTreeMap::from([("hold".to_owned(), "true".to_owned())]),
            finalizers_handler: Vec::new(),
            mark_pod_not_ready: false,
        }),
        ..Lifecycle::default()
    });
    let revisions = revisions(template("toy:v2", None));
    let kept = running_pod(&toy, 0, V2, "toy:v2");
    let mut held = running_pod(&toy, 1, V2, "toy:v2");
    held.metadata
        .labels
        .get_or_insert_default()
        .insert("hold".to_owned(), "true".to_owned());
    let plan = sync(&toy, &[kept, held], &revisions);
    assert!(plan.deletes.is_empty(), "{plan:?}");
    let prepare: Vec<(&str, ChangeReason)> = plan
        .pod_changes
        .iter()
        .map(|c| (c.pod.as_str(), c.reason))
        .collect();
    assert_eq!(prepare, [("toy-1", ChangeReason::PreparingDelete)]);
    let patch = plan.pod_changes[0].patch.as_ref().unwrap();
    assert_eq!(
        patch["metadata"]["labels"][crate::workload::lifecycle::STATE_LABEL],
        "PreparingDelete"
    );
}

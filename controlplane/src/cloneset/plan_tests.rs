//! Table-driven cases for one CloneSet sync, following OpenKruise's `cloneset_scale.go` and
//! `cloneset_update.go`: each case builds a set, its pods, claims and revisions and checks
//! what the plan creates, deletes and patches.

#![allow(
    clippy::type_complexity,
    reason = "case tables are tuples read in one place"
)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStatus, EnvVar,
    PersistentVolumeClaimSpec, PodCondition, PodReadinessGate, PodSpec, PodStatus, PodTemplateSpec,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::*;
use crate::api::cloneset::{CloneSetSpec, SCALING_EXCLUDE_PREPARING_DELETE_LABEL};
use crate::api::common::{InPlaceUpdateStrategy, Lifecycle, LifecycleHook, PodUpdatePolicy};
use crate::workload::actions::{Delete, DeleteReason, PodChange};
use crate::workload::deletion::{self, REVISION_LABEL, SPECIFIED_DELETE_LABEL};
use crate::workload::inplace::{
    GRACE_ANNOTATION, GraceSpec, INPLACE_UPDATE_READY, InPlaceUpdateContainerStatus,
    InPlaceUpdateState, REASON_START, STATE_ANNOTATION,
};
use crate::workload::lifecycle::{self, KRUISE_POD_READY, LifecycleState};
use crate::workload::plan::CLAIMS_REVISION_ANNOTATION;
use crate::workload::revision::POD_TEMPLATE_HASH_LABEL;

const SET: &str = "web";
const OLD: &str = "web-oldhash1";
const NEW: &str = "web-newhash2";
const OLD_IMAGE: &str = "web:v1";
const NEW_IMAGE: &str = "web:v2";

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn now() -> Timestamp {
    ts(1_000)
}

fn app_labels() -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), SET.to_owned())])
}

fn template(image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(app_labels()),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".to_owned(),
                image: Some(image.to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    }
}

fn claim_template(name: &str, size: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(size.to_owned()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

/// A CloneSet `web` with `replicas` pods of the new image and default strategies.
fn cloneset(replicas: i32) -> CloneSet {
    let mut cs = CloneSet::new(
        SET,
        CloneSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(app_labels()),
                ..LabelSelector::default()
            },
            template: template(NEW_IMAGE),
            ..CloneSetSpec::default()
        },
    );
    cs.metadata.namespace = Some("default".to_owned());
    cs.metadata.uid = Some("cs-uid".to_owned());
    cs
}

fn with(mut cs: CloneSet, f: impl FnOnce(&mut CloneSetSpec)) -> CloneSet {
    f(&mut cs.spec);
    cs
}

fn policy(cs: CloneSet, policy: PodUpdatePolicy) -> CloneSet {
    with(cs, |s| s.update_strategy.type_ = Some(policy.into()))
}

fn hook(labels: &[(&str, &str)], mark_pod_not_ready: bool) -> LifecycleHook {
    LifecycleHook {
        labels_handler: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        finalizers_handler: Vec::new(),
        mark_pod_not_ready,
    }
}

/// A pod under construction: by default scheduled on its own node, Running, Ready since
/// `ts(0)`, running the image of its revision, instance id = the name without `web-`.
struct PodBuilder(Pod);

fn pod(name: &str, revision: &str) -> PodBuilder {
    let id = name.strip_prefix("web-").unwrap_or(name);
    let image = if revision == OLD {
        OLD_IMAGE
    } else {
        NEW_IMAGE
    };
    let mut labels = app_labels();
    labels.insert(REVISION_LABEL.to_owned(), revision.to_owned());
    labels.insert(
        crate::cloneset::pods::INSTANCE_ID_LABEL.to_owned(),
        id.to_owned(),
    );
    PodBuilder(Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("7".to_owned()),
            labels: Some(labels),
            creation_timestamp: Some(Time(ts(0))),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(format!("node-{id}")),
            containers: vec![Container {
                name: "app".to_owned(),
                image: Some(image.to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".to_owned()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".to_owned(),
                status: "True".to_owned(),
                last_transition_time: Some(Time(ts(0))),
                ..PodCondition::default()
            }]),
            container_statuses: Some(vec![ContainerStatus {
                name: "app".to_owned(),
                image: image.to_owned(),
                image_id: format!("sha-{image}"),
                ready: true,
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(Time(ts(0))),
                    }),
                    ..ContainerState::default()
                }),
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        }),
    })
}

impl PodBuilder {
    fn label(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
        self
    }

    fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
        self
    }

    fn state(self, state: LifecycleState) -> Self {
        self.label(lifecycle::STATE_LABEL, state.as_str())
    }

    fn condition(mut self, type_: &str, status: &str) -> Self {
        let conditions = self
            .0
            .status
            .get_or_insert_default()
            .conditions
            .get_or_insert_default();
        conditions.retain(|c| c.type_ != type_);
        conditions.push(PodCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            last_transition_time: Some(Time(ts(0))),
            ..PodCondition::default()
        });
        self
    }

    fn not_ready(self) -> Self {
        self.condition("Ready", "False")
    }

    fn ready_since(mut self, at: Timestamp) -> Self {
        for c in self
            .0
            .status
            .iter_mut()
            .flat_map(|s| s.conditions.iter_mut().flatten())
        {
            if c.type_ == "Ready" {
                c.last_transition_time = Some(Time(at));
            }
        }
        self
    }

    fn unscheduled(mut self) -> Self {
        self.0.spec.get_or_insert_default().node_name = None;
        let status = self.0.status.get_or_insert_default();
        status.phase = Some("Pending".to_owned());
        status.container_statuses = None;
        self.not_ready()
    }

    fn terminating(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(ts(900)));
        self
    }

    fn phase(mut self, phase: &str) -> Self {
        self.0.status.get_or_insert_default().phase = Some(phase.to_owned());
        self
    }

    /// The `InPlaceUpdateReady` gate with its condition True: an in-place pod at rest.
    fn in_place_ready(self) -> Self {
        self.gate(INPLACE_UPDATE_READY)
            .condition(INPLACE_UPDATE_READY, "True")
    }

    fn gate(mut self, gate: &str) -> Self {
        self.0
            .spec
            .get_or_insert_default()
            .readiness_gates
            .get_or_insert_default()
            .push(PodReadinessGate {
                condition_type: gate.to_owned(),
            });
        self
    }

    /// The running container: its image ID, when it started and whether it is ready.
    fn running(mut self, image: &str, image_id: &str, started: Timestamp, ready: bool) -> Self {
        self.0.status.get_or_insert_default().container_statuses = Some(vec![ContainerStatus {
            name: "app".to_owned(),
            image: image.to_owned(),
            image_id: image_id.to_owned(),
            ready,
            state: Some(ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(Time(started)),
                }),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }]);
        self
    }

    fn spec_image(mut self, image: &str) -> Self {
        self.0.spec.get_or_insert_default().containers[0].image = Some(image.to_owned());
        self
    }

    fn build(self) -> Pod {
        self.0
    }
}

fn pvc(name: &str, id: &str) -> PersistentVolumeClaim {
    let mut labels = app_labels();
    labels.insert(
        crate::cloneset::pods::INSTANCE_ID_LABEL.to_owned(),
        id.to_owned(),
    );
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: None,
        status: None,
    }
}

fn terminating_pvc(name: &str, id: &str) -> PersistentVolumeClaim {
    let mut claim = pvc(name, id);
    claim.metadata.deletion_timestamp = Some(Time(ts(900)));
    claim
}

fn revision(image: &str) -> RevisionSpec {
    RevisionSpec {
        template: template(image),
        volume_claim_templates: Vec::new(),
    }
}

/// One sync's input.
struct Case {
    cs: CloneSet,
    pods: Vec<Pod>,
    pvcs: Vec<PersistentVolumeClaim>,
    revisions: BTreeMap<String, RevisionSpec>,
    current: &'static str,
    update: &'static str,
    now: Timestamp,
}

impl Case {
    /// A rollout from OLD (web:v1) to NEW (web:v2).
    fn new(cs: CloneSet) -> Self {
        Self {
            cs,
            pods: Vec::new(),
            pvcs: Vec::new(),
            revisions: BTreeMap::from([
                (OLD.to_owned(), revision(OLD_IMAGE)),
                (NEW.to_owned(), revision(NEW_IMAGE)),
            ]),
            current: OLD,
            update: NEW,
            now: now(),
        }
    }

    /// No rollout: current and update revision are both NEW.
    fn settled(cs: CloneSet) -> Self {
        Self {
            current: NEW,
            ..Self::new(cs)
        }
    }

    fn pods(mut self, pods: Vec<PodBuilder>) -> Self {
        self.pods = pods.into_iter().map(PodBuilder::build).collect();
        self
    }

    fn pvcs(mut self, pvcs: Vec<PersistentVolumeClaim>) -> Self {
        self.pvcs = pvcs;
        self
    }

    fn new_revision(mut self, spec: RevisionSpec) -> Self {
        self.revisions.insert(NEW.to_owned(), spec);
        self
    }

    fn old_revision(mut self, spec: RevisionSpec) -> Self {
        self.revisions.insert(OLD.to_owned(), spec);
        self
    }

    fn try_plan(&self) -> Result<Plan, PlanError> {
        self.try_cloneset_plan().map(|planned| planned.plan)
    }

    /// The shared plan and what beside it is the CloneSet's own.
    fn try_cloneset_plan(&self) -> Result<CloneSetPlan, PlanError> {
        plan(&Snapshot {
            cloneset: &self.cs,
            pods: self.pods.iter().collect(),
            pvcs: self.pvcs.iter().collect(),
            update_revision: self.update,
            current_revision: self.current,
            revisions: &self.revisions,
            now: self.now,
        })
    }

    fn plan(&self) -> Plan {
        self.try_plan().expect("plan")
    }

    fn cloneset_plan(&self) -> CloneSetPlan {
        self.try_cloneset_plan().expect("plan")
    }
}

fn deleted(plan: &Plan) -> Vec<(&str, DeleteReason)> {
    plan.deletes
        .iter()
        .map(|d| (d.pod.as_str(), d.reason))
        .collect()
}

fn changed(plan: &Plan) -> Vec<&str> {
    plan.pod_changes.iter().map(|c| c.pod.as_str()).collect()
}

fn change<'p>(plan: &'p Plan, pod: &str) -> &'p PodChange {
    plan.pod_changes
        .iter()
        .find(|c| c.pod == pod)
        .unwrap_or_else(|| panic!("no change for {pod} in {plan:#?}"))
}

fn patch(change: &PodChange) -> &Value {
    change.patch.as_ref().expect("a patch")
}

fn patch_label<'v>(change: &'v PodChange, key: &str) -> Option<&'v Value> {
    patch(change).get("metadata")?.get("labels")?.get(key)
}

fn patch_annotation<'v>(change: &'v PodChange, key: &str) -> Option<&'v Value> {
    patch(change).get("metadata")?.get("annotations")?.get(key)
}

fn conditions(change: &PodChange) -> Vec<(&str, bool, &str)> {
    change
        .conditions
        .iter()
        .map(|c| (c.condition_type, c.status, c.reason))
        .collect()
}

fn is_quiet(plan: &Plan) -> bool {
    plan.creates.is_empty() && plan.deletes.is_empty() && plan.pod_changes.is_empty()
}

fn names(n: usize, revision: &str) -> Vec<PodBuilder> {
    (0..n)
        .map(|i| pod(&format!("web-p{i}"), revision))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Scale up
// ---------------------------------------------------------------------------------------

#[test]
fn scale_up_creates_what_is_missing_within_scale_max_unavailable() {
    let scale_max = |value: IntOrString| {
        move |s: &mut CloneSetSpec| s.scale_strategy.max_unavailable = Some(value)
    };
    let cases: Vec<(&str, CloneSet, Vec<PodBuilder>, usize)> = vec![
        ("from zero", cloneset(3), vec![], 3),
        ("one missing", cloneset(3), names(2, NEW), 1),
        ("nothing missing", cloneset(3), names(3, NEW), 0),
        (
            "scale maxUnavailable caps creations from zero",
            with(cloneset(5), scale_max(IntOrString::Int(2))),
            vec![],
            2,
        ),
        (
            "scale maxUnavailable as a percentage (40% of 5 = 2)",
            with(cloneset(5), scale_max(IntOrString::String("40%".into()))),
            vec![],
            2,
        ),
        (
            "unready pods use up scale maxUnavailable",
            with(cloneset(5), scale_max(IntOrString::Int(2))),
            vec![pod("web-a", NEW).not_ready(), pod("web-b", NEW)],
            1,
        ),
        (
            "no creation while maxUnavailable pods are unready",
            with(cloneset(5), scale_max(IntOrString::Int(2))),
            vec![pod("web-a", NEW).not_ready(), pod("web-b", NEW).not_ready()],
            0,
        ),
        (
            "ready pods do not limit creations",
            with(cloneset(5), scale_max(IntOrString::Int(1))),
            names(3, NEW),
            1,
        ),
        (
            "a terminating pod is replaced",
            cloneset(2),
            vec![pod("web-a", NEW), pod("web-b", NEW).terminating()],
            1,
        ),
        (
            "a succeeded pod is replaced",
            cloneset(2),
            vec![pod("web-a", NEW), pod("web-b", NEW).phase("Succeeded")],
            1,
        ),
        (
            "a failed pod is replaced",
            cloneset(2),
            vec![pod("web-a", NEW), pod("web-b", NEW).phase("Failed")],
            1,
        ),
    ];
    for (name, cs, pods, want) in cases {
        let plan = Case::settled(cs).pods(pods).plan();
        assert_eq!(plan.creates.len(), want, "{name}: {plan:#?}");
        assert!(
            plan.creates.iter().all(|c| c.revision == NEW),
            "{name}: {plan:#?}"
        );
        assert!(plan.deletes.is_empty(), "{name}: {plan:#?}");
    }
}

#[test]
fn new_pods_get_fresh_ids_from_the_executor_and_taken_ids_cover_pods_and_claims() {
    let planned = Case::settled(cloneset(3))
        .pods(vec![pod("web-a", NEW), pod("web-b", NEW).terminating()])
        .pvcs(vec![terminating_pvc("data-web-z", "z")])
        .cloneset_plan();
    // Terminating pod b still holds its id; so does the terminating claim.
    assert_eq!(
        planned.taken_ids,
        BTreeSet::from(["a".to_owned(), "b".to_owned(), "z".to_owned()])
    );
    assert_eq!(
        planned.plan.creates,
        vec![
            Create {
                instance_id: String::new(),
                revision: NEW.to_owned()
            };
            2
        ]
    );
}

#[test]
fn replacement_reuses_the_instance_id_of_an_orphan_claim() {
    let cases: Vec<(
        &str,
        CloneSet,
        Vec<PodBuilder>,
        Vec<PersistentVolumeClaim>,
        Vec<&str>,
    )> = vec![
        (
            "pod deleted from outside: its claim's id comes back",
            cloneset(2),
            vec![pod("web-a", NEW)],
            vec![pvc("data-web-a", "a"), pvc("data-web-b", "b")],
            vec!["b"],
        ),
        (
            "two claims of one instance give one id",
            cloneset(2),
            vec![pod("web-a", NEW)],
            vec![pvc("data-web-b", "b"), pvc("logs-web-b", "b")],
            vec!["b"],
        ),
        (
            "more creations than orphans: the rest get fresh ids",
            cloneset(3),
            vec![pod("web-a", NEW)],
            vec![pvc("data-web-b", "b")],
            vec!["b", ""],
        ),
        (
            "a terminating claim is not reused",
            cloneset(2),
            vec![pod("web-a", NEW)],
            vec![terminating_pvc("data-web-b", "b")],
            vec![""],
        ),
        (
            "the claim of a terminating pod waits for the pod to go, then its id comes back",
            cloneset(2),
            vec![pod("web-a", NEW), pod("web-b", NEW).terminating()],
            vec![pvc("data-web-b", "b")],
            vec![],
        ),
        (
            "a terminating pod with a claim delays only its own replacement",
            cloneset(3),
            vec![pod("web-a", NEW), pod("web-b", NEW).terminating()],
            vec![pvc("data-web-b", "b")],
            vec![""],
        ),
        (
            "disablePVCReuse: a fresh id",
            with(cloneset(2), |s| s.scale_strategy.disable_pvc_reuse = true),
            vec![pod("web-a", NEW)],
            vec![pvc("data-web-b", "b")],
            vec![""],
        ),
    ];
    for (name, cs, pods, pvcs, want) in cases {
        let plan = Case::settled(cs).pods(pods).pvcs(pvcs).plan();
        let ids: Vec<&str> = plan
            .creates
            .iter()
            .map(|c| c.instance_id.as_str())
            .collect();
        assert_eq!(ids, want, "{name}");
    }
}

#[test]
fn disable_pvc_reuse_deletes_orphan_claims_in_a_sync_without_scaling() {
    let claims = || {
        vec![
            pvc("data-web-a", "a"),
            pvc("data-web-gone", "gone"),
            terminating_pvc("data-web-old", "old"),
        ]
    };
    let reuse_disabled = with(cloneset(1), |s| s.scale_strategy.disable_pvc_reuse = true);
    let planned = Case::settled(reuse_disabled)
        .pods(vec![pod("web-a", NEW)])
        .pvcs(claims())
        .cloneset_plan();
    assert_eq!(planned.unused_claims, vec!["data-web-gone".to_owned()]);
    assert!(is_quiet(&planned.plan), "{planned:#?}");

    // With reuse (the default) the orphan is kept for the next replacement.
    let planned = Case::settled(cloneset(1))
        .pods(vec![pod("web-a", NEW)])
        .pvcs(claims())
        .cloneset_plan();
    assert!(planned.unused_claims.is_empty(), "{planned:#?}");
}

#[test]
fn disable_pvc_reuse_deletes_the_orphan_claim_in_the_sync_that_replaces_its_pod() {
    let cs = with(cloneset(2), |s| s.scale_strategy.disable_pvc_reuse = true);
    let planned = Case::settled(cs)
        .pods(vec![pod("web-a", NEW)])
        .pvcs(vec![pvc("data-web-a", "a"), pvc("data-web-b", "b")])
        .cloneset_plan();
    assert_eq!(planned.plan.creates.len(), 1);
    assert_eq!(planned.plan.creates[0].instance_id, "");
    assert_eq!(planned.unused_claims, vec!["data-web-b".to_owned()]);
}

// ---------------------------------------------------------------------------------------
// Scale down and specified delete
// ---------------------------------------------------------------------------------------

#[test]
fn scale_down_deletes_by_ranking_with_the_pods_claims() {
    let cases: Vec<(&str, i32, Vec<PodBuilder>, Vec<&str>)> = vec![
        (
            "not ready first",
            2,
            vec![
                pod("web-a", NEW),
                pod("web-b", NEW).not_ready(),
                pod("web-c", NEW),
            ],
            vec!["web-b"],
        ),
        (
            "unscheduled before not ready",
            2,
            vec![
                pod("web-a", NEW).not_ready(),
                pod("web-b", NEW),
                pod("web-c", NEW).unscheduled(),
            ],
            vec!["web-c"],
        ),
        (
            "pending before running",
            2,
            vec![
                pod("web-a", NEW),
                pod("web-b", NEW).phase("Pending"),
                pod("web-c", NEW),
            ],
            vec!["web-b"],
        ),
        (
            "ready for less time first",
            2,
            vec![
                pod("web-a", NEW).ready_since(ts(100)),
                pod("web-b", NEW).ready_since(ts(500)),
                pod("web-c", NEW).ready_since(ts(10)),
            ],
            vec!["web-b"],
        ),
        (
            "lower deletion cost first",
            2,
            vec![
                pod("web-a", NEW),
                pod("web-b", NEW),
                pod("web-c", NEW).annotation(deletion::POD_DELETION_COST_ANNOTATION, "-5"),
            ],
            vec!["web-c"],
        ),
        (
            "two of three",
            1,
            vec![
                pod("web-a", NEW).not_ready(),
                pod("web-b", NEW),
                pod("web-c", NEW).unscheduled(),
            ],
            vec!["web-c", "web-a"],
        ),
        (
            "terminating pods are not deleted again",
            2,
            vec![
                pod("web-a", NEW).not_ready().terminating(),
                pod("web-b", NEW),
                pod("web-c", NEW),
            ],
            vec![],
        ),
    ];
    for (name, replicas, pods, want) in cases {
        let case = Case::settled(cloneset(replicas)).pods(pods).pvcs(vec![
            pvc("data-web-a", "a"),
            pvc("data-web-b", "b"),
            pvc("data-web-c", "c"),
        ]);
        let plan = case.plan();
        let got: Vec<&str> = plan.deletes.iter().map(|d| d.pod.as_str()).collect();
        let mut got_sorted = got.clone();
        got_sorted.sort_unstable();
        let mut want_sorted = want.clone();
        want_sorted.sort_unstable();
        assert_eq!(got_sorted, want_sorted, "{name}: {plan:#?}");
        for d in &plan.deletes {
            assert_eq!(d.reason, DeleteReason::ScaleDown, "{name}");
            assert_eq!(d.uid, format!("uid-{}", d.pod), "{name}");
            assert_eq!(
                d.pvcs,
                vec![format!("data-{}", d.pod)],
                "{name}: the pod's claim goes with it"
            );
        }
        assert!(plan.creates.is_empty(), "{name}");
    }
}

#[test]
fn scale_down_of_ready_pods_is_limited_by_max_unavailable() {
    // deleteReadyLimit = maxUnavailable + (pods - replicas) - unavailable; pods that are not
    // ready are deleted without using it.
    let fresh = |name: &str| pod(name, NEW).ready_since(ts(995));
    let cases: Vec<(&str, i32, Vec<PodBuilder>, usize)> = vec![
        ("6 -> 3, all available: 0 + 3 - 0", 3, names(6, NEW), 3),
        (
            "6 -> 3, two ready but not yet available: 0 + 3 - 2 = 1",
            3,
            {
                let mut p = names(4, NEW);
                p.push(fresh("web-f1"));
                p.push(fresh("web-f2"));
                p
            },
            1,
        ),
        (
            "6 -> 3, two not ready: deleted without budget, plus one ready",
            3,
            {
                let mut p = names(4, NEW);
                p.push(pod("web-u1", NEW).not_ready());
                p.push(pod("web-u2", NEW).not_ready());
                p
            },
            3,
        ),
    ];
    for (name, replicas, pods, want) in cases {
        let cs = with(cloneset(replicas), |s| {
            s.update_strategy.max_unavailable = Some(IntOrString::Int(0));
            s.min_ready_seconds = 10;
        });
        let plan = Case::settled(cs).pods(pods).plan();
        assert_eq!(plan.deletes.len(), want, "{name}: {plan:#?}");
        assert!(
            plan.creates.is_empty() && plan.pod_changes.is_empty(),
            "{name}"
        );
    }
}

#[test]
fn specified_pods_are_deleted_and_replaced_in_a_later_sync() {
    type Spec = fn(&mut CloneSetSpec);
    let cases: Vec<(&str, Spec, Vec<PodBuilder>, Vec<&str>)> = vec![
        (
            "label apps.kruise.io/specified-delete",
            |_| {},
            vec![
                pod("web-a", NEW),
                pod("web-b", NEW).label(SPECIFIED_DELETE_LABEL, "true"),
                pod("web-c", NEW),
            ],
            vec!["web-b"],
        ),
        (
            "the label's value is not checked",
            |_| {},
            vec![
                pod("web-a", NEW),
                pod("web-b", NEW).label(SPECIFIED_DELETE_LABEL, "whatever"),
                pod("web-c", NEW),
            ],
            vec!["web-b"],
        ),
        (
            "scaleStrategy.podsToDelete",
            |s| s.scale_strategy.pods_to_delete = vec!["web-c".to_owned()],
            names_abc(),
            vec!["web-c"],
        ),
        (
            "two named pods, one budget unit: the unready one needs none",
            |s| {
                s.scale_strategy.pods_to_delete = vec!["web-a".to_owned(), "web-b".to_owned()];
                s.update_strategy.max_unavailable = Some(IntOrString::Int(1));
            },
            vec![
                pod("web-a", NEW),
                pod("web-b", NEW).not_ready(),
                pod("web-c", NEW),
            ],
            vec!["web-a", "web-b"],
        ),
        (
            "ready named pods beyond maxUnavailable wait",
            |s| {
                s.scale_strategy.pods_to_delete = vec!["web-a".to_owned(), "web-b".to_owned()];
                s.update_strategy.max_unavailable = Some(IntOrString::Int(1));
            },
            names_abc(),
            vec!["web-a"],
        ),
    ];
    for (name, edit, pods, want) in cases {
        let cs = with(cloneset(3), edit);
        let plan = Case::settled(cs)
            .pods(pods)
            .pvcs(vec![pvc("data-web-b", "b"), pvc("data-web-c", "c")])
            .plan();
        let mut got: Vec<&str> = plan.deletes.iter().map(|d| d.pod.as_str()).collect();
        got.sort_unstable();
        assert_eq!(got, want, "{name}: {plan:#?}");
        assert!(
            plan.deletes
                .iter()
                .all(|d| d.reason == DeleteReason::Specified),
            "{name}"
        );
        for d in &plan.deletes {
            let claims: Vec<String> = ["b", "c"]
                .iter()
                .filter(|id| d.pod == format!("web-{id}"))
                .map(|id| format!("data-web-{id}"))
                .collect();
            assert_eq!(d.pvcs, claims, "{name}");
        }
        assert!(
            plan.creates.is_empty(),
            "{name}: the replacement comes later"
        );
        assert!(plan.pod_changes.is_empty(), "{name}: no update either");
    }

    // The next sync: the deleted pod is terminating (or gone), so its replacement is
    // created, with a fresh id (the claim went with the pod).
    for pods in [
        vec![
            pod("web-a", NEW),
            pod("web-b", NEW)
                .label(SPECIFIED_DELETE_LABEL, "true")
                .terminating(),
            pod("web-c", NEW),
        ],
        vec![pod("web-a", NEW), pod("web-c", NEW)],
    ] {
        let plan = Case::settled(cloneset(3)).pods(pods).plan();
        assert_eq!(plan.creates.len(), 1, "{plan:#?}");
        assert!(plan.deletes.is_empty());
    }
}

fn names_abc() -> Vec<PodBuilder> {
    vec![pod("web-a", NEW), pod("web-b", NEW), pod("web-c", NEW)]
}

#[test]
fn specified_delete_with_fewer_replicas_deletes_only_the_named_pod() {
    let cs = with(cloneset(2), |s| {
        s.scale_strategy.pods_to_delete = vec!["web-c".to_owned()];
    });
    let plan = Case::settled(cs).pods(names_abc()).plan();
    assert_eq!(deleted(&plan), vec![("web-c", DeleteReason::Specified)]);
    assert!(plan.creates.is_empty());
}

#[test]
fn pods_to_delete_drops_the_names_of_pods_that_are_gone() {
    let cases: Vec<(&str, Vec<&str>, Option<Vec<&str>>)> = vec![
        ("empty list: nothing to write", vec![], None),
        ("all present: nothing to write", vec!["web-a"], None),
        ("one gone", vec!["web-x", "web-a"], Some(vec!["web-a"])),
        ("all gone", vec!["web-x", "web-y"], Some(vec![])),
    ];
    for (name, list, want) in cases {
        let cs = with(cloneset(3), |s| {
            s.scale_strategy.pods_to_delete = list.iter().map(|n| (*n).to_owned()).collect();
        });
        // A terminating pod still exists: its name stays until it is gone.
        let plan = Case::settled(cs)
            .pods(vec![
                pod("web-a", NEW),
                pod("web-b", NEW),
                pod("web-c", NEW),
                pod("web-t", NEW).terminating(),
            ])
            .cloneset_plan();
        let want: Option<Vec<String>> = want.map(|w| w.into_iter().map(str::to_owned).collect());
        assert_eq!(plan.pods_to_delete, want, "{name}");
    }
    let cs = with(cloneset(3), |s| {
        s.scale_strategy.pods_to_delete = vec!["web-t".to_owned()];
    });
    let plan = Case::settled(cs)
        .pods(vec![pod("web-t", NEW).terminating()])
        .cloneset_plan();
    assert_eq!(plan.pods_to_delete, None);
}

// ---------------------------------------------------------------------------------------
// Scale and update never in one sync; paused
// ---------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------
// Update: method
// ---------------------------------------------------------------------------------------

#[test]
fn recreate_update_deletes_the_pod_with_its_claims() {
    let plan = Case::new(cloneset(1))
        .pods(vec![pod("web-a", OLD)])
        .pvcs(vec![pvc("data-web-a", "a")])
        .plan();
    assert_eq!(
        without_detail(&plan.deletes),
        vec![Delete {
            pod: "web-a".to_owned(),
            uid: "uid-web-a".to_owned(),
            pvcs: vec!["data-web-a".to_owned()],
            reason: DeleteReason::RecreateUpdate,
            detail: String::new(),
        }]
    );
    assert!(plan.pod_changes.is_empty());
    assert!(plan.creates.is_empty());
}

#[test]
fn in_place_image_update_patches_image_revision_and_state() {
    for policy_ in [
        PodUpdatePolicy::InPlaceIfPossible,
        PodUpdatePolicy::InPlaceOnly,
    ] {
        let plan = Case::new(policy(cloneset(1), policy_))
            .pods(vec![pod("web-a", OLD).in_place_ready()])
            .pvcs(vec![pvc("data-web-a", "a")])
            .plan();
        assert!(plan.deletes.is_empty(), "{policy_:?}: {plan:#?}");
        assert_eq!(changed(&plan), vec!["web-a"], "{policy_:?}");
        let c = change(&plan, "web-a");
        assert_eq!(
            patch(c)["spec"]["containers"],
            json!([{ "name": "app", "image": NEW_IMAGE }]),
            "{policy_:?}"
        );
        assert_eq!(patch_label(c, REVISION_LABEL), Some(&json!(NEW)));
        assert_eq!(
            patch_label(c, POD_TEMPLATE_HASH_LABEL),
            Some(&json!("newhash2"))
        );
        let state = patch_annotation(c, STATE_ANNOTATION)
            .and_then(Value::as_str)
            .expect("state annotation");
        let state = InPlaceUpdateState::parse(state).unwrap();
        assert_eq!(state.revision, NEW);
        assert_eq!(state.update_timestamp, Time(now()));
        assert_eq!(
            state.last_container_statuses,
            BTreeMap::from([(
                "app".to_owned(),
                InPlaceUpdateContainerStatus {
                    image_id: format!("sha-{OLD_IMAGE}"),
                    ..Default::default()
                }
            )])
        );
        // The pod leaves the endpoints first: InPlaceUpdateReady=False before the patch.
        assert_eq!(
            conditions(c),
            vec![(INPLACE_UPDATE_READY, false, REASON_START)]
        );
        assert_eq!(c.node.as_deref(), Some("node-a"));
        assert_eq!(c.uid, "uid-web-a");
        // The patch must not land on a pod that changed since the plan.
        assert_eq!(c.resource_version.as_deref(), Some("7"));
        // No lifecycle configured: no state label.
        assert_eq!(patch_label(c, lifecycle::STATE_LABEL), None);
        assert_eq!(plan.requeue_after, None);
    }
}

#[test]
fn in_place_update_sets_the_condition_only_with_the_readiness_gate() {
    let plan = Case::new(policy(cloneset(1), PodUpdatePolicy::InPlaceIfPossible))
        .pods(vec![pod("web-a", OLD)])
        .plan();
    let c = change(&plan, "web-a");
    assert!(c.conditions.is_empty(), "{c:#?}");
    assert!(patch_annotation(c, STATE_ANNOTATION).is_some());
}

#[test]
fn in_place_update_with_a_lifecycle_moves_the_pod_to_updating() {
    let cs = with(
        policy(cloneset(1), PodUpdatePolicy::InPlaceIfPossible),
        |s| {
            s.lifecycle = Some(Lifecycle {
                pre_delete: Some(hook(&[("hold", "true")], false)),
                ..Lifecycle::default()
            });
        },
    );
    let plan = Case::new(cs)
        .pods(vec![pod("web-a", OLD).state(LifecycleState::Normal)])
        .plan();
    let c = change(&plan, "web-a");
    assert_eq!(
        patch_label(c, lifecycle::STATE_LABEL),
        Some(&json!("Updating"))
    );
    assert!(patch(c)["spec"]["containers"].is_array());
}

#[test]
fn in_place_update_with_a_grace_period_waits_and_requeues() {
    let cs = with(
        policy(cloneset(1), PodUpdatePolicy::InPlaceIfPossible),
        |s| {
            s.update_strategy.in_place_update_strategy = Some(InPlaceUpdateStrategy {
                grace_period_seconds: 30,
            });
        },
    );
    let plan = Case::new(cs)
        .pods(vec![pod("web-a", OLD).in_place_ready()])
        .plan();
    let c = change(&plan, "web-a");
    // Not ready now, images later.
    assert_eq!(
        conditions(c),
        vec![(INPLACE_UPDATE_READY, false, REASON_START)]
    );
    assert!(patch(c).get("spec").is_none(), "{c:#?}");
    let grace = patch_annotation(c, GRACE_ANNOTATION)
        .and_then(Value::as_str)
        .expect("grace annotation");
    let grace = GraceSpec::parse(grace).unwrap();
    assert_eq!(grace.revision, NEW);
    assert_eq!(grace.grace_seconds, 30);
    assert_eq!(
        grace.container_images,
        BTreeMap::from([("app".to_owned(), NEW_IMAGE.to_owned())])
    );
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(30)));
}

#[test]
fn update_method_follows_the_policy_and_what_changed() {
    #[derive(Debug, PartialEq)]
    enum Want {
        Recreate,
        InPlace,
        Relabel,
        Refused(&'static str),
    }
    let with_env = || {
        let mut t = template(NEW_IMAGE);
        t.spec.as_mut().unwrap().containers[0].env = Some(vec![EnvVar {
            name: "MODE".to_owned(),
            value: Some("fast".to_owned()),
            ..EnvVar::default()
        }]);
        RevisionSpec {
            template: t,
            volume_claim_templates: Vec::new(),
        }
    };
    let vct = |image: &str, size: &str| RevisionSpec {
        template: template(image),
        volume_claim_templates: vec![claim_template("data", size)],
    };
    use PodUpdatePolicy::{InPlaceIfPossible, InPlaceOnly, ReCreate};
    let cases: Vec<(&str, PodUpdatePolicy, RevisionSpec, RevisionSpec, Want)> = vec![
        (
            "image, ReCreate",
            ReCreate,
            revision(OLD_IMAGE),
            revision(NEW_IMAGE),
            Want::Recreate,
        ),
        (
            "image, InPlaceIfPossible",
            InPlaceIfPossible,
            revision(OLD_IMAGE),
            revision(NEW_IMAGE),
            Want::InPlace,
        ),
        (
            "env, InPlaceIfPossible",
            InPlaceIfPossible,
            revision(NEW_IMAGE),
            with_env(),
            Want::Recreate,
        ),
        (
            "env, InPlaceOnly",
            InPlaceOnly,
            revision(NEW_IMAGE),
            with_env(),
            Want::Refused("spec.containers[app].env"),
        ),
        (
            "claim templates only, ReCreate",
            ReCreate,
            vct(NEW_IMAGE, "1Gi"),
            vct(NEW_IMAGE, "2Gi"),
            Want::Relabel,
        ),
        (
            "claim templates only, InPlaceIfPossible",
            InPlaceIfPossible,
            vct(NEW_IMAGE, "1Gi"),
            vct(NEW_IMAGE, "2Gi"),
            Want::Relabel,
        ),
        (
            "claim templates only, InPlaceOnly",
            InPlaceOnly,
            vct(NEW_IMAGE, "1Gi"),
            vct(NEW_IMAGE, "2Gi"),
            Want::Relabel,
        ),
        (
            "claim templates and image, InPlaceIfPossible: recreate pod and volumes",
            InPlaceIfPossible,
            vct(OLD_IMAGE, "1Gi"),
            vct(NEW_IMAGE, "2Gi"),
            Want::Recreate,
        ),
        (
            "claim templates and image, InPlaceOnly: in place, the claims kept",
            InPlaceOnly,
            vct(OLD_IMAGE, "1Gi"),
            vct(NEW_IMAGE, "2Gi"),
            Want::InPlace,
        ),
        (
            "claim templates and image, ReCreate",
            ReCreate,
            vct(OLD_IMAGE, "1Gi"),
            vct(NEW_IMAGE, "2Gi"),
            Want::Recreate,
        ),
    ];
    for (name, policy_, old, new, want) in cases {
        let plan = Case::new(policy(cloneset(1), policy_))
            .old_revision(old)
            .new_revision(new)
            .pods(vec![pod("web-a", OLD).in_place_ready()])
            .pvcs(vec![pvc("data-web-a", "a")])
            .plan();
        match want {
            Want::Recreate => {
                assert_eq!(
                    without_detail(&plan.deletes),
                    vec![Delete {
                        pod: "web-a".to_owned(),
                        uid: "uid-web-a".to_owned(),
                        pvcs: vec!["data-web-a".to_owned()],
                        reason: DeleteReason::RecreateUpdate,
                        detail: String::new(),
                    }],
                    "{name}"
                );
                assert!(plan.pod_changes.is_empty(), "{name}: {plan:#?}");
                assert_eq!(plan.refusal, None, "{name}");
            }
            Want::InPlace => {
                assert!(plan.deletes.is_empty(), "{name}: {plan:#?}");
                let c = change(&plan, "web-a");
                assert!(patch(c)["spec"]["containers"].is_array(), "{name}");
                assert!(patch_annotation(c, STATE_ANNOTATION).is_some(), "{name}");
            }
            Want::Relabel => {
                assert!(plan.deletes.is_empty(), "{name}: {plan:#?}");
                let c = change(&plan, "web-a");
                assert_eq!(patch_label(c, REVISION_LABEL), Some(&json!(NEW)), "{name}");
                assert_eq!(
                    patch_label(c, POD_TEMPLATE_HASH_LABEL),
                    Some(&json!("newhash2")),
                    "{name}"
                );
                assert!(patch(c).get("spec").is_none(), "{name}: no restart");
                assert_eq!(patch_annotation(c, STATE_ANNOTATION), None, "{name}");
                assert!(c.conditions.is_empty(), "{name}: stays ready");
            }
            Want::Refused(field) => {
                let refusal = plan.refusal.as_deref().expect("a refusal");
                assert!(refusal.contains(field), "{name}: {refusal}");
                assert!(refusal.contains("InPlaceOnly"), "{name}: {refusal}");
                assert!(plan.deletes.is_empty(), "{name}: nothing is deleted");
                assert!(plan.pod_changes.is_empty(), "{name}");
            }
        }
    }
}

#[test]
fn in_place_only_refusal_stops_the_whole_update() {
    let mut t = template(NEW_IMAGE);
    t.spec.as_mut().unwrap().host_network = Some(true);
    let plan = Case::new(policy(cloneset(5), PodUpdatePolicy::InPlaceOnly))
        .new_revision(RevisionSpec {
            template: t,
            volume_claim_templates: Vec::new(),
        })
        .pods(names(5, OLD))
        .plan();
    assert!(
        plan.refusal
            .as_deref()
            .is_some_and(|r| r.contains("spec.hostNetwork")),
        "{plan:#?}"
    );
    assert!(is_quiet(&plan), "{plan:#?}");
}

#[test]
fn a_pod_whose_revision_is_gone_is_recreated() {
    let plan = Case::new(policy(cloneset(1), PodUpdatePolicy::InPlaceOnly))
        .pods(vec![pod("web-a", "web-vanished9")])
        .plan();
    assert_eq!(
        deleted(&plan),
        vec![("web-a", DeleteReason::RecreateUpdate)]
    );
}

#[test]
fn pods_labelled_with_the_short_hash_count_as_on_their_revision() {
    // OpenKruise may write only the hash into controller-revision-hash.
    let plan = Case::new(cloneset(2))
        .pods(vec![pod("web-a", "newhash2"), pod("web-b", "newhash2")])
        .plan();
    assert!(is_quiet(&plan), "{plan:#?}");
    // And an old pod labelled with the short hash still finds its revision for an
    // in-place update.
    let plan = Case::new(policy(cloneset(1), PodUpdatePolicy::InPlaceOnly))
        .pods(vec![pod("web-a", "oldhash1")])
        .plan();
    assert!(plan.deletes.is_empty(), "{plan:#?}");
    assert_eq!(changed(&plan), vec!["web-a"]);
}

#[test]
fn scale_down_ranks_a_short_hash_pod_as_updated_as_the_rollout_counts_it() {
    // The rollout counts web-b as updated, so the old-revision surplus is web-a alone; the
    // ranking must agree, though web-b is the cheaper pod to lose.
    let plan = Case::new(cloneset(2))
        .pods(vec![
            pod("web-a", OLD),
            pod("web-b", "newhash2").annotation(deletion::POD_DELETION_COST_ANNOTATION, "-5"),
            pod("web-c", NEW),
        ])
        .plan();
    assert_eq!(deleted(&plan), vec![("web-a", DeleteReason::ScaleDown)]);
}

// ---------------------------------------------------------------------------------------
// Update: how many per sync
// ---------------------------------------------------------------------------------------

#[test]
fn max_unavailable_and_partition_limit_the_pods_updated_per_sync() {
    let mu = |v: IntOrString| Some(v);
    let pct = |s: &str| IntOrString::String(s.to_owned());
    type Row = (
        &'static str,
        Option<IntOrString>, // maxUnavailable
        Option<IntOrString>, // partition
        Vec<PodBuilder>,
        usize,
    );
    let cases: Vec<Row> = vec![
        ("default 20% of 10", None, None, names(10, OLD), 2),
        ("default 20% of 3 rounds up", None, None, names(3, OLD), 1),
        ("int 3", mu(IntOrString::Int(3)), None, names(10, OLD), 3),
        (
            "35% of 10 rounds up",
            mu(pct("35%")),
            None,
            names(10, OLD),
            4,
        ),
        (
            "0: nothing",
            mu(IntOrString::Int(0)),
            None,
            names(10, OLD),
            0,
        ),
        ("100%: all", mu(pct("100%")), None, names(10, OLD), 10),
        (
            "an unavailable updated pod uses up the budget",
            mu(IntOrString::Int(2)),
            None,
            {
                let mut p = names(9, OLD);
                p.push(pod("web-n", NEW).not_ready());
                p
            },
            1,
        ),
        (
            "as many unavailable updated pods as the budget: nothing",
            mu(IntOrString::Int(2)),
            None,
            {
                let mut p = names(8, OLD);
                p.push(pod("web-n", NEW).not_ready());
                p.push(pod("web-m", NEW).not_ready());
                p
            },
            0,
        ),
        (
            "an unready old pod is updated without budget",
            mu(IntOrString::Int(1)),
            None,
            {
                let mut p = names(9, OLD);
                p.push(pod("web-u", OLD).not_ready());
                p
            },
            1,
        ),
        (
            "a pod ready for less than minReadySeconds is unavailable",
            mu(IntOrString::Int(2)),
            None,
            {
                let mut p = names(9, OLD);
                p.push(pod("web-n", NEW).ready_since(ts(995)));
                p
            },
            1,
        ),
        (
            "partition 3 of 5 keeps 3 old",
            mu(pct("100%")),
            Some(IntOrString::Int(3)),
            names(5, OLD),
            2,
        ),
        (
            "partition 40% of 5 keeps 2 old",
            mu(pct("100%")),
            Some(pct("40%")),
            names(5, OLD),
            3,
        ),
        (
            "partition reached: nothing",
            mu(pct("100%")),
            Some(IntOrString::Int(3)),
            {
                let mut p = names(3, OLD);
                p.push(pod("web-n", NEW));
                p.push(pod("web-m", NEW));
                p
            },
            0,
        ),
        (
            "partition 100% keeps all",
            mu(pct("100%")),
            Some(pct("100%")),
            names(5, OLD),
            0,
        ),
        (
            "partition and maxUnavailable: the smaller wins",
            mu(IntOrString::Int(1)),
            Some(IntOrString::Int(2)),
            names(5, OLD),
            1,
        ),
    ];
    for (name, max_unavailable, partition, pods, want) in cases {
        let n = pods.len();
        let cs = with(cloneset(i32::try_from(n).unwrap()), |s| {
            s.update_strategy.max_unavailable = max_unavailable;
            s.update_strategy.partition = partition;
            s.min_ready_seconds = 10;
        });
        let plan = Case::new(cs).pods(pods).plan();
        assert!(
            plan.deletes
                .iter()
                .all(|d| d.reason == DeleteReason::RecreateUpdate),
            "{name}"
        );
        assert!(
            plan.deletes
                .iter()
                .all(|d| d.pod != "web-n" && d.pod != "web-m"),
            "{name}: updated pods are left alone"
        );
        assert_eq!(plan.deletes.len(), want, "{name}: {plan:#?}");
    }
}

/// The sync that finishes a pod's in-place update may start the next pod's: the finished
/// pod is Ready with InPlaceUpdateReady True, and only its state annotation (which the
/// same sync removes) said it was updating. A pod whose InPlaceUpdateReady this sync has
/// yet to set is not available until the kubelet reads it, so it still holds the budget.
fn held_for_deletion(replicas: i32) -> Case {
    let cs = with(cloneset(replicas), |s| {
        s.update_strategy.max_unavailable = Some(IntOrString::String("100%".into()));
        s.lifecycle = Some(Lifecycle {
            pre_delete: Some(hook(&[("hold", "true")], false)),
            ..Lifecycle::default()
        });
    });
    Case::new(cs).pods(vec![
        pod("web-a", OLD),
        pod("web-b", OLD)
            .state(LifecycleState::PreparingDelete)
            .label("hold", "true")
            .label(SPECIFIED_DELETE_LABEL, "true"),
        pod("web-c", OLD),
        pod("web-d", OLD),
    ])
}

#[test]
fn pods_being_deleted_are_not_updated() {
    // b is on its way out (specified, held by the preDelete hook): the others update.
    let plan = held_for_deletion(4).plan();
    let mut got: Vec<&str> = plan.deletes.iter().map(|d| d.pod.as_str()).collect();
    got.sort_unstable();
    assert_eq!(got, vec!["web-a", "web-c", "web-d"], "{plan:#?}");
    assert!(
        plan.deletes
            .iter()
            .all(|d| d.reason == DeleteReason::RecreateUpdate)
    );
    assert!(plan.pod_changes.is_empty(), "{plan:#?}");
}

#[test]
fn a_pod_held_in_preparing_delete_does_not_stall_the_rollout() {
    // Replicas 3 of 4 pods, the surplus one held in PreparingDelete: OpenKruise's Scale
    // skips the scale-in ("numToDelete > 0") without changes, and the update goes on.
    let plan = held_for_deletion(3).plan();
    let mut got: Vec<&str> = plan.deletes.iter().map(|d| d.pod.as_str()).collect();
    got.sort_unstable();
    assert_eq!(got, vec!["web-a", "web-c", "web-d"], "{plan:#?}");
}

#[test]
fn excluding_preparing_delete_replaces_a_held_pod_at_once() {
    // Replicas 3: c is specified for deletion and held by the preDelete hook. Counted, it
    // fills its place until released; with the CloneSet labelled to exclude PreparingDelete
    // from scaling, a replacement is created now (status.replicas then counts 4 pods).
    let held = || {
        vec![
            pod("web-a", NEW),
            pod("web-b", NEW),
            pod("web-c", NEW)
                .state(LifecycleState::PreparingDelete)
                .label("hold", "true")
                .label(SPECIFIED_DELETE_LABEL, "true"),
        ]
    };
    let cs = |label: Option<&str>| {
        let mut cs = with_lifecycle(
            cloneset(3),
            Lifecycle {
                pre_delete: Some(hook(&[("hold", "true")], false)),
                ..Lifecycle::default()
            },
        );
        if let Some(value) = label {
            cs.metadata.labels.get_or_insert_default().insert(
                SCALING_EXCLUDE_PREPARING_DELETE_LABEL.to_owned(),
                value.to_owned(),
            );
        }
        cs
    };
    for (name, label, creates) in [
        ("no label: the held pod counts", None, 0),
        ("label \"false\": the held pod counts", Some("false"), 0),
        ("label \"true\": replaced at once", Some("true"), 1),
    ] {
        let plan = Case::settled(cs(label)).pods(held()).plan();
        assert_eq!(plan.creates.len(), creates, "{name}: {plan:#?}");
        assert!(plan.deletes.is_empty(), "{name}: {plan:#?}");
    }
}

// ---------------------------------------------------------------------------------------
// Lifecycle hooks
// ---------------------------------------------------------------------------------------

fn with_lifecycle(cs: CloneSet, lifecycle: Lifecycle) -> CloneSet {
    with(cs, |s| s.lifecycle = Some(lifecycle))
}

#[test]
fn pre_delete_hook_moves_the_pod_to_preparing_delete_instead_of_deleting() {
    for mark in [false, true] {
        let cs = with_lifecycle(
            cloneset(2),
            Lifecycle {
                pre_delete: Some(hook(&[("hold", "true")], mark)),
                ..Lifecycle::default()
            },
        );
        let plan = Case::settled(cs)
            .pods(vec![
                pod("web-a", NEW).label("hold", "true"),
                pod("web-b", NEW).label("hold", "true").not_ready(),
                pod("web-c", NEW),
            ])
            .pvcs(vec![pvc("data-web-b", "b")])
            .plan();
        assert!(plan.deletes.is_empty(), "{plan:#?}");
        let c = change(&plan, "web-b");
        assert_eq!(
            patch_label(c, lifecycle::STATE_LABEL),
            Some(&json!("PreparingDelete"))
        );
        assert_eq!(
            patch_annotation(c, lifecycle::TIMESTAMP_ANNOTATION),
            Some(&json!("2027-01-15T08:16:40Z"))
        );
        let want: Vec<(&str, bool, &str)> = if mark {
            vec![(KRUISE_POD_READY, false, "LifecycleNotReady")]
        } else {
            vec![]
        };
        assert_eq!(conditions(c), want, "markPodNotReady={mark}");
    }
}

#[test]
fn pods_without_the_pre_delete_hook_are_deleted_directly() {
    let cs = with_lifecycle(
        cloneset(2),
        Lifecycle {
            pre_delete: Some(hook(&[("hold", "true")], false)),
            ..Lifecycle::default()
        },
    );
    let plan = Case::settled(cs)
        .pods(vec![
            pod("web-a", NEW).label("hold", "true"),
            pod("web-b", NEW).not_ready(),
            pod("web-c", NEW).label("hold", "true"),
        ])
        .plan();
    assert_eq!(deleted(&plan), vec![("web-b", DeleteReason::ScaleDown)]);
}

#[test]
fn specified_delete_goes_through_the_pre_delete_hook() {
    let cs = with_lifecycle(
        cloneset(2),
        Lifecycle {
            pre_delete: Some(hook(&[("hold", "true")], false)),
            ..Lifecycle::default()
        },
    );
    let plan = Case::settled(cs)
        .pods(vec![
            pod("web-a", NEW),
            pod("web-b", NEW)
                .label("hold", "true")
                .label(SPECIFIED_DELETE_LABEL, "true"),
        ])
        .plan();
    assert!(plan.deletes.is_empty());
    assert_eq!(
        patch_label(change(&plan, "web-b"), lifecycle::STATE_LABEL),
        Some(&json!("PreparingDelete"))
    );
}

#[test]
fn a_hooked_pod_in_preparing_delete_waits_and_is_not_replaced_early() {
    let cs = with_lifecycle(
        cloneset(2),
        Lifecycle {
            pre_delete: Some(hook(&[("hold", "true")], false)),
            ..Lifecycle::default()
        },
    );
    let plan = Case::settled(cs)
        .pods(vec![
            pod("web-a", NEW),
            pod("web-b", NEW)
                .label("hold", "true")
                .state(LifecycleState::PreparingDelete),
            pod("web-c", NEW),
        ])
        .plan();
    assert!(is_quiet(&plan), "{plan:#?}");
}

#[test]
fn exclude_preparing_delete_replaces_a_held_pod_at_once() {
    let held = || {
        with_lifecycle(
            cloneset(3),
            Lifecycle {
                pre_delete: Some(hook(&[("hold", "true")], false)),
                ..Lifecycle::default()
            },
        )
    };
    let by_field = with(held(), |s| s.scale_strategy.exclude_preparing_delete = true);
    let mut by_label = held();
    by_label.metadata.labels = Some(BTreeMap::from([(
        SCALING_EXCLUDE_PREPARING_DELETE_LABEL.to_owned(),
        "true".to_owned(),
    )]));
    let pods = || {
        vec![
            pod("web-a", NEW),
            pod("web-b", NEW)
                .label("hold", "true")
                .state(LifecycleState::PreparingDelete),
            pod("web-c", NEW),
        ]
    };
    let counted = Case::settled(held()).pods(pods()).plan();
    assert!(counted.creates.is_empty(), "{counted:#?}");
    for cs in [by_field, by_label] {
        let plan = Case::settled(cs).pods(pods()).plan();
        assert_eq!(plan.creates.len(), 1, "{plan:#?}");
        assert_eq!(plan.creates[0].revision, NEW);
        assert!(plan.deletes.is_empty(), "{plan:#?}");
    }
}

#[test]
fn a_released_pod_in_preparing_delete_is_deleted() {
    let cs = with_lifecycle(
        cloneset(2),
        Lifecycle {
            pre_delete: Some(hook(&[("hold", "true")], false)),
            ..Lifecycle::default()
        },
    );
    let plan = Case::settled(cs)
        .pods(vec![
            pod("web-a", NEW),
            // The user controller removed the hook label: the pod may go now.
            pod("web-b", NEW).state(LifecycleState::PreparingDelete),
            pod("web-c", NEW),
        ])
        .pvcs(vec![pvc("data-web-b", "b")])
        .plan();
    let got: Vec<(&str, &[String])> = plan
        .deletes
        .iter()
        .map(|d| (d.pod.as_str(), d.pvcs.as_slice()))
        .collect();
    assert_eq!(got, vec![("web-b", &["data-web-b".to_owned()][..])]);
}

#[test]
fn in_place_update_hook_moves_the_pod_to_preparing_update_first() {
    let cs = with_lifecycle(
        policy(cloneset(1), PodUpdatePolicy::InPlaceIfPossible),
        Lifecycle {
            in_place_update: Some(hook(&[("drain", "true")], true)),
            ..Lifecycle::default()
        },
    );
    let plan = Case::new(cs.clone())
        .pods(vec![
            pod("web-a", OLD)
                .label("drain", "true")
                .state(LifecycleState::Normal)
                .in_place_ready(),
        ])
        .plan();
    let c = change(&plan, "web-a");
    assert_eq!(
        patch_label(c, lifecycle::STATE_LABEL),
        Some(&json!("PreparingUpdate"))
    );
    assert!(patch(c).get("spec").is_none(), "images wait: {c:#?}");
    assert_eq!(patch_label(c, REVISION_LABEL), None);
    assert_eq!(
        conditions(c),
        vec![(KRUISE_POD_READY, false, "LifecycleNotReady")]
    );

    // Still hooked in PreparingUpdate: wait.
    let plan = Case::new(cs.clone())
        .pods(vec![
            pod("web-a", OLD)
                .label("drain", "true")
                .state(LifecycleState::PreparingUpdate),
        ])
        .plan();
    assert!(is_quiet(&plan), "{plan:#?}");

    // Released: update now, state Updating.
    let plan = Case::new(cs)
        .pods(vec![
            pod("web-a", OLD).state(LifecycleState::PreparingUpdate),
        ])
        .plan();
    let c = change(&plan, "web-a");
    assert_eq!(
        patch_label(c, lifecycle::STATE_LABEL),
        Some(&json!("Updating"))
    );
    assert_eq!(
        patch(c)["spec"]["containers"],
        json!([{ "name": "app", "image": NEW_IMAGE }])
    );
}

#[test]
fn refresh_moves_lifecycle_states() {
    let pre_normal = || Lifecycle {
        pre_normal: Some(hook(&[("registered", "true")], false)),
        ..Lifecycle::default()
    };
    let in_place = || Lifecycle {
        in_place_update: Some(hook(&[("drain", "true")], false)),
        ..Lifecycle::default()
    };
    let cases: Vec<(&str, Lifecycle, PodBuilder, Option<&str>)> = vec![
        (
            "PreparingNormal, all hooked: Normal",
            pre_normal(),
            pod("web-a", NEW)
                .state(LifecycleState::PreparingNormal)
                .label("registered", "true"),
            Some("Normal"),
        ),
        (
            "PreparingNormal, not hooked yet: stays",
            pre_normal(),
            pod("web-a", NEW).state(LifecycleState::PreparingNormal),
            None,
        ),
        (
            "PreparingNormal without a preNormal hook: Normal",
            in_place(),
            pod("web-a", NEW).state(LifecycleState::PreparingNormal),
            Some("Normal"),
        ),
        (
            "Updating, done, hook not re-attached: Updated",
            in_place(),
            pod("web-a", NEW).state(LifecycleState::Updating),
            Some("Updated"),
        ),
        (
            "Updating, done, hook re-attached: Normal",
            in_place(),
            pod("web-a", NEW)
                .state(LifecycleState::Updating)
                .label("drain", "true"),
            Some("Normal"),
        ),
        (
            "Updated, hook re-attached: Normal",
            in_place(),
            pod("web-a", NEW)
                .state(LifecycleState::Updated)
                .label("drain", "true"),
            Some("Normal"),
        ),
        (
            "Updated, hook not yet re-attached: stays",
            in_place(),
            pod("web-a", NEW).state(LifecycleState::Updated),
            None,
        ),
        (
            "Normal: stays",
            in_place(),
            pod("web-a", NEW).state(LifecycleState::Normal),
            None,
        ),
    ];
    for (name, lifecycle_, p, want) in cases {
        let cs = with_lifecycle(
            policy(cloneset(1), PodUpdatePolicy::InPlaceIfPossible),
            lifecycle_,
        );
        let plan = Case::settled(cs).pods(vec![p]).plan();
        let got = plan
            .pod_changes
            .iter()
            .find(|c| c.pod == "web-a")
            .and_then(|c| patch_label(c, lifecycle::STATE_LABEL))
            .and_then(Value::as_str);
        assert_eq!(got, want, "{name}: {plan:#?}");
        assert!(plan.deletes.is_empty() && plan.creates.is_empty(), "{name}");
    }
}

#[test]
fn a_new_pod_without_a_pre_normal_hook_turns_normal_once_scheduled() {
    // Every pod is created PreparingNormal; without a preNormal hook the refresh moves it
    // to Normal once it is bound to a node, ready or not (OpenKruise 1.9, kruise#2087),
    // so a pod nobody can schedule never reads as Normal.
    let running = || pod("web-a", NEW).state(LifecycleState::PreparingNormal);
    for (name, p, want) in [
        ("unscheduled", running().unscheduled().not_ready(), None),
        (
            "scheduled, not ready",
            running().not_ready(),
            Some("Normal"),
        ),
        ("running", running(), Some("Normal")),
    ] {
        let plan = Case::settled(cloneset(1)).pods(vec![p]).plan();
        let got = plan
            .pod_changes
            .iter()
            .find(|c| c.pod == "web-a")
            .and_then(|c| patch_label(c, lifecycle::STATE_LABEL))
            .and_then(Value::as_str);
        assert_eq!(got, want, "{name}: {plan:#?}");
    }
}

// ---------------------------------------------------------------------------------------
// Refresh: in-place completion, readiness gates, grace periods
// ---------------------------------------------------------------------------------------

#[test]
fn new_pods_get_their_readiness_conditions_set_true() {
    let cases: Vec<(&str, PodBuilder, Vec<(&str, bool, &str)>)> = vec![
        (
            "InPlaceUpdateReady gate without a condition",
            pod("web-a", NEW).gate(INPLACE_UPDATE_READY),
            vec![(INPLACE_UPDATE_READY, true, "PodCreated")],
        ),
        (
            "condition already there",
            pod("web-a", NEW)
                .gate(INPLACE_UPDATE_READY)
                .condition(INPLACE_UPDATE_READY, "True"),
            vec![],
        ),
        (
            "a False condition is left to the update protocol",
            pod("web-a", NEW)
                .gate(INPLACE_UPDATE_READY)
                .condition(INPLACE_UPDATE_READY, "False"),
            vec![],
        ),
        ("no gate", pod("web-a", NEW), vec![]),
        (
            "KruisePodReady gate",
            pod("web-a", NEW).gate(KRUISE_POD_READY),
            vec![(KRUISE_POD_READY, true, "PodCreated")],
        ),
        (
            "KruisePodReady gate in PreparingDelete stays not ready",
            pod("web-a", NEW)
                .gate(KRUISE_POD_READY)
                .state(LifecycleState::PreparingDelete)
                .label("hold", "true"),
            vec![],
        ),
        (
            "both gates",
            pod("web-a", NEW)
                .gate(INPLACE_UPDATE_READY)
                .gate(KRUISE_POD_READY),
            vec![
                (INPLACE_UPDATE_READY, true, "PodCreated"),
                (KRUISE_POD_READY, true, "PodCreated"),
            ],
        ),
    ];
    for (name, p, want) in cases {
        let cs = with_lifecycle(
            policy(cloneset(1), PodUpdatePolicy::InPlaceIfPossible),
            Lifecycle {
                pre_delete: Some(hook(&[("hold", "true")], true)),
                ..Lifecycle::default()
            },
        );
        let plan = Case::settled(cs).pods(vec![p]).plan();
        // Only what turns True here; a hook holding the pod may set False on its own.
        let got: Vec<(&str, bool, &str)> = plan
            .pod_changes
            .iter()
            .filter(|c| c.pod == "web-a")
            .flat_map(conditions)
            .filter(|(_, status, _)| *status)
            .collect();
        assert_eq!(got, want, "{name}: {plan:#?}");
    }
}

fn grace_pod(started: Timestamp, grace_seconds: i32, label_revision: &str) -> PodBuilder {
    let grace = GraceSpec {
        revision: NEW.to_owned(),
        container_images: BTreeMap::from([("app".to_owned(), NEW_IMAGE.to_owned())]),
        container_resources: BTreeMap::new(),
        meta_data_patch: None,
        grace_seconds,
        other: BTreeMap::new(),
    };
    let state = InPlaceUpdateState {
        revision: NEW.to_owned(),
        update_timestamp: Time(started),
        last_container_statuses: BTreeMap::new(),
        other: BTreeMap::new(),
    };
    pod("web-a", label_revision)
        .spec_image(OLD_IMAGE)
        .running(OLD_IMAGE, "sha-old", ts(0), true)
        .gate(INPLACE_UPDATE_READY)
        .condition(INPLACE_UPDATE_READY, "False")
        .annotation(STATE_ANNOTATION, &state.to_annotation().unwrap())
        .annotation(GRACE_ANNOTATION, &grace.to_annotation().unwrap())
}

#[test]
fn grace_period_requeues_then_patches_the_images() {
    let cs = || {
        with(
            policy(cloneset(1), PodUpdatePolicy::InPlaceIfPossible),
            |s| {
                s.update_strategy.in_place_update_strategy = Some(InPlaceUpdateStrategy {
                    grace_period_seconds: 30,
                });
            },
        )
    };
    // Started 10s ago with 30s of grace: wait 20s more.
    let plan = Case::settled(cs())
        .pods(vec![grace_pod(ts(990), 30, NEW)])
        .plan();
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(20)));
    assert!(is_quiet(&plan), "{plan:#?}");

    // Over: the images now, the grace annotation removed, the old image ID recorded.
    let plan = Case::settled(cs())
        .pods(vec![grace_pod(ts(960), 30, NEW)])
        .plan();
    let c = change(&plan, "web-a");
    assert_eq!(
        patch(c)["spec"]["containers"],
        json!([{ "name": "app", "image": NEW_IMAGE }])
    );
    assert_eq!(patch_annotation(c, GRACE_ANNOTATION), Some(&Value::Null));
    let state = InPlaceUpdateState::parse(
        patch_annotation(c, STATE_ANNOTATION)
            .and_then(Value::as_str)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(state.last_container_statuses["app"].image_id, "sha-old");
    assert_eq!(c.resource_version.as_deref(), Some("7"));
    assert_eq!(plan.requeue_after, None);

    // The pod's revision moved on meanwhile: drop the grace annotation.
    let plan = Case::new(cs())
        .pods(vec![grace_pod(ts(990), 30, OLD)])
        .plan();
    let c = change(&plan, "web-a");
    assert_eq!(patch_annotation(c, GRACE_ANNOTATION), Some(&Value::Null));
    assert!(patch(c).get("spec").is_none());
}

#[test]
fn shortest_requeue_wins() {
    let cs = policy(cloneset(2), PodUpdatePolicy::InPlaceIfPossible);
    let mut b = grace_pod(ts(995), 30, NEW);
    b.0.metadata.name = Some("web-b".to_owned());
    let plan = Case::settled(cs)
        .pods(vec![grace_pod(ts(990), 30, NEW), b])
        .plan();
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(20)));
}

#[test]
fn a_bad_int_or_percent_is_an_error() {
    let cs = with(cloneset(3), |s| {
        s.update_strategy.max_unavailable = Some(IntOrString::String("lots".into()));
    });
    let err = Case::new(cs)
        .pods(names(3, OLD))
        .try_plan()
        .expect_err("bad maxUnavailable");
    assert!(err.to_string().contains("maxUnavailable"), "{err}");
}

/// The deletes without their free-text detail, for exact comparison.
fn without_detail(deletes: &[Delete]) -> Vec<Delete> {
    deletes
        .iter()
        .map(|d| Delete {
            detail: String::new(),
            ..d.clone()
        })
        .collect()
}

/// After a claim-template-only change relabelled a pod (no restart), a later image-only
/// change recreates it: its claims still come from the revision it was created with.
#[test]
fn a_pod_relabelled_by_a_claim_template_change_is_recreated_by_a_later_image_change() {
    const FIRST: &str = "web-firsthash0";
    let vct = |image: &str, size: &str| RevisionSpec {
        template: template(image),
        volume_claim_templates: vec![claim_template("data", size)],
    };
    // The claim-template change relabels the pod and records where it came from.
    let relabel = Case::new(policy(cloneset(1), PodUpdatePolicy::InPlaceIfPossible))
        .old_revision(vct(OLD_IMAGE, "1Gi"))
        .new_revision(vct(OLD_IMAGE, "2Gi"))
        .pods(vec![pod("web-a", OLD).in_place_ready()])
        .pvcs(vec![pvc("data-web-a", "a")])
        .plan();
    let c = change(&relabel, "web-a");
    assert_eq!(patch_label(c, REVISION_LABEL), Some(&json!(NEW)));
    assert_eq!(
        patch_annotation(c, CLAIMS_REVISION_ANNOTATION),
        Some(&json!(OLD))
    );

    // Then the image changes: FIRST (1Gi, v1) → OLD (2Gi, v1, the pod's label) → NEW (2Gi, v2).
    let mut case = Case::new(policy(cloneset(1), PodUpdatePolicy::InPlaceIfPossible))
        .old_revision(vct(OLD_IMAGE, "2Gi"))
        .new_revision(vct(NEW_IMAGE, "2Gi"));
    case.revisions
        .insert(FIRST.to_owned(), vct(OLD_IMAGE, "1Gi"));
    let relabelled = pod("web-a", OLD)
        .in_place_ready()
        .annotation(CLAIMS_REVISION_ANNOTATION, FIRST);
    let plan = case
        .pods(vec![relabelled])
        .pvcs(vec![pvc("data-web-a", "a")])
        .plan();
    assert_eq!(
        deleted(&plan),
        [("web-a", DeleteReason::RecreateUpdate)],
        "{plan:#?}"
    );
    assert_eq!(plan.deletes[0].pvcs, ["data-web-a"]);

    // A pod created at OLD (no annotation) updates in place.
    let mut case = Case::new(policy(cloneset(1), PodUpdatePolicy::InPlaceIfPossible))
        .old_revision(vct(OLD_IMAGE, "2Gi"))
        .new_revision(vct(NEW_IMAGE, "2Gi"));
    case.revisions
        .insert(FIRST.to_owned(), vct(OLD_IMAGE, "1Gi"));
    let plan = case
        .pods(vec![pod("web-a", OLD).in_place_ready()])
        .pvcs(vec![pvc("data-web-a", "a")])
        .plan();
    assert!(plan.deletes.is_empty(), "{plan:#?}");
    assert!(patch_annotation(change(&plan, "web-a"), STATE_ANNOTATION).is_some());
}

// ---------------------------------------------------------------------------------------
// Huge replicas: one sync of creates, never the replicas
// ---------------------------------------------------------------------------------------

#[test]
fn huge_replicas_plan_one_sync_of_creates_not_the_replicas() {
    use crate::workload::plan::MAX_CREATES_PER_SYNC as CAP;
    let max = i32::MAX;
    let percent = |p: &str| IntOrString::String(p.to_owned());
    let rollout = |s: &mut CloneSetSpec| {
        s.update_strategy.partition = Some(IntOrString::String("50%".into()));
        s.update_strategy.max_unavailable = Some(IntOrString::String("100%".into()));
        s.update_strategy.max_surge = Some(IntOrString::String("100%".into()));
    };
    // (case, set, pods, during a rollout, creates, of them on the current revision)
    let cases: Vec<(&str, CloneSet, Vec<PodBuilder>, bool, usize, usize)> = vec![
        ("int32 max from none", cloneset(max), vec![], false, CAP, 0),
        (
            "int32 max beside 300 pods",
            cloneset(max),
            names(300, NEW),
            false,
            CAP,
            0,
        ),
        (
            "scale maxUnavailable 100% of int32 max",
            with(cloneset(max), |s| {
                s.scale_strategy.max_unavailable = Some(percent("100%"));
            }),
            vec![],
            false,
            CAP,
            0,
        ),
        (
            "scale maxUnavailable 9",
            with(cloneset(max), |s| {
                s.scale_strategy.max_unavailable = Some(IntOrString::Int(9));
            }),
            vec![],
            false,
            9,
            0,
        ),
        (
            "partition 50%, surge 100% of int32 max",
            with(cloneset(max), rollout),
            names(3, OLD),
            true,
            CAP,
            CAP,
        ),
        (
            "partition int32 max",
            with(cloneset(max), |s| {
                s.update_strategy.partition = Some(IntOrString::Int(max));
            }),
            vec![],
            true,
            CAP,
            CAP,
        ),
        (
            "just above the cap",
            cloneset(701),
            names(200, NEW),
            false,
            CAP,
            0,
        ),
        (
            "below the cap, as before",
            cloneset(300),
            names(100, NEW),
            false,
            200,
            0,
        ),
    ];
    for (name, cs, pods, rolling, count, old) in cases {
        let case = if rolling {
            Case::new(cs)
        } else {
            Case::settled(cs)
        };
        let plan = case.pods(pods).plan();
        assert_eq!(plan.creates.len(), count, "{name}");
        let on_old = plan.creates.iter().filter(|c| c.revision == OLD).count();
        assert_eq!(on_old, old, "{name}");
        assert!(plan.deletes.is_empty(), "{name}");
    }
}

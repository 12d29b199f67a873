//! The pure planners on any object their CRD schemas admit, extremes included (int32
//! bounds, 0, empty lists, 10,000-entry lists, int-or-percent from "0%" to "100%"), beside
//! a simulated cluster of some hundreds of pods or nodes: each plan returns within a time
//! bound and an allocation bound that grow with the pods, nodes and list entries but not
//! with `replicas`, and never plans more creates than one sync's slow start carries out.
//!
//! Allocations are counted by a counting global allocator, which is why this is a test
//! binary of its own: the allocator affects nothing else. Every property holds the same
//! lock while it measures, so one test's allocations never count against another's.

use std::alloc::System;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Container, Node, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

use stevedore_controlplane::api::broadcastjob::{
    BroadcastJobStatus, FailurePolicy, FailurePolicyType,
};
use stevedore_controlplane::api::cloneset::{
    CloneSetScaleStrategy, CloneSetSpec, CloneSetUpdateStrategy, CloneSetUpdateStrategyType,
};
use stevedore_controlplane::api::daemonset::{
    DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet, RollingUpdateType,
};
use stevedore_controlplane::api::statefulset::{
    PodManagementPolicy, RollingUpdateStatefulSetStrategy, StatefulSetOrdinals,
    StatefulSetScaleStrategy, StatefulSetSpec, StatefulSetUpdateStrategy,
};
use stevedore_controlplane::api::{
    BroadcastJob, BroadcastJobSpec, CloneSet, DaemonSet, StatefulSet,
};
use stevedore_controlplane::daemonset::adapter::DaemonSetWorkload;
use stevedore_controlplane::workload::actions::Create;
use stevedore_controlplane::workload::adapter::PodSetWorkload as _;
use stevedore_controlplane::workload::execute::MAX_CREATES_PER_SYNC;
use stevedore_controlplane::workload::revision_spec::RevisionSpec;
use stevedore_controlplane::workload::template_defaults;
use stevedore_controlplane::{broadcastjob, cloneset, daemonset, statefulset};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Held while measuring: the allocator's counts are process-wide.
static MEASURING: Mutex<()> = Mutex::new(());

/// A debug build on a busy two-core machine plans a few hundred pods in milliseconds; a
/// plan that walks `replicas` takes minutes.
const TIME_BOUND: Duration = Duration::from_secs(5);

const OLD: &str = "web-old";
const NEW: &str = "web-new";

/// The measuring lock, once the planners' process-wide tables are built: the pod-spec
/// schemas that template comparisons strip defaults with are made at their first use
/// (~10 MB allocated once per process), which is no plan's cost, and would otherwise fall
/// on whichever case happens to plan first.
fn measuring() -> MutexGuard<'static, ()> {
    let guard = MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let template = template(image(NEW));
    assert!(template_defaults::same_template(&template, &template));
    guard
}

/// The most a plan may allocate (bytes, counted over the call, freed or not): a fixed
/// part (one sync's creates among it), 16 KiB per pod or node and 256 bytes per entry of
/// a spec list — nothing per replica. Measured in a debug build: at most 2.6 MB for 400
/// pods, 7 KiB per pod, 30 bytes per list entry.
fn allocation_bound(objects: usize, list_entries: usize) -> usize {
    (2 << 20) + objects * (16 << 10) + list_entries * 256
}

/// What planning took.
struct Cost {
    elapsed: Duration,
    bytes: usize,
}

fn measure<T>(plan: impl FnOnce() -> T) -> (T, Cost) {
    let region = Region::new(GLOBAL);
    let start = Instant::now();
    let out = plan();
    let elapsed = start.elapsed();
    let bytes = region.change().bytes_allocated;
    (out, Cost { elapsed, bytes })
}

fn check_cost(cost: &Cost, objects: usize, list_entries: usize) -> Result<(), TestCaseError> {
    let bound = allocation_bound(objects, list_entries);
    prop_assert!(
        cost.elapsed <= TIME_BOUND,
        "planning took {:?} (bound {TIME_BOUND:?})",
        cost.elapsed
    );
    prop_assert!(
        cost.bytes <= bound,
        "planning allocated {} bytes (bound {bound} for {objects} pods or nodes and {list_entries} list entries)",
        cost.bytes
    );
    Ok(())
}

/// Cases per planner: enough that the extremes come up, few enough for about 30 s in a
/// debug build.
fn config(cases: u32) -> Config {
    Config {
        cases,
        max_shrink_iters: 32,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    }
}

// ---------------------------------------------------------------------------------------
// What the schemas admit
// ---------------------------------------------------------------------------------------

/// `replicas` and other int32 counts >= 0, the bounds most often.
fn count() -> impl Strategy<Value = i32> {
    prop_oneof![
        Just(0),
        Just(1),
        Just(i32::MAX),
        Just(i32::MAX - 1),
        0..700_i32,
        0..=i32::MAX,
    ]
}

/// An int-or-percent the schema's rule admits: an integer >= 0 or "0%".."100%".
fn int_or_percent() -> impl Strategy<Value = IntOrString> {
    prop_oneof![
        Just(IntOrString::Int(0)),
        Just(IntOrString::Int(i32::MAX)),
        count().prop_map(IntOrString::Int),
        Just(IntOrString::String("0%".to_owned())),
        Just(IntOrString::String("100%".to_owned())),
        (0..=100_u8).prop_map(|p| IntOrString::String(format!("{p}%"))),
    ]
}

fn optional<T: std::fmt::Debug + Clone>(
    value: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    prop_oneof![Just(None), value.prop_map(Some)]
}

/// How many entries a spec list has: none, a few, or 10,000.
fn list_len() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0), 1..20_usize, Just(10_000)]
}

/// How many pods or nodes the simulated cluster has.
fn cluster_size() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0), 1..40_usize, 200..=400_usize]
}

/// A deterministic stream of numbers from a seed (splitmix64), so a case's cluster and
/// lists are generated cheaply and reproduced from the seed proptest reports.
struct Seq(u64);

impl Seq {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn ordinal(&mut self, below: i64) -> i32 {
        i32::try_from(self.below(u64::try_from(below).unwrap_or(1))).unwrap_or(i32::MAX)
    }
}

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).expect("a valid time")
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), "web".to_owned())])
}

fn template(image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels()),
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

fn image(revision: &str) -> &'static str {
    if revision == OLD { "web:1" } else { "web:2" }
}

fn selector() -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels()),
        ..LabelSelector::default()
    }
}

/// Gives a freshly built pod a UID and a state: mostly Running and Ready, some Pending,
/// Failed or terminating.
fn settle(mut pod: Pod, seq: &mut Seq, name: String) -> Pod {
    pod.metadata.uid = Some(format!("uid-{name}"));
    pod.metadata.name = Some(name);
    pod.metadata.creation_timestamp = Some(Time(ts(0)));
    let ready = PodCondition {
        type_: "Ready".to_owned(),
        status: "True".to_owned(),
        last_transition_time: Some(Time(ts(0))),
        ..PodCondition::default()
    };
    let phase = match seq.below(10) {
        0 => "Pending",
        1 => "Failed",
        _ => "Running",
    };
    if seq.chance(5) {
        pod.metadata.deletion_timestamp = Some(Time(ts(50)));
    }
    pod.status = Some(PodStatus {
        phase: Some(phase.to_owned()),
        conditions: (phase == "Running").then(|| vec![ready]),
        ..PodStatus::default()
    });
    pod
}

fn revision_of(seq: &mut Seq) -> &'static str {
    if seq.chance(50) { OLD } else { NEW }
}

fn nodes(count: usize) -> Vec<Node> {
    (0..count)
        .map(|i| Node {
            metadata: ObjectMeta {
                name: Some(format!("node-{i:03}")),
                labels: Some(BTreeMap::from([("role".to_owned(), "edge".to_owned())])),
                ..ObjectMeta::default()
            },
            ..Node::default()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// CloneSet
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct CloneSetCase {
    replicas: i32,
    partition: Option<IntOrString>,
    max_unavailable: Option<IntOrString>,
    max_surge: Option<IntOrString>,
    scale_max_unavailable: Option<IntOrString>,
    paused: bool,
    in_place: bool,
    disable_pvc_reuse: bool,
    pods_to_delete: usize,
    pods: usize,
    rollout: bool,
    seed: u64,
}

fn cloneset_case() -> impl Strategy<Value = CloneSetCase> {
    (
        (
            count(),
            optional(int_or_percent()),
            optional(int_or_percent()),
            optional(int_or_percent()),
            optional(int_or_percent()),
        ),
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            list_len(),
            cluster_size(),
            any::<bool>(),
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                (replicas, partition, max_unavailable, max_surge, scale_max_unavailable),
                (paused, in_place, disable_pvc_reuse, pods_to_delete, pods, rollout, seed),
            )| CloneSetCase {
                replicas,
                partition,
                max_unavailable,
                max_surge,
                scale_max_unavailable,
                paused,
                in_place,
                disable_pvc_reuse,
                pods_to_delete,
                pods,
                rollout,
                seed,
            },
        )
}

fn check_cloneset(case: &CloneSetCase) -> Result<(), TestCaseError> {
    let mut seq = Seq(case.seed);
    let mut cs = CloneSet::new(
        "web",
        CloneSetSpec {
            replicas: Some(case.replicas),
            selector: selector(),
            template: template(image(NEW)),
            scale_strategy: CloneSetScaleStrategy {
                max_unavailable: case.scale_max_unavailable.clone(),
                disable_pvc_reuse: case.disable_pvc_reuse,
                ..CloneSetScaleStrategy::default()
            },
            update_strategy: CloneSetUpdateStrategy {
                type_: case
                    .in_place
                    .then_some(CloneSetUpdateStrategyType::InPlaceIfPossible),
                partition: case.partition.clone(),
                max_unavailable: case.max_unavailable.clone(),
                max_surge: case.max_surge.clone(),
                paused: case.paused,
                ..CloneSetUpdateStrategy::default()
            },
            ..CloneSetSpec::default()
        },
    );
    cs.metadata.namespace = Some("default".to_owned());
    cs.metadata.uid = Some("cs-uid".to_owned());
    let revisions = BTreeMap::from([OLD, NEW].map(|r| {
        let spec = RevisionSpec {
            template: template(image(r)),
            volume_claim_templates: Vec::new(),
        };
        (r.to_owned(), spec)
    }));
    let pods: Vec<Pod> = (0..case.pods)
        .map(|i| {
            let revision = revision_of(&mut seq);
            let create = Create {
                instance_id: format!("id{i}"),
                revision: revision.to_owned(),
            };
            let pod = cs.new_pod(&create, &revisions[revision]);
            settle(pod, &mut seq, format!("web-id{i}"))
        })
        .collect();
    cs.spec.scale_strategy.pods_to_delete = (0..case.pods_to_delete)
        .map(|i| match seq.below(3) {
            0 if case.pods > 0 => format!("web-id{}", seq.below(case.pods as u64)),
            _ => format!("gone-{i}"),
        })
        .collect();
    let snap = cloneset::plan::Snapshot {
        cloneset: &cs,
        pods: pods.iter().collect(),
        pvcs: Vec::new(),
        update_revision: NEW,
        current_revision: if case.rollout { OLD } else { NEW },
        revisions: &revisions,
        now: ts(100),
    };
    let (planned, cost) = measure(|| cloneset::plan::plan(&snap));
    check_cost(&cost, case.pods, case.pods_to_delete)?;
    if let Ok(planned) = planned {
        let creates = planned.plan.creates.len();
        prop_assert!(
            creates <= MAX_CREATES_PER_SYNC,
            "the CloneSet plan has {creates} creates, more than one sync's {MAX_CREATES_PER_SYNC}"
        );
    }
    Ok(())
}

#[test]
fn cloneset_planning_is_bounded() {
    let _measuring = measuring();
    proptest!(config(48), |(case in cloneset_case())| check_cloneset(&case)?);
}

// ---------------------------------------------------------------------------------------
// Advanced StatefulSet
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct StatefulSetCase {
    replicas: i32,
    start: Option<i32>,
    reserve_ordinals: usize,
    parallel: bool,
    partition: Option<i32>,
    max_unavailable: Option<IntOrString>,
    scale_max_unavailable: Option<IntOrString>,
    pods: usize,
    rollout: bool,
    seed: u64,
}

fn statefulset_case() -> impl Strategy<Value = StatefulSetCase> {
    (
        (
            count(),
            optional(prop_oneof![Just(0), 0..10_i32, (i32::MAX - 5)..=i32::MAX]),
            list_len(),
            any::<bool>(),
            optional(count()),
        ),
        (
            optional(int_or_percent()),
            optional(int_or_percent()),
            cluster_size(),
            any::<bool>(),
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                (replicas, start, reserve_ordinals, parallel, partition),
                (max_unavailable, scale_max_unavailable, pods, rollout, seed),
            )| StatefulSetCase {
                replicas,
                start,
                reserve_ordinals,
                parallel,
                partition,
                max_unavailable,
                scale_max_unavailable,
                pods,
                rollout,
                seed,
            },
        )
}

/// `reserveOrdinals` entries the schema admits: ordinals and ranges `"<from>-<to>"`,
/// small and huge.
fn reserve_entry(seq: &mut Seq) -> IntOrString {
    match seq.below(4) {
        0 => IntOrString::Int(seq.ordinal(1_000)),
        1 => IntOrString::String(seq.ordinal(1_000).to_string()),
        2 => {
            let from = seq.ordinal(1_000);
            let to = from.saturating_add(seq.ordinal(50));
            IntOrString::String(format!("{from}-{to}"))
        }
        _ => {
            let from = seq.ordinal(i64::from(i32::MAX));
            let to = from.saturating_add(seq.ordinal(i64::from(i32::MAX)));
            IntOrString::String(format!("{from}-{to}"))
        }
    }
}

fn check_statefulset(case: &StatefulSetCase) -> Result<(), TestCaseError> {
    let mut seq = Seq(case.seed);
    let policy = if case.parallel {
        PodManagementPolicy::Parallel
    } else {
        PodManagementPolicy::OrderedReady
    };
    let mut set = StatefulSet::new(
        "web",
        StatefulSetSpec {
            replicas: Some(case.replicas),
            selector: selector(),
            template: template(image(NEW)),
            service_name: Some("web".to_owned()),
            pod_management_policy: Some(policy),
            ordinals: case.start.map(|start| StatefulSetOrdinals { start }),
            reserve_ordinals: (0..case.reserve_ordinals)
                .map(|_| reserve_entry(&mut seq))
                .collect(),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: None,
                rolling_update: Some(RollingUpdateStatefulSetStrategy {
                    partition: case.partition,
                    max_unavailable: case.max_unavailable.clone(),
                    ..RollingUpdateStatefulSetStrategy::default()
                }),
            }),
            scale_strategy: Some(StatefulSetScaleStrategy {
                max_unavailable: case.scale_max_unavailable.clone(),
            }),
            ..StatefulSetSpec::default()
        },
    );
    set.metadata.namespace = Some("default".to_owned());
    set.metadata.uid = Some("web-uid".to_owned());
    let revisions = BTreeMap::from([OLD, NEW].map(|r| (r.to_owned(), template(image(r)))));
    // Ordinals low and dense, a few far up (a set that once had huge replicas).
    let ordinals: BTreeSet<i32> = (0..case.pods)
        .map(|_| match seq.below(10) {
            0 => seq.ordinal(i64::from(i32::MAX)),
            _ => seq.ordinal(i64::try_from(case.pods * 2).unwrap_or(1)),
        })
        .collect();
    let pods: Vec<Pod> = ordinals
        .iter()
        .map(|ordinal| {
            let revision = revision_of(&mut seq);
            let create = Create {
                instance_id: ordinal.to_string(),
                revision: revision.to_owned(),
            };
            let pod = set.new_pod(&create, &revisions[revision]);
            settle(pod, &mut seq, format!("web-{ordinal}"))
        })
        .collect();
    let snap = statefulset::plan::Snapshot {
        set: &set,
        pods: pods.iter().collect(),
        claims: Vec::new(),
        update_revision: NEW,
        current_revision: if case.rollout { OLD } else { NEW },
        revisions: &revisions,
        now: ts(100),
    };
    let (planned, cost) = measure(|| statefulset::plan::plan(&snap));
    check_cost(&cost, pods.len(), case.reserve_ordinals)?;
    if let Ok(planned) = planned {
        let creates = planned.plan.creates.len();
        prop_assert!(
            creates <= MAX_CREATES_PER_SYNC,
            "the StatefulSet plan has {creates} creates, more than one sync's {MAX_CREATES_PER_SYNC}"
        );
        if !case.parallel {
            prop_assert!(
                planned.plan.creates.len() <= 1,
                "OrderedReady creates one at a time"
            );
        }
    }
    Ok(())
}

#[test]
fn statefulset_planning_is_bounded() {
    let _measuring = measuring();
    proptest!(config(48), |(case in statefulset_case())| check_statefulset(&case)?);
}

// ---------------------------------------------------------------------------------------
// Advanced DaemonSet
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct DaemonSetCase {
    burst_replicas: Option<IntOrString>,
    max_unavailable: Option<IntOrString>,
    max_surge: Option<IntOrString>,
    partition: Option<i32>,
    rolling_type: u8,
    nodes: usize,
    seed: u64,
}

fn daemonset_case() -> impl Strategy<Value = DaemonSetCase> {
    (
        optional(int_or_percent()),
        optional(int_or_percent()),
        optional(int_or_percent()),
        optional(count()),
        0..3_u8,
        prop_oneof![1 => Just(0), 1 => 1..40_usize, 3 => 400..=1_000_usize],
        any::<u64>(),
    )
        .prop_map(
            |(burst_replicas, max_unavailable, max_surge, partition, rolling_type, nodes, seed)| {
                DaemonSetCase {
                    burst_replicas,
                    max_unavailable,
                    max_surge,
                    partition,
                    rolling_type,
                    nodes,
                    seed,
                }
            },
        )
}

fn check_daemonset(case: &DaemonSetCase) -> Result<(), TestCaseError> {
    let mut seq = Seq(case.seed);
    let rolling_update_type = match case.rolling_type {
        0 => RollingUpdateType::Standard,
        1 => RollingUpdateType::Surging,
        _ => RollingUpdateType::InPlaceIfPossible,
    };
    let mut ds = DaemonSet::new(
        "web",
        DaemonSetSpec {
            selector: selector(),
            template: template(image(NEW)),
            burst_replicas: case.burst_replicas.clone(),
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: None,
                rolling_update: Some(RollingUpdateDaemonSet {
                    rolling_update_type: Some(rolling_update_type),
                    max_unavailable: case.max_unavailable.clone(),
                    max_surge: case.max_surge.clone(),
                    partition: case.partition,
                    ..RollingUpdateDaemonSet::default()
                }),
            }),
            ..DaemonSetSpec::default()
        },
    );
    ds.metadata.namespace = Some("default".to_owned());
    ds.metadata.uid = Some("ds-uid".to_owned());
    let nodes = nodes(case.nodes);
    let workload = DaemonSetWorkload {
        ds: &ds,
        desired: 0,
        held_back: BTreeSet::new(),
    };
    let revisions = BTreeMap::from([OLD, NEW].map(|r| (r.to_owned(), template(image(r)))));
    // A share of the nodes (from none to all, low shares more often) runs a pod, some two.
    let fill = seq.below(101).pow(2) / 100;
    let mut pods = Vec::new();
    for node in &nodes {
        let node = node.metadata.name.clone().unwrap_or_default();
        let copies = if seq.chance(fill) {
            1 + seq.below(2)
        } else {
            0
        };
        for copy in 0..copies {
            let revision = revision_of(&mut seq);
            let create = Create {
                instance_id: node.clone(),
                revision: revision.to_owned(),
            };
            let mut pod = workload.new_pod(&create, &revisions[revision]);
            pod.spec.get_or_insert_default().node_name = Some(node.clone());
            pods.push(settle(pod, &mut seq, format!("web-{node}-{copy}")));
        }
    }
    let snap = daemonset::plan::Snapshot {
        ds: &ds,
        nodes: nodes.iter().collect(),
        pods: pods.iter().collect(),
        update_revision: NEW,
        current_revision: OLD,
        revisions: &revisions,
        failed_backoff: &BTreeSet::new(),
        usage: &HashMap::new(),
        now: ts(100),
    };
    let (planned, cost) = measure(|| daemonset::plan::plan(&snap));
    check_cost(&cost, nodes.len() + pods.len(), 0)?;
    if let Ok(planned) = planned {
        let creates = planned.plan.creates.len();
        prop_assert!(
            creates <= MAX_CREATES_PER_SYNC,
            "the DaemonSet plan has {creates} creates, more than one sync's {MAX_CREATES_PER_SYNC}"
        );
    }
    Ok(())
}

#[test]
fn daemonset_planning_is_bounded() {
    let _measuring = measuring();
    proptest!(config(96), |(case in daemonset_case())| check_daemonset(&case)?);
}

// ---------------------------------------------------------------------------------------
// BroadcastJob
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct BroadcastJobCase {
    parallelism: Option<IntOrString>,
    failure_policy: FailurePolicyType,
    nodes: usize,
    seed: u64,
}

fn broadcastjob_case() -> impl Strategy<Value = BroadcastJobCase> {
    let failure_policy = prop_oneof![
        Just(FailurePolicyType::Continue),
        Just(FailurePolicyType::FailFast),
        Just(FailurePolicyType::Pause),
    ];
    (
        optional(int_or_percent()),
        failure_policy,
        prop_oneof![1 => Just(0), 1 => 1..40_usize, 3 => 400..=1_000_usize],
        any::<u64>(),
    )
        .prop_map(
            |(parallelism, failure_policy, nodes, seed)| BroadcastJobCase {
                parallelism,
                failure_policy,
                nodes,
                seed,
            },
        )
}

fn check_broadcastjob(case: &BroadcastJobCase) -> Result<(), TestCaseError> {
    let mut seq = Seq(case.seed);
    let spec = BroadcastJobSpec {
        parallelism: case.parallelism.clone(),
        template: template(image(NEW)),
        failure_policy: FailurePolicy {
            type_: Some(case.failure_policy),
            ..FailurePolicy::default()
        },
        ..BroadcastJobSpec::default()
    };
    let mut job = BroadcastJob::new("job", spec.clone());
    job.metadata.namespace = Some("default".to_owned());
    job.metadata.uid = Some("job-uid".to_owned());
    let nodes = nodes(case.nodes);
    // A share of the nodes (from none to all, low shares more often) already has its
    // pod, in any phase.
    let fill = seq.below(101).pow(2) / 100;
    let mut pods = Vec::new();
    for node in nodes.iter().filter_map(|n| n.metadata.name.as_deref()) {
        if !seq.chance(fill) {
            continue;
        }
        if let Some(pod) = broadcastjob::pods::new_pod(&job, node) {
            pods.push(settle(pod, &mut seq, format!("job-{node}")));
        }
    }
    let status = BroadcastJobStatus::default();
    let snap = broadcastjob::plan::Snapshot {
        spec: &spec,
        status: &status,
        nodes: &nodes,
        pods: &pods,
        backing_off: &BTreeSet::new(),
        now: ts(100),
    };
    let (planned, cost) = measure(|| broadcastjob::plan::plan(&snap));
    check_cost(&cost, nodes.len() + pods.len(), 0)?;
    let creates = planned.create_on.len();
    prop_assert!(
        creates <= MAX_CREATES_PER_SYNC,
        "the BroadcastJob plan creates on {creates} nodes, more than one sync's {MAX_CREATES_PER_SYNC}"
    );
    Ok(())
}

#[test]
fn broadcastjob_planning_is_bounded() {
    let _measuring = measuring();
    proptest!(config(96), |(case in broadcastjob_case())| check_broadcastjob(&case)?);
}

/// The case proptest once failed on (its seeds change run to run, so it is kept here): a
/// recreate rollout of 289 pods allocated 15.6 MB when it was the first case to compare
/// templates (see `measuring`), and compared the same two revisions once per pod.
#[test]
fn a_recreate_rollout_of_the_first_case_is_within_bounds() {
    let _measuring = measuring();
    let case = CloneSetCase {
        replicas: i32::MAX,
        partition: None,
        max_unavailable: Some(IntOrString::String("100%".into())),
        max_surge: None,
        scale_max_unavailable: Some(IntOrString::String("0%".into())),
        paused: false,
        in_place: false,
        disable_pvc_reuse: false,
        pods_to_delete: 0,
        pods: 289,
        rollout: true,
        seed: 15_744_904_977_559_193_654,
    };
    if let Err(err) = check_cloneset(&case) {
        panic!("{err}");
    }
}

//! The StatefulSet planner over the shared engine: OrderedReady vs Parallel scale,
//! ordinals.start and reserveOrdinals (seed 002), PVC retention on scale-down, partition
//! by ordinal, maxUnavailable with unready pods counted, in place vs recreate.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaim, Pod, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{Halt, Snapshot, StatefulSetPlan, plan};
use crate::api::StatefulSet;
use crate::api::common::{
    Lifecycle, LifecycleHook, PodUpdatePolicy, UpdatePriorityStrategy, UpdatePriorityWeightTerm,
};
use crate::api::statefulset::{
    PodManagementPolicy, PvcRetentionPolicy, PvcRetentionPolicyType,
    RollingUpdateStatefulSetStrategy, StatefulSetOrdinals, StatefulSetScaleStrategy,
    StatefulSetSpec, StatefulSetUpdateStrategy, StatefulSetUpdateStrategyType,
    UnorderedUpdateStrategy,
};
use crate::workload::actions::{ChangeReason, Create, DeleteReason};
use crate::workload::adapter::PodSetWorkload;
use crate::workload::test_pods::{at as ts, run_on};

/// (case, pods, ordinals created, halt)
type CreateCase = (&'static str, Vec<Pod>, Vec<&'static str>, Option<Halt>);

pub(super) const V1: &str = "web-aaa111";
pub(super) const V2: &str = "web-bbb222";

fn template(image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "nginx".to_owned(),
                image: Some(image.to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    }
}

fn claim_template(name: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..PersistentVolumeClaim::default()
    }
}

/// The `web` StatefulSet: `replicas` pods, a `www` claim per pod, Service `nginx`.
pub(super) fn web(replicas: i32, policy: PodManagementPolicy) -> StatefulSet {
    let mut set = StatefulSet::new(
        "web",
        StatefulSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
                ..LabelSelector::default()
            },
            template: template("nginx:1"),
            volume_claim_templates: vec![claim_template("www")],
            service_name: Some("nginx".to_owned()),
            pod_management_policy: Some(policy),
            ..StatefulSetSpec::default()
        },
    );
    set.metadata.namespace = Some("default".to_owned());
    set.metadata.uid = Some("web-uid".to_owned());
    set
}

pub(super) fn rolling(set: &mut StatefulSet, rolling: RollingUpdateStatefulSetStrategy) {
    set.spec.update_strategy = Some(StatefulSetUpdateStrategy {
        type_: Some(StatefulSetUpdateStrategyType::RollingUpdate),
        rolling_update: Some(rolling),
    });
}

fn revisions() -> BTreeMap<String, PodTemplateSpec> {
    BTreeMap::from([
        (V1.to_owned(), template("nginx:1")),
        (V2.to_owned(), template("nginx:2")),
    ])
}

/// The pod of `ordinal` at `revision`, Running and Ready since `ts(0)` with its gates True.
pub(super) fn running(set: &StatefulSet, ordinal: i32, revision: &str) -> Pod {
    let create = Create {
        instance_id: ordinal.to_string(),
        revision: revision.to_owned(),
    };
    let image = if revision == V1 { "nginx:1" } else { "nginx:2" };
    let mut pod = set.new_pod(&create, &template(image));
    pod.metadata.uid = Some(format!("uid-{ordinal}"));
    // A running pod has been through the refresh that moves it from PreparingNormal.
    pod.metadata.labels.get_or_insert_default().insert(
        crate::workload::lifecycle::STATE_LABEL.to_owned(),
        crate::workload::lifecycle::LifecycleState::Normal
            .as_str()
            .to_owned(),
    );
    run_on(pod, &format!("node-{ordinal}"))
}

/// The pod of `ordinal`, created but not ready.
pub(super) fn pending(set: &StatefulSet, ordinal: i32) -> Pod {
    let mut pod = running(set, ordinal, V1);
    pod.status = Some(PodStatus {
        phase: Some("Pending".to_owned()),
        ..PodStatus::default()
    });
    pod
}

fn in_phase(mut pod: Pod, phase: &str) -> Pod {
    pod.status.get_or_insert_default().phase = Some(phase.to_owned());
    pod
}

fn terminating(mut pod: Pod) -> Pod {
    pod.metadata.deletion_timestamp = Some(Time(ts(5)));
    pod
}

fn claim(name: &str) -> PersistentVolumeClaim {
    claim_template(name)
}

/// One sync of `set` over `pods` with `claims`, updating to `update`.
pub(super) fn sync_with(
    set: &StatefulSet,
    pods: &[Pod],
    claims: &[PersistentVolumeClaim],
    update: &str,
) -> StatefulSetPlan {
    let revisions = revisions();
    let snap = Snapshot {
        set,
        pods: pods.iter().collect(),
        claims: claims.iter().collect(),
        update_revision: update,
        current_revision: V1,
        revisions: &revisions,
        now: ts(100),
    };
    plan(&snap).expect("a plan")
}

fn sync(set: &StatefulSet, pods: &[Pod]) -> StatefulSetPlan {
    sync_with(set, pods, &[], V1)
}

fn created(out: &StatefulSetPlan) -> Vec<&str> {
    out.plan
        .creates
        .iter()
        .map(|c| c.instance_id.as_str())
        .collect()
}

fn deleted(out: &StatefulSetPlan) -> Vec<(&str, DeleteReason)> {
    out.plan
        .deletes
        .iter()
        .map(|d| (d.pod.as_str(), d.reason))
        .collect()
}

#[test]
fn ordered_ready_creates_one_pod_at_a_time_after_the_one_before_is_ready() {
    let set = web(3, PodManagementPolicy::OrderedReady);
    let cases: Vec<CreateCase> = vec![
        ("none yet: the lowest", vec![], vec!["0"], None),
        ("0 ready: next", vec![running(&set, 0, V1)], vec!["1"], None),
        (
            "0 not ready: wait on it",
            vec![pending(&set, 0)],
            vec![],
            Some(Halt::NotHealthy("web-0".into())),
        ),
        (
            "a hole is filled first",
            vec![running(&set, 0, V1), running(&set, 2, V1)],
            vec!["1"],
            None,
        ),
        (
            "0 terminating: its ordinal is taken",
            vec![terminating(running(&set, 0, V1))],
            vec![],
            Some(Halt::Terminating("web-0".into())),
        ),
    ];
    for (name, pods, want, halt) in cases {
        let out = sync(&set, &pods);
        assert_eq!(created(&out), want, "{name}");
        assert_eq!(out.halted, halt, "{name}");
        assert!(out.plan.deletes.is_empty(), "{name}");
    }
}

#[test]
fn parallel_creates_every_missing_pod_within_scale_max_unavailable() {
    let mut set = web(3, PodManagementPolicy::Parallel);
    assert_eq!(created(&sync(&set, &[])), ["0", "1", "2"]);
    assert_eq!(created(&sync(&set, &[pending(&set, 0)])), ["1", "2"]);

    set.spec.scale_strategy = Some(StatefulSetScaleStrategy {
        max_unavailable: Some(IntOrString::Int(2)),
    });
    assert_eq!(created(&sync(&set, &[])), ["0", "1"]);
    assert_eq!(created(&sync(&set, &[pending(&set, 0)])), ["1"]);
    let two_pending = [pending(&set, 0), pending(&set, 1)];
    assert!(created(&sync(&set, &two_pending)).is_empty());
}

#[test]
fn scale_down_goes_from_the_highest_ordinal() {
    let ordered = web(1, PodManagementPolicy::OrderedReady);
    let pods: Vec<Pod> = (0..3).map(|o| running(&ordered, o, V1)).collect();
    let out = sync(&ordered, &pods);
    assert_eq!(deleted(&out), [("web-2", DeleteReason::ScaleDown)]);

    let parallel = web(1, PodManagementPolicy::Parallel);
    let out = sync(&parallel, &pods);
    assert_eq!(
        deleted(&out),
        [
            ("web-2", DeleteReason::ScaleDown),
            ("web-1", DeleteReason::ScaleDown)
        ]
    );
}

#[test]
fn ordered_scale_down_stops_on_an_unhealthy_pod() {
    let set = web(1, PodManagementPolicy::OrderedReady);
    let pods = [pending(&set, 0), running(&set, 1, V1), running(&set, 2, V1)];
    let out = sync(&set, &pods);
    assert!(out.plan.deletes.is_empty());
    assert_eq!(out.halted, Some(Halt::NotHealthy("web-0".into())));
    let message = out.halted.map(|h| h.message()).unwrap_or_default();
    assert!(
        message.contains("web-0") && message.contains("OrderedReady"),
        "{message}"
    );

    let pods = [
        running(&set, 0, V1),
        running(&set, 1, V1),
        terminating(running(&set, 2, V1)),
    ];
    let out = sync(&set, &pods);
    assert!(out.plan.deletes.is_empty(), "web-1 waits for web-2 to go");
    assert_eq!(out.halted, Some(Halt::Terminating("web-2".into())));
}

#[test]
fn ordered_scale_down_deletes_no_unhealthy_pod_but_the_lowest() {
    // Condemned pods only (the wanted ones are healthy or absent): an unhealthy one other
    // than the lowest-ordinal unhealthy pod blocks the scale-down (native and OpenKruise
    // `processCondemned`); the lowest unhealthy one itself may go.
    // (case, replicas, pods 0..=2 healthy?, deleted, waiting on)
    type Case = (
        &'static str,
        i32,
        [bool; 3],
        Vec<&'static str>,
        Option<&'static str>,
    );
    let cases: Vec<Case> = vec![
        ("to 0, all unready", 0, [false; 3], vec![], Some("web-0")),
        ("to 0, all ready", 0, [true; 3], vec!["web-2"], None),
        (
            "to 0, only web-2 unready",
            0,
            [true, true, false],
            vec!["web-2"],
            None,
        ),
        (
            "to 0, web-1 unready",
            0,
            [true, false, true],
            vec!["web-2"],
            None,
        ),
        (
            "to 0, web-1 and web-2 unready",
            0,
            [true, false, false],
            vec![],
            Some("web-1"),
        ),
        (
            "to 1, web-1 and web-2 unready",
            1,
            [true, false, false],
            vec![],
            Some("web-1"),
        ),
        (
            "to 2, web-2 unready",
            2,
            [true, true, false],
            vec!["web-2"],
            None,
        ),
    ];
    for (case, replicas, healthy, want_deleted, waiting) in cases {
        let set = web(replicas, PodManagementPolicy::OrderedReady);
        let pods: Vec<Pod> = (0..3)
            .map(|o| {
                if healthy[o as usize] {
                    running(&set, o, V1)
                } else {
                    pending(&set, o)
                }
            })
            .collect();
        let out = sync(&set, &pods);
        let got: Vec<&str> = out.plan.deletes.iter().map(|d| d.pod.as_str()).collect();
        assert_eq!(got, want_deleted, "{case}");
        let halt = waiting.map(|pod| Halt::NotHealthy(pod.to_owned()));
        assert_eq!(out.halted, halt, "{case}");
    }
    // Parallel deletes them all at once, healthy or not.
    let set = web(0, PodManagementPolicy::Parallel);
    let pods: Vec<Pod> = (0..3).map(|o| pending(&set, o)).collect();
    assert_eq!(sync(&set, &pods).plan.deletes.len(), 3);
}

#[test]
fn seed_002_reserve_ordinals_and_start() {
    // replicas 3 with 1 reserved: pods 0, 2, 3.
    let mut set = web(3, PodManagementPolicy::Parallel);
    set.spec.reserve_ordinals = vec![IntOrString::Int(1)];
    assert_eq!(created(&sync(&set, &[])), ["0", "2", "3"]);

    // Reserving 2 as well deletes web-2 and creates web-4, replicas unchanged.
    set.spec.reserve_ordinals.push(IntOrString::Int(2));
    let pods = [
        running(&set, 0, V1),
        running(&set, 2, V1),
        running(&set, 3, V1),
    ];
    let out = sync(&set, &pods);
    assert_eq!(created(&out), ["4"]);
    assert_eq!(deleted(&out), [("web-2", DeleteReason::ScaleDown)]);

    // OrderedReady creates web-4 first, and deletes web-2 once it is ready.
    set.spec.pod_management_policy = Some(PodManagementPolicy::OrderedReady);
    let out = sync(&set, &pods);
    assert_eq!((created(&out), deleted(&out)), (vec!["4"], vec![]));
    let mut with_four = pods.to_vec();
    with_four.push(running(&set, 4, V1));
    let out = sync(&set, &with_four);
    assert_eq!(deleted(&out), [("web-2", DeleteReason::ScaleDown)]);

    // A range, and ordinals.start: replicas 5 from 3 skipping 5-6.
    let mut set = web(5, PodManagementPolicy::Parallel);
    set.spec.ordinals = Some(StatefulSetOrdinals { start: 3 });
    set.spec.reserve_ordinals = vec![IntOrString::String("5-6".into())];
    assert_eq!(created(&sync(&set, &[])), ["3", "4", "7", "8", "9"]);
}

#[test]
fn a_failed_pod_is_replaced_and_lost_identity_labels_restored() {
    let set = web(2, PodManagementPolicy::OrderedReady);
    let pods = [
        in_phase(running(&set, 0, V1), "Failed"),
        running(&set, 1, V1),
    ];
    let out = sync(&set, &pods);
    assert_eq!(deleted(&out), [("web-0", DeleteReason::Failed)]);
    assert!(
        out.plan.creates.is_empty(),
        "the ordinal is taken until it is gone"
    );

    let mut drifted = running(&set, 1, V1);
    if let Some(labels) = drifted.metadata.labels.as_mut() {
        labels.remove(super::super::ordinals::POD_INDEX_LABEL);
    }
    let out = sync(&set, &[running(&set, 0, V1), drifted]);
    let change = out
        .plan
        .pod_changes
        .iter()
        .find(|c| c.reason == ChangeReason::Identity)
        .expect("an identity change");
    assert_eq!(change.pod, "web-1");
    let patch = serde_json::to_string(&change.patch).unwrap_or_default();
    assert!(
        patch.contains("\"apps.kubernetes.io/pod-index\":\"1\""),
        "{patch}"
    );
}

#[test]
fn a_pending_pod_whose_claim_is_gone_gets_it_made_again_even_while_the_walk_halts() {
    // OrderedReady halts on the Pending web-0, and the claim is still made again: without
    // it web-0 would never run and the halt would never end.
    let set = web(2, PodManagementPolicy::OrderedReady);
    let pods = [pending(&set, 0)];
    let out = sync_with(&set, &pods, &[], V2);
    assert_eq!(out.halted, Some(Halt::NotHealthy("web-0".to_owned())));
    let expected = Create {
        instance_id: "0".to_owned(),
        revision: V2.to_owned(),
    };
    assert_eq!(out.plan.missing_claims, [expected]);
    assert!(
        created(&out).is_empty(),
        "the pod itself is not created again"
    );

    let out = sync_with(&set, &pods, &[claim("www-web-0")], V2);
    assert!(out.plan.missing_claims.is_empty(), "the claim is there");
    let running = [running(&set, 0, V1)];
    let out = sync_with(&set, &running, &[], V2);
    assert!(
        out.plan.missing_claims.is_empty(),
        "a running pod is left alone"
    );
}

#[test]
fn a_scaled_down_pod_owns_its_claims_only_when_when_scaled_is_delete() {
    let mut set = web(1, PodManagementPolicy::OrderedReady);
    let pods = [running(&set, 0, V1), running(&set, 1, V1)];
    let claims = [claim("www-web-0"), claim("www-web-1")];
    let out = sync_with(&set, &pods, &claims, V1);
    assert_eq!(out.plan.deletes[0].pod, "web-1");
    assert_eq!(out.plan.deletes[0].pvcs, Vec::<String>::new(), "Retain");
    assert!(out.claim_owners.is_empty(), "Retain");

    set.spec.persistent_volume_claim_retention_policy = Some(PvcRetentionPolicy {
        when_deleted: None,
        when_scaled: Some(PvcRetentionPolicyType::Delete),
    });
    let out = sync_with(&set, &pods, &claims, V1);
    // The executor deletes no claim: the pod's owner reference hands it to the garbage
    // collector once the pod is gone.
    assert_eq!(out.plan.deletes[0].pvcs, Vec::<String>::new());
    let owners: Vec<(&str, Vec<&str>)> = (out.claim_owners.iter())
        .map(|c| {
            let uids = c.owner_references.iter().map(|r| r.uid.as_str()).collect();
            (c.claim.as_str(), uids)
        })
        .collect();
    assert_eq!(owners, [("www-web-1", vec!["uid-1"])]);
}

#[test]
fn recreate_update_follows_the_partition_from_the_highest_ordinal_and_keeps_claims() {
    let claims = [claim("www-web-0"), claim("www-web-1"), claim("www-web-2")];
    let cases = [
        (PodManagementPolicy::OrderedReady, 0, 3, vec!["web-2"]),
        (
            PodManagementPolicy::Parallel,
            0,
            3,
            vec!["web-2", "web-1", "web-0"],
        ),
        (PodManagementPolicy::Parallel, 1, 3, vec!["web-2", "web-1"]),
        (PodManagementPolicy::Parallel, 0, 2, vec!["web-2", "web-1"]),
        (PodManagementPolicy::Parallel, 3, 3, vec![]),
    ];
    for (policy, partition, max_unavailable, want) in cases {
        let mut set = web(3, policy);
        rolling(
            &mut set,
            RollingUpdateStatefulSetStrategy {
                partition: Some(partition),
                max_unavailable: Some(IntOrString::Int(max_unavailable)),
                ..RollingUpdateStatefulSetStrategy::default()
            },
        );
        let pods: Vec<Pod> = (0..3).map(|o| running(&set, o, V1)).collect();
        let out = sync_with(&set, &pods, &claims, V2);
        let got: Vec<&str> = out.plan.deletes.iter().map(|d| d.pod.as_str()).collect();
        assert_eq!(
            got, want,
            "{policy:?} partition {partition} max {max_unavailable}"
        );
        assert!(out.plan.deletes.iter().all(|d| d.pvcs.is_empty()));
        assert!(
            out.plan
                .deletes
                .iter()
                .all(|d| d.reason == DeleteReason::RecreateUpdate)
        );
    }
}

/// (case, reserveOrdinals, pods recreated, new pods on the current revision)
type StartPartitionCase = (
    &'static str,
    Vec<IntOrString>,
    Vec<&'static str>,
    Vec<&'static str>,
);

#[test]
fn the_partition_counts_pods_from_the_start_ordinal() {
    // ordinals.start 3, replicas 3, partition 1: index 0 (ordinal 3) is kept and ordinals
    // 4 and 5 are updated (OpenKruise `sortPodsToUpdate`); reserved ordinals are no pods.
    let cases: Vec<StartPartitionCase> = vec![
        ("start 3", vec![], vec!["web-5", "web-4"], vec!["3"]),
        (
            "start 3, ordinal 3 reserved",
            vec![IntOrString::Int(3)],
            vec!["web-6", "web-5"],
            vec!["4"],
        ),
    ];
    for (case, reserve, want_updated, want_current) in cases {
        let mut set = web(3, PodManagementPolicy::Parallel);
        set.spec.ordinals = Some(StatefulSetOrdinals { start: 3 });
        set.spec.reserve_ordinals = reserve;
        rolling(
            &mut set,
            RollingUpdateStatefulSetStrategy {
                partition: Some(1),
                max_unavailable: Some(IntOrString::Int(3)),
                ..RollingUpdateStatefulSetStrategy::default()
            },
        );
        let ordinals: Vec<i32> = super::super::adapter::wanted_ordinals(&set)
            .iter()
            .collect();
        let pods: Vec<Pod> = ordinals.iter().map(|&o| running(&set, o, V1)).collect();
        let out = sync_with(&set, &pods, &[], V2);
        let got: Vec<&str> = out.plan.deletes.iter().map(|d| d.pod.as_str()).collect();
        assert_eq!(got, want_updated, "{case}: recreated");

        // From scratch, the pods the partition keeps are created on the current revision.
        let out = sync_with(&set, &[], &[], V2);
        let current: Vec<&str> = (out.plan.creates.iter())
            .filter(|c| c.revision == V1)
            .map(|c| c.instance_id.as_str())
            .collect();
        assert_eq!(
            current, want_current,
            "{case}: created on the current revision"
        );
    }
}

#[test]
fn parallel_max_unavailable_counts_pods_that_are_not_ready() {
    let mut set = web(4, PodManagementPolicy::Parallel);
    rolling(
        &mut set,
        RollingUpdateStatefulSetStrategy {
            max_unavailable: Some(IntOrString::Int(2)),
            ..RollingUpdateStatefulSetStrategy::default()
        },
    );
    let mut unready = running(&set, 0, V1);
    unready.status = Some(PodStatus {
        phase: Some("Running".to_owned()),
        ..PodStatus::default()
    });
    let pods = [
        unready,
        running(&set, 1, V1),
        running(&set, 2, V1),
        running(&set, 3, V1),
    ];
    let out = sync_with(&set, &pods, &[], V2);
    let got: Vec<&str> = out.plan.deletes.iter().map(|d| d.pod.as_str()).collect();
    assert_eq!(
        got,
        ["web-3"],
        "one of two unavailable slots is taken by web-0"
    );
}

#[test]
fn in_place_update_starts_on_the_highest_ordinal_and_on_delete_or_paused_waits() {
    let mut set = web(3, PodManagementPolicy::OrderedReady);
    rolling(
        &mut set,
        RollingUpdateStatefulSetStrategy {
            pod_update_policy: Some(PodUpdatePolicy::InPlaceIfPossible),
            ..RollingUpdateStatefulSetStrategy::default()
        },
    );
    let pods: Vec<Pod> = (0..3).map(|o| running(&set, o, V1)).collect();
    let out = sync_with(&set, &pods, &[], V2);
    assert!(out.plan.deletes.is_empty());
    let started: Vec<&str> = out
        .plan
        .pod_changes
        .iter()
        .filter(|c| c.reason == ChangeReason::InPlaceStart)
        .map(|c| c.pod.as_str())
        .collect();
    assert_eq!(started, ["web-2"]);

    let mut paused = set.clone();
    rolling(
        &mut paused,
        RollingUpdateStatefulSetStrategy {
            paused: true,
            ..RollingUpdateStatefulSetStrategy::default()
        },
    );
    let out = sync_with(&paused, &pods, &[], V2);
    assert!(out.plan.deletes.is_empty() && out.plan.pod_changes.is_empty());

    let mut on_delete = set.clone();
    on_delete.spec.update_strategy = Some(StatefulSetUpdateStrategy {
        type_: Some(StatefulSetUpdateStrategyType::OnDelete),
        rolling_update: None,
    });
    let pods: Vec<Pod> = (0..3).map(|o| running(&on_delete, o, V1)).collect();
    let out = sync_with(&on_delete, &pods, &[], V2);
    assert!(out.plan.deletes.is_empty() && out.plan.pod_changes.is_empty());
    // ...but a pod the user deleted comes back on the update revision.
    let out = sync_with(&on_delete, &pods[..2], &[], V2);
    assert_eq!(out.plan.creates[0].revision, V2);
}

#[test]
fn on_delete_is_the_shared_update_strategy_type_and_paused_stays_the_users() {
    use crate::workload::adapter::UpdateStrategyType;
    // (type, rollingUpdate.paused, shared strategy type, paused as the rollout sees it)
    let cases = [
        (None, false, UpdateStrategyType::RollingUpdate, false),
        (
            Some(StatefulSetUpdateStrategyType::RollingUpdate),
            true,
            UpdateStrategyType::RollingUpdate,
            true,
        ),
        (
            Some(StatefulSetUpdateStrategyType::OnDelete),
            false,
            UpdateStrategyType::OnDelete,
            false,
        ),
    ];
    for (type_, paused, strategy, rollout_paused) in cases {
        let mut set = web(3, PodManagementPolicy::Parallel);
        set.spec.update_strategy = Some(StatefulSetUpdateStrategy {
            type_,
            rolling_update: Some(RollingUpdateStatefulSetStrategy {
                paused,
                ..RollingUpdateStatefulSetStrategy::default()
            }),
        });
        assert_eq!(set.update_strategy_type(), strategy, "{type_:?}");
        assert_eq!(
            set.rollout_params(V1, V2).paused,
            rollout_paused,
            "{type_:?}"
        );
    }
}

#[test]
fn new_pods_below_the_partition_stay_on_the_current_revision() {
    let mut set = web(3, PodManagementPolicy::Parallel);
    rolling(
        &mut set,
        RollingUpdateStatefulSetStrategy {
            partition: Some(2),
            ..RollingUpdateStatefulSetStrategy::default()
        },
    );
    let out = sync_with(&set, &[], &[], V2);
    let revisions: Vec<&str> = out
        .plan
        .creates
        .iter()
        .map(|c| c.revision.as_str())
        .collect();
    assert_eq!(revisions, [V1, V1, V2]);
}

#[test]
fn a_new_pod_carries_its_identity_full_revision_name_and_claim() {
    let mut set = web(3, PodManagementPolicy::OrderedReady);
    let pod = running(&set, 1, V2);
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let label = |k: &str| labels.get(k).map(String::as_str);
    assert_eq!(pod.metadata.name.as_deref(), Some("web-1"));
    assert_eq!(label("controller-revision-hash"), Some(V2));
    assert_eq!(label("statefulset.kubernetes.io/pod-name"), Some("web-1"));
    assert_eq!(label("apps.kubernetes.io/pod-index"), Some("1"));
    assert_eq!(label("app"), Some("web"));
    let spec = pod.spec.clone().unwrap_or_default();
    assert_eq!(spec.hostname.as_deref(), Some("web-1"));
    assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
    let claim_names: Vec<String> = spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone())
        .collect();
    assert_eq!(claim_names, ["www-web-1"]);
    assert!(spec.readiness_gates.is_none(), "ReCreate needs no gate");

    let create = Create {
        instance_id: "1".to_owned(),
        revision: V2.to_owned(),
    };
    let claims = set.new_claims(&create, &template("nginx:2"));
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].metadata.name.as_deref(), Some("www-web-1"));
    assert!(claims[0].metadata.owner_references.is_none(), "Retain");
    set.spec.persistent_volume_claim_retention_policy = Some(PvcRetentionPolicy {
        when_deleted: Some(PvcRetentionPolicyType::Delete),
        when_scaled: None,
    });
    let claims = set.new_claims(&create, &template("nginx:2"));
    let owners = claims[0]
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].controller),
        ("StatefulSet", None)
    );
}

#[test]
fn a_specified_delete_pod_is_deleted_within_max_unavailable() {
    let set = web(3, PodManagementPolicy::Parallel);
    let mark = |mut pod: Pod| {
        if let Some(labels) = pod.metadata.labels.as_mut() {
            labels.insert(
                "apps.kruise.io/specified-delete".to_owned(),
                "true".to_owned(),
            );
        }
        pod
    };
    let pods = [
        running(&set, 0, V1),
        mark(running(&set, 1, V1)),
        mark(running(&set, 2, V1)),
    ];
    let out = sync(&set, &pods);
    assert_eq!(
        deleted(&out),
        [("web-2", DeleteReason::Specified)],
        "maxUnavailable 1"
    );

    let pods = [
        pending(&set, 0),
        mark(running(&set, 1, V1)),
        running(&set, 2, V1),
    ];
    let out = sync(&set, &pods);
    assert!(
        out.plan.deletes.is_empty(),
        "web-0 takes the one unavailable slot"
    );
}

#[test]
fn a_pre_delete_hook_holds_a_scaled_down_pod() {
    let mut set = web(1, PodManagementPolicy::OrderedReady);
    set.spec.lifecycle = Some(Lifecycle {
        pre_delete: Some(LifecycleHook {
            finalizers_handler: vec!["example.dev/drain".to_owned()],
            ..LifecycleHook::default()
        }),
        ..Lifecycle::default()
    });
    let mut hooked = running(&set, 1, V1);
    hooked.metadata.finalizers = Some(vec!["example.dev/drain".to_owned()]);
    let out = sync(&set, &[running(&set, 0, V1), hooked]);
    assert!(out.plan.deletes.is_empty());
    let preparing: Vec<&str> = out
        .plan
        .pod_changes
        .iter()
        .filter(|c| c.reason == ChangeReason::PreparingDelete)
        .map(|c| c.pod.as_str())
        .collect();
    assert_eq!(preparing, ["web-1"]);
}

#[test]
fn unordered_update_follows_the_priority_not_the_ordinal() {
    let mut set = web(3, PodManagementPolicy::Parallel);
    let priority = UpdatePriorityStrategy {
        weight_priority: vec![UpdatePriorityWeightTerm {
            weight: 50,
            match_selector: LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    "statefulset.kubernetes.io/pod-name".to_owned(),
                    "web-0".to_owned(),
                )])),
                ..LabelSelector::default()
            },
        }],
        ..UpdatePriorityStrategy::default()
    };
    rolling(
        &mut set,
        RollingUpdateStatefulSetStrategy {
            unordered_update: Some(UnorderedUpdateStrategy {
                priority_strategy: Some(priority),
            }),
            ..RollingUpdateStatefulSetStrategy::default()
        },
    );
    let pods: Vec<Pod> = (0..3).map(|o| running(&set, o, V1)).collect();
    let out = sync_with(&set, &pods, &[], V2);
    assert_eq!(deleted(&out), [("web-0", DeleteReason::RecreateUpdate)]);
}

/// (case, set, pods, update revision, creates: count, first and last ordinal, revision)
type HugeCase = (
    &'static str,
    StatefulSet,
    Vec<Pod>,
    &'static str,
    (usize, &'static str, &'static str),
    &'static str,
);

#[test]
fn huge_replicas_plan_one_sync_of_creates_not_the_replicas() {
    use crate::workload::plan::MAX_CREATES_PER_SYNC as CAP;
    let max = i32::MAX;
    let parallel = web(max, PodManagementPolicy::Parallel);
    let ordered = web(max, PodManagementPolicy::OrderedReady);
    let with = |f: &dyn Fn(&mut StatefulSet)| {
        let mut set = parallel.clone();
        f(&mut set);
        set
    };
    let reserved = with(&|s| s.spec.reserve_ordinals = vec![IntOrString::String("0-9".into())]);
    let partitioned = with(&|s| {
        rolling(
            s,
            RollingUpdateStatefulSetStrategy {
                partition: Some(max),
                ..RollingUpdateStatefulSetStrategy::default()
            },
        );
    });
    let scale_max = |value: IntOrString| {
        with(&|s| {
            s.spec.scale_strategy = Some(StatefulSetScaleStrategy {
                max_unavailable: Some(value.clone()),
            });
        })
    };
    let first_300 = |set: &StatefulSet| (0..300).map(|o| running(set, o, V1)).collect::<Vec<_>>();
    let mut far = first_300(&parallel);
    far.push(running(&parallel, 1_000_000, V1));
    let cases: Vec<HugeCase> = vec![
        (
            "parallel from none",
            parallel.clone(),
            vec![],
            V1,
            (CAP, "0", "499"),
            V1,
        ),
        (
            "parallel after 300 pods and a far one",
            parallel.clone(),
            far,
            V1,
            (CAP, "300", "799"),
            V1,
        ),
        (
            "reserved ordinals skipped",
            reserved,
            vec![],
            V1,
            (CAP, "10", "509"),
            V1,
        ),
        (
            "partition int32 max keeps the current revision",
            partitioned,
            vec![],
            V2,
            (CAP, "0", "499"),
            V1,
        ),
        (
            "no partition: the update revision",
            parallel.clone(),
            vec![],
            V2,
            (CAP, "0", "499"),
            V2,
        ),
        (
            "scale maxUnavailable 100%",
            scale_max(IntOrString::String("100%".into())),
            vec![],
            V1,
            (CAP, "0", "499"),
            V1,
        ),
        (
            "scale maxUnavailable 7",
            scale_max(IntOrString::Int(7)),
            vec![],
            V1,
            (7, "0", "6"),
            V1,
        ),
        (
            "scale maxUnavailable 0%",
            scale_max(IntOrString::String("0%".into())),
            vec![],
            V1,
            (0, "", ""),
            V1,
        ),
        (
            "ordered from none",
            ordered.clone(),
            vec![],
            V1,
            (1, "0", "0"),
            V1,
        ),
        (
            "ordered after 300 pods",
            ordered.clone(),
            first_300(&ordered),
            V1,
            (1, "300", "300"),
            V1,
        ),
    ];
    for (name, set, pods, update, (count, first, last), revision) in cases {
        let out = sync_with(&set, &pods, &[], update);
        let created = created(&out);
        assert_eq!(created.len(), count, "{name}");
        assert_eq!(
            created.first().copied().unwrap_or_default(),
            first,
            "{name}"
        );
        assert_eq!(created.last().copied().unwrap_or_default(), last, "{name}");
        let revisions = out.plan.creates.iter().map(|c| c.revision.as_str());
        assert!(
            revisions.clone().all(|r| r == revision),
            "{name}: {revisions:?}",
            revisions = revisions.collect::<Vec<_>>()
        );
        assert!(out.plan.deletes.is_empty(), "{name}");
    }
}

#[test]
fn huge_replicas_condemn_only_what_exists_on_a_reserved_ordinal() {
    let mut set = web(i32::MAX, PodManagementPolicy::Parallel);
    set.spec.reserve_ordinals = vec![
        IntOrString::Int(5),
        IntOrString::String("7-2000000000".into()),
    ];
    let pods: Vec<Pod> = (0..10).map(|o| running(&set, o, V1)).collect();
    let out = sync(&set, &pods);
    assert_eq!(
        deleted(&out),
        [
            ("web-9", DeleteReason::ScaleDown),
            ("web-8", DeleteReason::ScaleDown),
            ("web-7", DeleteReason::ScaleDown),
            ("web-5", DeleteReason::ScaleDown),
        ]
    );
    let created = created(&out);
    assert_eq!(created.len(), crate::workload::plan::MAX_CREATES_PER_SYNC);
    assert_eq!(created[..2], ["2000000001", "2000000002"]);
}

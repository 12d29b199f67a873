use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use k8s_openapi::api::apps::v1::ControllerRevision;

use super::*;
use crate::api::DaemonSet;
use crate::api::daemonset::{
    DaemonSetSpec, DaemonSetUpdateStrategy, DaemonSetUpdateStrategyType, RollingUpdateDaemonSet,
    RollingUpdateType,
};
use crate::predownload::plan::{Decision, decide};
use crate::predownload::workload::pre_pulls;
use crate::workload::revision::REVISION_HASH_LABEL;

fn workload(ds: &DaemonSet, desired: i32, held: usize) -> DaemonSetWorkload<'_> {
    DaemonSetWorkload {
        ds,
        desired,
        held_back: (0..held)
            .map(|i| format!("held-{i}"))
            .collect::<BTreeSet<_>>(),
    }
}

fn daemonset(type_: DaemonSetUpdateStrategyType, rolling: RollingUpdateDaemonSet) -> DaemonSet {
    DaemonSet::new(
        "agent",
        DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_owned(), "agent".to_owned())])),
                ..LabelSelector::default()
            },
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: Some(type_),
                rolling_update: Some(RollingUpdateDaemonSet {
                    rolling_update_type: Some(RollingUpdateType::InPlaceIfPossible),
                    ..rolling
                }),
            }),
            ..DaemonSetSpec::default()
        },
    )
}

fn revision(name: &str, hash: &str) -> ControllerRevision {
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([(
                REVISION_HASH_LABEL.to_owned(),
                hash.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        ..ControllerRevision::default()
    }
}

#[test]
fn the_rollout_counts_desired_nodes_partition_canary_and_max_unavailable() {
    use DaemonSetUpdateStrategyType::{OnDelete, RollingUpdate};
    let rolling = |partition: Option<i32>, max_unavailable: Option<&str>, paused: bool| {
        RollingUpdateDaemonSet {
            partition,
            max_unavailable: max_unavailable.map(|v| IntOrString::String(v.to_owned())),
            paused: Some(paused),
            ..RollingUpdateDaemonSet::default()
        }
    };
    // (case, daemonset, desired nodes, pods held by the canary selector,
    //  partition kept, maxUnavailable, images kept)
    let cases = [
        (
            "one node at a time by default",
            daemonset(RollingUpdate, rolling(None, None, false)),
            20,
            0,
            0,
            1,
            true,
        ),
        (
            "10% of 20 nodes, partition 3",
            daemonset(RollingUpdate, rolling(Some(3), Some("10%"), false)),
            20,
            0,
            3,
            2,
            true,
        ),
        (
            "pods outside the canary selector are kept as the partition is",
            daemonset(RollingUpdate, rolling(Some(2), None, false)),
            20,
            15,
            17,
            1,
            true,
        ),
        (
            "never more kept than nodes",
            daemonset(RollingUpdate, rolling(Some(50), None, false)),
            20,
            0,
            20,
            1,
            true,
        ),
        (
            "paused still pulls ahead, so the resume finds the images there",
            daemonset(RollingUpdate, rolling(None, None, true)),
            20,
            0,
            0,
            1,
            true,
        ),
        (
            "OnDelete pulls nothing ahead",
            daemonset(OnDelete, rolling(None, None, false)),
            20,
            0,
            0,
            1,
            false,
        ),
    ];
    let images = BTreeMap::from([("agent".to_owned(), "agent:2".to_owned())]);
    let update = revision("agent-5f6d7c8b9", "5f6d7c8b9");
    for (case, ds, desired, held, partition, max_unavailable, keeps_images) in cases {
        let workload = workload(&ds, desired, held);
        let rollout = workload
            .pre_download_rollout("agent-1a2b3c4d5", &update, 0, Some(&images))
            .expect("a rollout");
        assert_eq!(rollout.replicas, desired, "{case}");
        assert_eq!(rollout.partition, partition, "{case}");
        assert_eq!(rollout.max_unavailable, max_unavailable, "{case}");
        // The adapter hands its images on; the one rule decides whether they are pulled.
        assert!(rollout.in_place_images.is_some(), "{case}");
        let pulls = pre_pulls(workload.rollout_strategy());
        assert_eq!(pulls, keeps_images, "{case}");
        assert_eq!(rollout.update_revision_hash, Some("5f6d7c8b9"), "{case}");
    }
}

#[test]
fn an_in_place_rollout_pulls_the_new_image_on_the_nodes_of_old_pods() {
    let ds = daemonset(
        DaemonSetUpdateStrategyType::RollingUpdate,
        RollingUpdateDaemonSet::default(),
    );
    let workload = workload(&ds, 10, 0);
    let images = BTreeMap::from([("agent".to_owned(), "agent:2".to_owned())]);
    let update = revision("agent-5f6d7c8b9", "5f6d7c8b9");
    let rollout = workload
        .pre_download_rollout("agent-1a2b3c4d5", &update, 0, Some(&images))
        .expect("a rollout");
    let Ok(Decision::Create(jobs)) = decide(&rollout) else {
        panic!("expected pull jobs, got {:?}", decide(&rollout));
    };
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].container, "agent");
    let selector = serde_json::to_string(&jobs[0].spec).expect("a job spec");
    assert!(
        selector.contains("5f6d7c8b9"),
        "old pods are those not on the new hash: {selector}"
    );
}

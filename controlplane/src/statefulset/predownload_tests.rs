use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use k8s_openapi::api::apps::v1::ControllerRevision;

use super::*;
use crate::api::StatefulSetSpec;
use crate::api::common::PodUpdatePolicy;
use crate::api::statefulset::{
    PodManagementPolicy, RollingUpdateStatefulSetStrategy, StatefulSetUpdateStrategy,
};
use crate::predownload::plan::{Decision, decide};
use crate::predownload::workload::pre_pulls;

fn set(
    replicas: i32,
    policy: PodManagementPolicy,
    type_: StatefulSetUpdateStrategyType,
    rolling: RollingUpdateStatefulSetStrategy,
    reserved: Vec<IntOrString>,
) -> StatefulSet {
    StatefulSet::new(
        "web",
        StatefulSetSpec {
            replicas: Some(replicas),
            pod_management_policy: Some(policy),
            reserve_ordinals: reserved,
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some(type_),
                rolling_update: Some(RollingUpdateStatefulSetStrategy {
                    pod_update_policy: Some(PodUpdatePolicy::InPlaceIfPossible),
                    ..rolling
                }),
            }),
            ..StatefulSetSpec::default()
        },
    )
}

fn revision(name: &str) -> ControllerRevision {
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..ControllerRevision::default()
    }
}

#[test]
fn the_rollout_counts_ordinals_below_the_partition_and_unavailability_by_policy() {
    use PodManagementPolicy::{OrderedReady, Parallel};
    use StatefulSetUpdateStrategyType::{OnDelete, RollingUpdate};
    let rolling = |partition: Option<i32>, max_unavailable: Option<&str>, paused: bool| {
        RollingUpdateStatefulSetStrategy {
            partition,
            max_unavailable: max_unavailable.map(|v| IntOrString::String(v.to_owned())),
            paused,
            ..RollingUpdateStatefulSetStrategy::default()
        }
    };
    // (case, set, partition kept, maxUnavailable, images kept)
    let cases = [
        (
            "OrderedReady updates one at a time",
            set(
                10,
                OrderedReady,
                RollingUpdate,
                rolling(None, None, false),
                vec![],
            ),
            0,
            1,
            true,
        ),
        (
            "Parallel scales maxUnavailable; partition 4 keeps ordinals 0-3",
            set(
                10,
                Parallel,
                RollingUpdate,
                rolling(Some(4), Some("50%"), false),
                vec![],
            ),
            4,
            5,
            true,
        ),
        (
            "partition 4 keeps four pods around a reserved ordinal (0, 2, 3, 4)",
            set(
                10,
                Parallel,
                RollingUpdate,
                rolling(Some(4), Some("20%"), false),
                vec![IntOrString::Int(1)],
            ),
            4,
            2,
            true,
        ),
        (
            "paused still pulls ahead, so the resume finds the images there",
            set(
                10,
                Parallel,
                RollingUpdate,
                rolling(None, None, true),
                vec![],
            ),
            0,
            1,
            true,
        ),
        (
            "OnDelete pulls nothing ahead",
            set(10, Parallel, OnDelete, rolling(None, None, false), vec![]),
            0,
            1,
            false,
        ),
    ];
    let images = BTreeMap::from([("web".to_owned(), "web:v2".to_owned())]);
    let update = revision("web-v2");
    for (case, set, partition, max_unavailable, keeps_images) in cases {
        let rollout = set
            .pre_download_rollout("web-v1", &update, 0, Some(&images))
            .expect("a rollout");
        assert_eq!(rollout.partition, partition, "{case}");
        assert_eq!(rollout.max_unavailable, max_unavailable, "{case}");
        // The adapter hands its images on; the one rule decides whether they are pulled.
        assert!(rollout.in_place_images.is_some(), "{case}");
        let pulls = pre_pulls(set.rollout_strategy());
        assert_eq!(pulls, keeps_images, "{case}");
        assert_eq!(rollout.update_revision, "web-v2", "{case}");
    }
}

#[test]
fn an_in_place_rollout_of_a_parallel_set_creates_pull_jobs() {
    let set = set(
        10,
        PodManagementPolicy::Parallel,
        StatefulSetUpdateStrategyType::RollingUpdate,
        RollingUpdateStatefulSetStrategy::default(),
        vec![],
    );
    let images = BTreeMap::from([("web".to_owned(), "web:v2".to_owned())]);
    let update = revision("web-v2");
    let rollout = set
        .pre_download_rollout("web-v1", &update, 0, Some(&images))
        .expect("a rollout");
    let Ok(Decision::Create(jobs)) = decide(&rollout) else {
        panic!("expected pull jobs, got {:?}", decide(&rollout));
    };
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].container, "web");
}

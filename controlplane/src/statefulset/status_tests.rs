use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::api::StatefulSetSpec;

const V1: &str = "web-aaa111";
const V2: &str = "web-bbb222";

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).expect("a valid time")
}

fn web(replicas: i32, min_ready_seconds: i32) -> StatefulSet {
    let mut set = StatefulSet::new(
        "web",
        StatefulSetSpec {
            replicas: Some(replicas),
            min_ready_seconds,
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
                ..LabelSelector::default()
            },
            ..StatefulSetSpec::default()
        },
    );
    set.metadata.generation = Some(4);
    set
}

/// A pod at `revision`, ready since `ready_since` (None: not ready).
fn pod(ordinal: i32, revision: &str, ready_since: Option<i64>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("web-{ordinal}")),
            labels: Some(BTreeMap::from([(
                "controller-revision-hash".to_owned(),
                revision.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some("Running".to_owned()),
            conditions: ready_since.map(|since| {
                vec![PodCondition {
                    type_: "Ready".to_owned(),
                    status: "True".to_owned(),
                    last_transition_time: Some(Time(ts(since))),
                    ..PodCondition::default()
                }]
            }),
            ..PodStatus::default()
        }),
    }
}

fn revisions(update: &str) -> Revisions<'_> {
    Revisions {
        update,
        current: V1,
        collision_count: 0,
    }
}

/// (replicas, ready, available, current, updated, updatedReady, updatedAvailable).
fn counts(s: &StatefulSetStatus) -> (i32, i32, i32, i32, i32, i32, Option<i32>) {
    (
        s.replicas,
        s.ready_replicas,
        s.available_replicas,
        s.current_replicas,
        s.updated_replicas,
        s.updated_ready_replicas,
        s.updated_available_replicas,
    )
}

#[test]
fn counts_pods_by_revision_readiness_and_availability() {
    let set = web(3, 10);
    let pods = [pod(0, V1, Some(0)), pod(1, V2, Some(95)), pod(2, V2, None)];
    let refs: Vec<&Pod> = pods.iter().collect();
    let (status, requeue) = compute_status(
        &set,
        &refs,
        revisions(V2),
        &SyncProblems::default(),
        ts(100),
    );
    assert_eq!(counts(&status), (3, 2, 1, 1, 2, 1, Some(0)));
    assert_eq!(status.current_revision, V1, "the rollout is not complete");
    assert_eq!(status.update_revision, V2);
    assert_eq!(status.observed_generation, 4);
    assert_eq!(status.label_selector, "app=web");
    assert_eq!(
        requeue,
        Some(Duration::from_secs(6)),
        "web-1 is available at 105"
    );
}

#[test]
fn a_complete_rollout_makes_the_update_revision_current() {
    let set = web(2, 0);
    let pods = [pod(0, V2, Some(0)), pod(1, V2, Some(0))];
    let refs: Vec<&Pod> = pods.iter().collect();
    let (status, _) = compute_status(
        &set,
        &refs,
        revisions(V2),
        &SyncProblems::default(),
        ts(100),
    );
    assert_eq!(status.current_revision, V2);
    assert_eq!(status.current_replicas, 2);

    let one_unready = [pod(0, V2, Some(0)), pod(1, V2, None)];
    let refs: Vec<&Pod> = one_unready.iter().collect();
    let (status, _) = compute_status(
        &set,
        &refs,
        revisions(V2),
        &SyncProblems::default(),
        ts(100),
    );
    assert_eq!(status.current_revision, V1);
}

#[test]
fn a_halt_is_a_condition_naming_the_pod_and_cleared_after() {
    let set = web(3, 0);
    let pods = [pod(0, V1, None)];
    let refs: Vec<&Pod> = pods.iter().collect();
    let problems = SyncProblems {
        halted: Some(Halt::NotHealthy("web-0".to_owned())),
        ..SyncProblems::default()
    };
    let (status, _) = compute_status(&set, &refs, revisions(V1), &problems, ts(100));
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == WAITING_FOR_POD)
        .expect("a WaitingForPod condition");
    assert_eq!(condition.status, "True");
    assert!(condition.message.contains("web-0"), "{}", condition.message);

    let mut moved_on = set.clone();
    moved_on.status = Some(status.clone());
    let problems = SyncProblems {
        halted: Some(Halt::NotHealthy("web-1".to_owned())),
        ..SyncProblems::default()
    };
    let (next, _) = compute_status(&moved_on, &refs, revisions(V1), &problems, ts(150));
    let condition = &next.conditions[0];
    assert!(condition.message.contains("web-1"), "{}", condition.message);
    assert_eq!(
        condition.last_transition_time,
        Some(Time(ts(100))),
        "still waiting"
    );

    let mut later = set.clone();
    later.status = Some(status);
    let (status, _) = compute_status(
        &later,
        &refs,
        revisions(V1),
        &SyncProblems::default(),
        ts(200),
    );
    assert!(status.conditions.is_empty());
}

#[test]
fn only_a_lasting_halt_is_worth_a_warning() {
    let mut young = pod(0, V1, None);
    young.metadata.creation_timestamp = Some(Time(ts(90)));
    let mut old = pod(1, V1, None);
    old.metadata.creation_timestamp = Some(Time(ts(0)));
    let mut leaving = pod(2, V1, Some(0));
    leaving.metadata.deletion_timestamp = Some(Time(ts(30)));
    let pods = [&young, &old, &leaving];
    let cases = [
        (Halt::NotHealthy("web-0".into()), None),
        (Halt::NotHealthy("web-1".into()), Some("web-1")),
        (Halt::Terminating("web-2".into()), Some("web-2")),
        (Halt::NotHealthy("web-9".into()), None),
    ];
    for (halt, want) in cases {
        let note = stuck_warning(&halt, &pods, ts(100));
        match want {
            None => assert_eq!(note, None, "{halt:?}"),
            Some(name) => {
                let note = note.unwrap_or_default();
                assert!(
                    note.contains(name) && note.contains("no other change"),
                    "{note}"
                );
            }
        }
    }
}

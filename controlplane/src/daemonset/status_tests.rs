//! Status counted per node as the native controller counts it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::daemonset::nodes::node_pods;

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).expect("a valid timestamp")
}

fn fit(should_run: bool) -> NodeFit {
    NodeFit {
        wanted: should_run,
        should_run,
        should_continue_running: true,
        unfit: None,
    }
}

/// A pod pinned to `node` by nodeName, on `hash`, created at `created`, ready since
/// `ready_since` (None: not ready).
fn pod(name: &str, node: &str, hash: &str, created: i64, ready_since: Option<i64>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            creation_timestamp: Some(Time(ts(created))),
            labels: Some(BTreeMap::from([(
                "controller-revision-hash".to_owned(),
                hash.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(k8s_openapi::api::core::v1::PodSpec {
            node_name: Some(node.to_owned()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".to_owned()),
            conditions: ready_since.map(|at| {
                vec![PodCondition {
                    type_: "Ready".to_owned(),
                    status: "True".to_owned(),
                    last_transition_time: Some(Time(ts(at))),
                    ..PodCondition::default()
                }]
            }),
            ..PodStatus::default()
        }),
    }
}

#[test]
fn counts_per_node_from_the_oldest_pod() {
    let mut ds = DaemonSet::new("agent", Default::default());
    ds.spec.min_ready_seconds = 10;
    ds.metadata.generation = Some(4);
    let fits = BTreeMap::from([
        ("ready".to_owned(), fit(true)),
        ("young".to_owned(), fit(true)),
        ("empty".to_owned(), fit(true)),
        ("two".to_owned(), fit(true)),
        ("tainted".to_owned(), fit(false)),
        // Wanted, no room for a pod: desired, unavailable, not misscheduled.
        (
            "full".to_owned(),
            NodeFit {
                should_run: false,
                ..fit(true)
            },
        ),
    ]);
    let pods = [
        pod("p1", "ready", "v2", 0, Some(0)),
        // Ready for 5 of the 10 seconds minReadySeconds asks: ready, not available.
        pod("p2", "young", "v2", 0, Some(95)),
        // The oldest of two is old and not ready; the newer updated one does not count.
        pod("p3", "two", "v1", 0, None),
        pod("p4", "two", "v2", 50, Some(50)),
        pod("p5", "tainted", "v2", 0, Some(0)),
    ];
    let refs: Vec<&Pod> = pods.iter().collect();
    let by_node = node_pods(&refs);
    let revisions = Revisions {
        update: "agent-v2",
        collision_count: None,
    };
    let status = compute_status(
        &ds,
        &fits,
        &by_node,
        &revisions,
        &SyncProblems::default(),
        ts(100),
    );
    let counts = (
        status.desired_number_scheduled,
        status.current_number_scheduled,
        status.number_ready,
        status.number_available,
        status.number_unavailable,
        status.updated_number_scheduled,
        status.number_misscheduled,
    );
    assert_eq!(counts, (5, 3, 2, 1, 4, 2, 1));
    assert_eq!(status.observed_generation, 4);
    assert_eq!(status.daemon_set_hash, "v2");
}

#[test]
fn problems_become_conditions_and_go_when_solved() {
    let ds = DaemonSet::new("agent", Default::default());
    let revisions = Revisions {
        update: "agent-v2",
        collision_count: None,
    };
    let problems = SyncProblems {
        create: Some("pods \"agent-x\" is forbidden: exceeded quota".to_owned()),
        update: None,
        failed_waiting_on: vec!["n1".to_owned()],
        ..SyncProblems::default()
    };
    let empty = BTreeMap::new();
    let status = compute_status(&ds, &empty, &BTreeMap::new(), &revisions, &problems, ts(0));
    let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, [FAILED_CREATE, FAILED_POD_BACKOFF]);
    assert!(status.conditions[1].message.contains("n1"));
    let mut ds = ds;
    ds.status = Some(status);
    let solved = compute_status(
        &ds,
        &empty,
        &BTreeMap::new(),
        &revisions,
        &SyncProblems::default(),
        ts(1),
    );
    assert!(solved.conditions.is_empty());
}

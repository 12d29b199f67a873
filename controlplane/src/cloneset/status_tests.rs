//! Status counts and conditions, as OpenKruise's `cloneset_status.go` computes them, with
//! Deployment-style Progressing / Available conditions.

#![allow(
    clippy::type_complexity,
    reason = "case tables are tuples read in one place"
)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;
use crate::api::cloneset::CloneSetSpec;
use crate::workload::deletion::REVISION_LABEL;

const OLD: &str = "web-oldhash1";
const NEW: &str = "web-newhash2";

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn now() -> Timestamp {
    ts(1_000)
}

fn cloneset(replicas: i32) -> CloneSet {
    let mut cs = CloneSet::new(
        "web",
        CloneSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
                ..LabelSelector::default()
            },
            ..CloneSetSpec::default()
        },
    );
    cs.metadata.generation = Some(4);
    cs
}

fn with(mut cs: CloneSet, f: impl FnOnce(&mut CloneSetSpec)) -> CloneSet {
    f(&mut cs.spec);
    cs
}

fn with_status(mut cs: CloneSet, status: CloneSetStatus) -> CloneSet {
    cs.status = Some(status);
    cs
}

/// A pod on `revision`, ready since `ready_since` (None: not ready).
fn pod(name: &str, revision: &str, ready_since: Option<i64>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([(
                REVISION_LABEL.to_owned(),
                revision.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("node".to_owned()),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".to_owned()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".to_owned(),
                status: if ready_since.is_some() {
                    "True"
                } else {
                    "False"
                }
                .to_owned(),
                last_transition_time: Some(Time(ts(ready_since.unwrap_or(0)))),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        }),
    }
}

fn ready(name: &str, revision: &str) -> Pod {
    pod(name, revision, Some(0))
}

fn terminating(mut p: Pod) -> Pod {
    p.metadata.deletion_timestamp = Some(Time(ts(900)));
    p
}

fn status_of(cs: &CloneSet, pods: &[Pod]) -> (CloneSetStatus, Option<Duration>) {
    status_with(cs, pods, &SyncProblems::default(), now())
}

fn status_with(
    cs: &CloneSet,
    pods: &[Pod],
    problems: &SyncProblems,
    at: Timestamp,
) -> (CloneSetStatus, Option<Duration>) {
    let refs: Vec<&Pod> = pods.iter().collect();
    compute_status(cs, &refs, NEW, OLD, 0, problems, at)
}

fn condition<'s>(status: &'s CloneSetStatus, type_: &str) -> Option<&'s CloneSetCondition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

fn condition_summary(status: &CloneSetStatus, type_: &str) -> Option<(String, String)> {
    condition(status, type_).map(|c| (c.status.clone(), c.reason.clone()))
}

fn summary(status: &str, reason: &str) -> Option<(String, String)> {
    Some((status.to_owned(), reason.to_owned()))
}

#[test]
fn counts_follow_the_active_pods() {
    // (name, pods, minReadySeconds, [replicas, ready, available, updated, updatedReady,
    // updatedAvailable])
    let cases: Vec<(&str, Vec<Pod>, i32, [i32; 6])> = vec![
        ("no pods", vec![], 0, [0, 0, 0, 0, 0, 0]),
        (
            "mixed revisions and readiness",
            vec![
                ready("a", NEW),
                pod("b", NEW, None),
                ready("c", OLD),
                pod("d", OLD, None),
            ],
            0,
            [4, 2, 2, 2, 1, 1],
        ),
        (
            "terminating and finished pods do not count",
            vec![ready("a", NEW), terminating(ready("b", NEW)), {
                let mut p = ready("c", NEW);
                p.status.as_mut().unwrap().phase = Some("Succeeded".to_owned());
                p
            }],
            0,
            [1, 1, 1, 1, 1, 1],
        ),
        (
            "minReadySeconds: ready but not yet available",
            vec![
                pod("a", NEW, Some(995)),
                pod("b", NEW, Some(100)),
                pod("c", OLD, Some(999)),
            ],
            10,
            [3, 3, 1, 2, 2, 1],
        ),
        (
            "the short hash counts as the update revision",
            vec![ready("a", "newhash2"), ready("b", OLD)],
            0,
            [2, 2, 2, 1, 1, 1],
        ),
    ];
    for (name, pods, min_ready, want) in cases {
        let cs = with(cloneset(4), |s| s.min_ready_seconds = min_ready);
        let (status, _) = status_of(&cs, &pods);
        let got = [
            status.replicas,
            status.ready_replicas,
            status.available_replicas,
            status.updated_replicas,
            status.updated_ready_replicas,
            status.updated_available_replicas.unwrap_or(-1),
        ];
        assert_eq!(got, want, "{name}");
        assert_eq!(status.observed_generation, 4, "{name}");
        assert_eq!(status.update_revision, NEW, "{name}");
    }
}

#[test]
fn requeue_when_a_ready_pod_turns_available() {
    let cases: Vec<(&str, i32, Vec<Pod>, Option<u64>)> = vec![
        (
            "no minReadySeconds",
            0,
            vec![pod("a", NEW, Some(999))],
            None,
        ),
        (
            "ready 5s of 10: 5s + 1s",
            10,
            vec![pod("a", NEW, Some(995))],
            Some(6),
        ),
        (
            "the soonest pod",
            10,
            vec![pod("a", NEW, Some(992)), pod("b", NEW, Some(995))],
            Some(3),
        ),
        (
            "all available already",
            10,
            vec![pod("a", NEW, Some(100))],
            None,
        ),
        (
            "not ready: nothing to wait for",
            10,
            vec![pod("a", NEW, None)],
            None,
        ),
    ];
    for (name, min_ready, pods, want) in cases {
        let cs = with(cloneset(1), |s| s.min_ready_seconds = min_ready);
        let (_, requeue) = status_of(&cs, &pods);
        assert_eq!(requeue, want.map(Duration::from_secs), "{name}");
    }
}

#[test]
fn expected_updated_replicas_leaves_out_the_partition() {
    let cases: Vec<(&str, i32, Option<IntOrString>, i32)> = vec![
        ("no partition", 5, None, 5),
        ("int", 5, Some(IntOrString::Int(2)), 3),
        ("int above replicas", 5, Some(IntOrString::Int(9)), 0),
        (
            "50% of 5 rounds up to 3 kept",
            5,
            Some(IntOrString::String("50%".into())),
            2,
        ),
        (
            "99% of 5 still updates one",
            5,
            Some(IntOrString::String("99%".into())),
            1,
        ),
        ("100%", 5, Some(IntOrString::String("100%".into())), 0),
    ];
    for (name, replicas, partition, want) in cases {
        let cs = with(cloneset(replicas), |s| {
            s.update_strategy.partition = partition;
        });
        let (status, _) = status_of(&cs, &[]);
        assert_eq!(status.expected_updated_replicas, want, "{name}");
    }
}

#[test]
fn current_revision_moves_only_when_all_pods_are_updated() {
    let cases: Vec<(&str, i32, Vec<Pod>, &str)> = vec![
        (
            "all updated",
            2,
            vec![ready("a", NEW), ready("b", NEW)],
            NEW,
        ),
        (
            "updated but not ready still counts",
            2,
            vec![ready("a", NEW), pod("b", NEW, None)],
            NEW,
        ),
        (
            "one old pod left",
            2,
            vec![ready("a", NEW), ready("b", OLD)],
            OLD,
        ),
        (
            "updated pods missing",
            3,
            vec![ready("a", NEW), ready("b", NEW)],
            OLD,
        ),
        (
            "more pods than replicas",
            1,
            vec![ready("a", NEW), ready("b", NEW)],
            OLD,
        ),
    ];
    for (name, replicas, pods, want) in cases {
        let (status, _) = status_of(&cloneset(replicas), &pods);
        assert_eq!(status.current_revision, want, "{name}");
    }
}

#[test]
fn label_selector_and_collision_count() {
    let cs = with(cloneset(1), |s| {
        s.selector = LabelSelector {
            match_labels: Some(BTreeMap::from([
                ("app".to_owned(), "web".to_owned()),
                ("tier".to_owned(), "front".to_owned()),
            ])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "env".to_owned(),
                operator: "In".to_owned(),
                values: Some(vec!["prod".to_owned(), "canary".to_owned()]),
            }]),
        };
    });
    let (status, _) = status_of(&cs, &[]);
    assert_eq!(
        status.label_selector,
        "app=web,env in (canary,prod),tier=front"
    );
    assert_eq!(status.collision_count, None);

    let refs: Vec<&Pod> = Vec::new();
    let (status, _) = compute_status(
        &cloneset(1),
        &refs,
        NEW,
        OLD,
        2,
        &SyncProblems::default(),
        now(),
    );
    assert_eq!(status.label_selector, "app=web");
    assert_eq!(status.collision_count, Some(2));
}

#[test]
fn failed_scale_and_failed_update_follow_the_sync_problems() {
    let problems = SyncProblems {
        scale: Some("pods \"web-x\" is forbidden: exceeded quota".to_owned()),
        update: Some("updateStrategy.type is InPlaceOnly but ...".to_owned()),
    };
    let (status, _) = status_with(&cloneset(1), &[], &problems, ts(10));
    for (type_, message) in [
        (FAILED_SCALE, problems.scale.as_deref().unwrap()),
        (FAILED_UPDATE, problems.update.as_deref().unwrap()),
    ] {
        let c = condition(&status, type_).expect(type_);
        assert_eq!(c.status, "True");
        assert_eq!(c.reason, type_);
        assert_eq!(c.message, message);
        assert_eq!(c.last_transition_time, Some(Time(ts(10))));
    }

    // Still failing later (another pod's name in the message): the condition stays as it
    // was, so a retry does not rewrite the status and requeue itself past its backoff.
    let later = SyncProblems {
        scale: Some("pods \"web-y\" is forbidden: exceeded quota".to_owned()),
        update: None,
    };
    let cs = with_status(cloneset(1), status);
    let (status, _) = status_with(&cs, &[], &later, ts(50));
    let c = condition(&status, FAILED_SCALE).unwrap();
    assert_eq!(c.message, problems.scale.as_deref().unwrap());
    assert_eq!(c.last_transition_time, Some(Time(ts(10))));
    // The update problem went away: its condition is removed.
    assert!(condition(&status, FAILED_UPDATE).is_none());

    let cs = with_status(cloneset(1), status);
    let (status, _) = status_with(&cs, &[], &SyncProblems::default(), ts(60));
    assert!(condition(&status, FAILED_SCALE).is_none());
}

#[test]
fn available_condition_compares_with_replicas_minus_max_unavailable() {
    let pods = |ready_count: usize, total: usize| -> Vec<Pod> {
        (0..total)
            .map(|i| {
                let name = format!("p{i}");
                if i < ready_count {
                    ready(&name, NEW)
                } else {
                    pod(&name, NEW, None)
                }
            })
            .collect()
    };
    let cases: Vec<(&str, i32, Option<IntOrString>, Vec<Pod>, bool)> = vec![
        ("all available", 5, None, pods(5, 5), true),
        ("default 20% of 5 = 1 missing", 5, None, pods(4, 5), true),
        ("two missing", 5, None, pods(3, 5), false),
        ("int 2", 5, Some(IntOrString::Int(2)), pods(3, 5), true),
        ("int 0", 5, Some(IntOrString::Int(0)), pods(4, 5), false),
        ("no replicas", 0, None, vec![], true),
    ];
    for (name, replicas, max_unavailable, pods, want) in cases {
        let cs = with(cloneset(replicas), |s| {
            s.update_strategy.max_unavailable = max_unavailable;
        });
        let (status, _) = status_of(&cs, &pods);
        let want_reason = if want {
            "MinimumReplicasAvailable"
        } else {
            "MinimumReplicasUnavailable"
        };
        assert_eq!(
            condition_summary(&status, AVAILABLE),
            summary(if want { "True" } else { "False" }, want_reason),
            "{name}"
        );
    }
}

#[test]
fn available_condition_keeps_its_transition_time_while_unchanged() {
    let strict = || {
        with(cloneset(1), |s| {
            s.update_strategy.max_unavailable = Some(IntOrString::Int(0));
        })
    };
    let cs = strict();
    let (first, _) = status_with(&cs, &[ready("a", NEW)], &SyncProblems::default(), ts(10));
    let cs = with_status(strict(), first);
    let (second, _) = status_with(&cs, &[ready("a", NEW)], &SyncProblems::default(), ts(50));
    assert_eq!(
        condition(&second, AVAILABLE).unwrap().last_transition_time,
        Some(Time(ts(10)))
    );
    let cs = with_status(strict(), second);
    let (third, _) = status_with(
        &cs,
        &[pod("a", NEW, None)],
        &SyncProblems::default(),
        ts(90),
    );
    let c = condition(&third, AVAILABLE).unwrap();
    assert_eq!(c.status, "False");
    assert_eq!(c.last_transition_time, Some(Time(ts(90))));
}

fn deadline(cs: CloneSet, seconds: i32) -> CloneSet {
    with(cs, |s| s.progress_deadline_seconds = Some(seconds))
}

#[test]
fn progressing_needs_a_progress_deadline() {
    let (status, _) = status_of(&cloneset(2), &[ready("a", OLD)]);
    assert!(condition(&status, PROGRESSING).is_none());

    // A deadline removed later removes the condition too.
    let (with_deadline, _) = status_of(&deadline(cloneset(2), 60), &[ready("a", OLD)]);
    assert!(condition(&with_deadline, PROGRESSING).is_some());
    let cs = with_status(cloneset(2), with_deadline);
    let (status, _) = status_of(&cs, &[ready("a", OLD)]);
    assert!(condition(&status, PROGRESSING).is_none());
}

#[test]
fn progressing_through_a_rollout() {
    let problems = SyncProblems::default();
    // Start: one of two pods updated, first look.
    let pods = [ready("a", NEW), ready("b", OLD)];
    let (s1, requeue) = status_with(&deadline(cloneset(2), 60), &pods, &problems, ts(100));
    assert_eq!(
        condition_summary(&s1, PROGRESSING),
        summary("True", "CloneSetProgressing")
    );
    assert_eq!(
        condition(&s1, PROGRESSING).unwrap().last_transition_time,
        Some(Time(ts(100)))
    );
    assert_eq!(requeue, Some(Duration::from_secs(61)));

    // Nothing moved, 30s later: wait for the rest of the deadline (+1s).
    let cs = with_status(deadline(cloneset(2), 60), s1.clone());
    let (s2, requeue) = status_with(&cs, &pods, &problems, ts(130));
    assert_eq!(
        condition_summary(&s2, PROGRESSING),
        summary("True", "CloneSetProgressing")
    );
    assert_eq!(
        condition(&s2, PROGRESSING).unwrap().last_transition_time,
        Some(Time(ts(100)))
    );
    assert_eq!(requeue, Some(Duration::from_secs(31)));

    // Nothing moved for the whole deadline: exceeded.
    let cs = with_status(deadline(cloneset(2), 60), s2);
    let (s3, _) = status_with(&cs, &pods, &problems, ts(160));
    assert_eq!(
        condition_summary(&s3, PROGRESSING),
        summary("False", "ProgressDeadlineExceeded")
    );
    assert_eq!(
        condition(&s3, PROGRESSING).unwrap().last_transition_time,
        Some(Time(ts(160)))
    );

    // Stays exceeded while nothing moves.
    let cs = with_status(deadline(cloneset(2), 60), s3.clone());
    let (s4, _) = status_with(&cs, &pods, &problems, ts(500));
    assert_eq!(
        condition_summary(&s4, PROGRESSING),
        summary("False", "ProgressDeadlineExceeded")
    );
    assert_eq!(
        condition(&s4, PROGRESSING).unwrap().last_transition_time,
        Some(Time(ts(160)))
    );

    // A count moves (b becomes not ready while it is recreated): progressing again.
    let moving = [ready("a", NEW), pod("b", NEW, None)];
    let cs = with_status(deadline(cloneset(2), 60), s4);
    let (s5, requeue) = status_with(&cs, &moving, &problems, ts(510));
    assert_eq!(
        condition_summary(&s5, PROGRESSING),
        summary("True", "CloneSetProgressing")
    );
    assert_eq!(
        condition(&s5, PROGRESSING).unwrap().last_transition_time,
        Some(Time(ts(510)))
    );
    assert_eq!(requeue, Some(Duration::from_secs(61)));

    // Everything updated and available: complete, no more deadline requeue.
    let done = [ready("a", NEW), ready("b", NEW)];
    let cs = with_status(deadline(cloneset(2), 60), s5);
    let (s6, requeue) = status_with(&cs, &done, &problems, ts(520));
    assert_eq!(
        condition_summary(&s6, PROGRESSING),
        summary("True", "CloneSetAvailable")
    );
    assert_eq!(requeue, None);

    // Long after, still complete: no deadline applies.
    let cs = with_status(deadline(cloneset(2), 60), s6);
    let (s7, _) = status_with(&cs, &done, &problems, ts(5_000));
    assert_eq!(
        condition_summary(&s7, PROGRESSING),
        summary("True", "CloneSetAvailable")
    );
    assert_eq!(
        condition(&s7, PROGRESSING).unwrap().last_transition_time,
        Some(Time(ts(520)))
    );
}

#[test]
fn a_partitioned_rollout_is_complete_at_the_partition() {
    let cs = deadline(
        with(cloneset(3), |s| {
            s.update_strategy.partition = Some(IntOrString::Int(2));
        }),
        60,
    );
    let pods = [ready("a", NEW), ready("b", OLD), ready("c", OLD)];
    let (status, requeue) = status_of(&cs, &pods);
    assert_eq!(status.expected_updated_replicas, 1);
    assert_eq!(
        condition_summary(&status, PROGRESSING),
        summary("True", "CloneSetAvailable")
    );
    assert_eq!(requeue, None);
    assert_eq!(status.current_revision, OLD);
}

#[test]
fn a_new_update_revision_counts_as_progress() {
    let cs = deadline(cloneset(1), 60);
    // Complete on OLD a long time ago...
    let old_status = CloneSetStatus {
        replicas: 1,
        ready_replicas: 1,
        available_replicas: 1,
        updated_replicas: 1,
        updated_ready_replicas: 1,
        updated_available_replicas: Some(1),
        expected_updated_replicas: 1,
        update_revision: OLD.to_owned(),
        current_revision: OLD.to_owned(),
        conditions: vec![CloneSetCondition {
            type_: PROGRESSING.to_owned(),
            status: "True".to_owned(),
            last_transition_time: Some(Time(ts(0))),
            reason: "CloneSetAvailable".to_owned(),
            message: String::new(),
        }],
        ..CloneSetStatus::default()
    };
    // ...then the template changes: the pod is on the old revision.
    let cs = with_status(cs, old_status);
    let (status, requeue) = status_of(&cs, &[ready("a", OLD)]);
    assert_eq!(
        condition_summary(&status, PROGRESSING),
        summary("True", "CloneSetProgressing")
    );
    assert_eq!(
        condition(&status, PROGRESSING)
            .unwrap()
            .last_transition_time,
        Some(Time(now()))
    );
    assert_eq!(requeue, Some(Duration::from_secs(61)));
}

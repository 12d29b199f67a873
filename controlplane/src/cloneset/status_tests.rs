//! Status counts and conditions, as OpenKruise 1.9's `cloneset_status.go` computes them.

#![allow(
    clippy::type_complexity,
    reason = "case tables are tuples read in one place"
)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;
use crate::api::cloneset::{CloneSetCondition, CloneSetSpec};
use crate::cloneset::progress::*;
use crate::workload::deletion::REVISION_LABEL;
use crate::workload::inplace::INPLACE_UPDATE_READY;
use crate::workload::lifecycle::STATE_LABEL;

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
        ..SyncProblems::default()
    };
    let (status, _) = status_with(&cloneset(1), &[], &problems, ts(10));
    for (type_, message) in [
        (FAILED_SCALE, problems.scale.as_deref().unwrap()),
        (FAILED_UPDATE, problems.update.as_deref().unwrap()),
    ] {
        let c = condition(&status, type_).expect(type_);
        assert_eq!(c.status, "True");
        assert_eq!(
            c.reason, "",
            "OpenKruise leaves the reason of {type_} empty"
        );
        assert_eq!(c.message, message);
        assert_eq!(c.last_transition_time, Some(Time(ts(10))));
    }

    // Still failing later (another pod's name in the message): the condition stays as it
    // was, so a retry does not rewrite the status and requeue itself past its backoff.
    let later = SyncProblems {
        scale: Some("pods \"web-y\" is forbidden: exceeded quota".to_owned()),
        update: None,
        ..SyncProblems::default()
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

fn deadline(cs: CloneSet, seconds: i32) -> CloneSet {
    with(cs, |s| s.progress_deadline_seconds = Some(seconds))
}

/// `p` with the lifecycle state label `state`.
fn in_state(mut p: Pod, state: &str) -> Pod {
    p.metadata
        .labels
        .get_or_insert_default()
        .insert(STATE_LABEL.to_owned(), state.to_owned());
    p
}

/// `p` with its `InPlaceUpdateReady` condition set to `status`.
fn in_place_ready(mut p: Pod, status: &str) -> Pod {
    p.status
        .as_mut()
        .unwrap()
        .conditions
        .get_or_insert_default()
        .push(PodCondition {
            type_: INPLACE_UPDATE_READY.to_owned(),
            status: status.to_owned(),
            ..PodCondition::default()
        });
    p
}

fn progressing(status: &CloneSetStatus) -> Option<(String, String, String)> {
    condition(status, PROGRESSING).map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn says(status: &str, reason: &str, message: &str) -> Option<(String, String, String)> {
    Some((status.to_owned(), reason.to_owned(), message.to_owned()))
}

#[test]
fn no_available_condition_is_written_and_an_old_one_is_removed() {
    let legacy = CloneSetStatus {
        conditions: vec![CloneSetCondition {
            type_: "Available".to_owned(),
            status: "True".to_owned(),
            reason: "MinimumReplicasAvailable".to_owned(),
            ..CloneSetCondition::default()
        }],
        ..CloneSetStatus::default()
    };
    let cs = with_status(deadline(cloneset(1), 60), legacy);
    let (status, _) = status_of(&cs, &[ready("a", NEW)]);
    let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, vec![PROGRESSING]);
}

#[test]
fn pods_held_by_a_hook_or_an_in_place_update_are_not_available() {
    // (name, pods, [ready, available, updatedReady, updatedAvailable])
    let cases: Vec<(&str, Vec<Pod>, [i32; 4])> = vec![
        (
            "Normal",
            vec![in_state(ready("a", NEW), "Normal")],
            [1, 1, 1, 1],
        ),
        (
            "held in PreparingNormal by preNormal: ready, not available",
            vec![in_state(ready("a", NEW), "PreparingNormal")],
            [1, 0, 1, 0],
        ),
        (
            "PreparingDelete",
            vec![in_state(ready("a", NEW), "PreparingDelete")],
            [1, 0, 1, 0],
        ),
        (
            "mid in-place update: Ready but InPlaceUpdateReady False",
            vec![in_place_ready(ready("a", NEW), "False")],
            [0, 0, 0, 0],
        ),
        (
            "in-place update done",
            vec![in_place_ready(ready("a", NEW), "True")],
            [1, 1, 1, 1],
        ),
    ];
    for (name, pods, want) in cases {
        let (status, _) = status_of(&cloneset(1), &pods);
        let got = [
            status.ready_replicas,
            status.available_replicas,
            status.updated_ready_replicas,
            status.updated_available_replicas.unwrap_or(-1),
        ];
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn progressing_needs_a_progress_deadline() {
    for (name, seconds) in [
        ("unset", None),
        ("2147483647 means none", Some(i32::MAX)),
        ("zero", Some(0)),
    ] {
        let cs = with(cloneset(2), |s| s.progress_deadline_seconds = seconds);
        let (status, requeue) = status_of(&cs, &[ready("a", OLD)]);
        assert!(condition(&status, PROGRESSING).is_none(), "{name}");
        assert_eq!(requeue, None, "{name}");
    }

    // A deadline removed (or set to 2147483647) later removes the condition too.
    let (with_deadline, _) = status_of(&deadline(cloneset(2), 60), &[ready("a", OLD)]);
    assert!(condition(&with_deadline, PROGRESSING).is_some());
    let cs = with_status(deadline(cloneset(2), i32::MAX), with_deadline);
    let (status, _) = status_of(&cs, &[ready("a", OLD)]);
    assert!(condition(&status, PROGRESSING).is_none());
}

#[test]
fn progressing_reasons_and_messages_are_openkruises() {
    let partitioned = |cs: CloneSet| {
        with(cs, |s| {
            s.update_strategy.partition = Some(IntOrString::Int(1));
        })
    };
    let paused = |cs: CloneSet| with(cs, |s| s.update_strategy.paused = true);
    let cases: Vec<(&str, CloneSet, Vec<Pod>, Option<(String, String, String)>)> = vec![
        (
            "all updated and available",
            cloneset(2),
            vec![ready("a", NEW), ready("b", NEW)],
            says("True", REASON_AVAILABLE, "CloneSet is available"),
        ),
        (
            "under way",
            cloneset(2),
            vec![ready("a", NEW), ready("b", OLD)],
            says("True", REASON_UPDATED, "CloneSet is progressing"),
        ),
        (
            "paused",
            paused(cloneset(2)),
            vec![ready("a", NEW), ready("b", OLD)],
            says("True", REASON_PAUSED, "CloneSet is paused"),
        ),
        (
            "complete beats paused",
            paused(cloneset(2)),
            vec![ready("a", NEW), ready("b", NEW)],
            says("True", REASON_AVAILABLE, "CloneSet is available"),
        ),
        (
            "partition reached",
            partitioned(cloneset(2)),
            vec![ready("a", NEW), ready("b", OLD)],
            says(
                "True",
                REASON_PARTITION_AVAILABLE,
                "CloneSet has been paused due to partition ready",
            ),
        ),
        (
            "partition not reached: the updated pod is not available",
            partitioned(cloneset(2)),
            vec![pod("a", NEW, None), ready("b", OLD)],
            says("True", REASON_UPDATED, "CloneSet is progressing"),
        ),
        (
            "a pod held in PreparingNormal keeps the rollout under way",
            cloneset(1),
            vec![in_state(ready("a", NEW), "PreparingNormal")],
            says("True", REASON_UPDATED, "CloneSet is progressing"),
        ),
    ];
    for (name, cs, pods, want) in cases {
        let (status, _) = status_of(&deadline(cs, 60), &pods);
        assert_eq!(progressing(&status), want, "{name}");
    }
}

#[test]
fn progressing_through_a_rollout() {
    let problems = SyncProblems::default();
    let cs = || deadline(cloneset(2), 60);
    // Start: one of two pods updated, first look.
    let pods = [ready("a", NEW), ready("b", OLD)];
    let (s1, requeue) = status_with(&cs(), &pods, &problems, ts(100));
    let c = condition(&s1, PROGRESSING).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", REASON_UPDATED)
    );
    assert_eq!(c.last_update_time, Some(Time(ts(100))));
    assert_eq!(requeue, Some(Duration::from_secs(61)));

    // 30s later, a count moved: the rollout as a whole still has only the rest of its
    // deadline (OpenKruise does not restart the clock on progress).
    let moving = [ready("a", NEW), pod("b", NEW, None)];
    let (s2, requeue) = status_with(&with_status(cs(), s1), &moving, &problems, ts(130));
    let c = condition(&s2, PROGRESSING).unwrap();
    assert_eq!(c.reason, REASON_UPDATED);
    assert_eq!(c.last_update_time, Some(Time(ts(100))));
    assert_eq!(requeue, Some(Duration::from_secs(31)));

    // The deadline passes before the rollout completes: exceeded, naming the revision.
    let (s3, requeue) = status_with(&with_status(cs(), s2), &moving, &problems, ts(160));
    assert_eq!(
        progressing(&s3),
        says(
            "False",
            REASON_DEADLINE_EXCEEDED,
            &format!("CloneSet revision {NEW} has timed out progressing")
        )
    );
    let c = condition(&s3, PROGRESSING).unwrap();
    assert_eq!(c.last_transition_time, Some(Time(ts(160))));
    assert_eq!(requeue, None);

    // Stays exceeded while the rollout is unfinished, whatever moves.
    let (s4, _) = status_with(&with_status(cs(), s3), &pods, &problems, ts(500));
    let c = condition(&s4, PROGRESSING).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", REASON_DEADLINE_EXCEEDED)
    );
    assert_eq!(c.last_transition_time, Some(Time(ts(160))));

    // Everything updated and available at last: available, no deadline requeue.
    let done = [ready("a", NEW), ready("b", NEW)];
    let (s5, requeue) = status_with(&with_status(cs(), s4), &done, &problems, ts(520));
    assert_eq!(
        progressing(&s5),
        says("True", REASON_AVAILABLE, "CloneSet is available")
    );
    assert_eq!(
        condition(&s5, PROGRESSING).unwrap().last_transition_time,
        Some(Time(ts(520)))
    );
    assert_eq!(requeue, None);

    // Long after, still available, times kept.
    let (s6, _) = status_with(&with_status(cs(), s5), &done, &problems, ts(5_000));
    let c = condition(&s6, PROGRESSING).unwrap();
    assert_eq!(c.reason, REASON_AVAILABLE);
    assert_eq!(c.last_transition_time, Some(Time(ts(520))));
    assert_eq!(c.last_update_time, Some(Time(ts(520))));
}

#[test]
fn a_pod_held_in_preparing_normal_reaches_the_deadline() {
    let cs = || deadline(cloneset(1), 60);
    let held = [in_state(ready("a", NEW), "PreparingNormal")];
    let (first, _) = status_with(&cs(), &held, &SyncProblems::default(), ts(0));
    assert_eq!(first.available_replicas, 0);
    let (later, _) = status_with(
        &with_status(cs(), first),
        &held,
        &SyncProblems::default(),
        ts(61),
    );
    assert_eq!(
        condition_summary(&later, PROGRESSING),
        summary("False", REASON_DEADLINE_EXCEEDED)
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
        summary("True", REASON_PARTITION_AVAILABLE)
    );
    assert_eq!(requeue, None);
    assert_eq!(status.current_revision, OLD);
}

/// The old status of a CloneSet whose Progressing condition says `reason` since t=0 and
/// whose rollout is on `update_revision`.
fn old_status(reason: &str, value: &str, update_revision: &str) -> CloneSetStatus {
    CloneSetStatus {
        replicas: 1,
        update_revision: update_revision.to_owned(),
        current_revision: OLD.to_owned(),
        conditions: vec![CloneSetCondition {
            type_: PROGRESSING.to_owned(),
            status: value.to_owned(),
            last_transition_time: Some(Time(ts(0))),
            last_update_time: Some(Time(ts(0))),
            reason: reason.to_owned(),
            message: String::new(),
        }],
        ..CloneSetStatus::default()
    }
}

#[test]
fn when_the_deadline_clock_starts() {
    // (name, old status, now, want reason, want requeue)
    let cases: Vec<(&str, CloneSetStatus, i64, &str, Option<u64>)> = vec![
        (
            "under way since t=0, 30s in",
            old_status(REASON_UPDATED, "True", NEW),
            30,
            REASON_UPDATED,
            Some(31),
        ),
        (
            "under way since t=0, 60s in",
            old_status(REASON_UPDATED, "True", NEW),
            60,
            REASON_DEADLINE_EXCEEDED,
            None,
        ),
        (
            "was available: a scale-up starts the clock now",
            old_status(REASON_AVAILABLE, "True", NEW),
            1_000,
            REASON_UPDATED,
            Some(61),
        ),
        (
            "was paused: resuming starts the clock now",
            old_status(REASON_PAUSED, "True", NEW),
            1_000,
            REASON_UPDATED,
            Some(61),
        ),
        (
            "was exceeded: stays exceeded",
            old_status(REASON_DEADLINE_EXCEEDED, "False", NEW),
            1_000,
            REASON_DEADLINE_EXCEEDED,
            None,
        ),
        (
            "was exceeded, then a new update revision: a new rollout, a new clock",
            old_status(REASON_DEADLINE_EXCEEDED, "False", OLD),
            1_000,
            REASON_UPDATED,
            Some(61),
        ),
        (
            "under way on another revision: a new clock",
            old_status(REASON_UPDATED, "True", OLD),
            1_000,
            REASON_UPDATED,
            Some(61),
        ),
    ];
    for (name, old, at, want_reason, want_requeue) in cases {
        let cs = with_status(deadline(cloneset(1), 60), old);
        let (status, requeue) =
            status_with(&cs, &[ready("a", OLD)], &SyncProblems::default(), ts(at));
        assert_eq!(
            condition(&status, PROGRESSING).unwrap().reason,
            want_reason,
            "{name}"
        );
        assert_eq!(requeue, want_requeue.map(Duration::from_secs), "{name}");
    }
}

#[test]
fn update_held_names_the_clonesets_own_fields_and_follows_only_evaluated_syncs() {
    use crate::workload::update_hold::{UPDATE_HELD, UpdateHold, UpdateHoldSeen};
    let held = SyncProblems {
        update_hold: UpdateHoldSeen::Held(UpdateHold::Partition {
            kept: vec!["web-a".to_owned()],
        }),
        ..SyncProblems::default()
    };
    let (status, _) = status_with(&cloneset(1), &[], &held, ts(10));
    let c = condition(&status, UPDATE_HELD).expect("UpdateHeld");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", "Partition")
    );
    assert!(
        c.message
            .starts_with("spec.updateStrategy.partition keeps 1 pod on their revision (web-a)"),
        "{}",
        c.message
    );

    // A sync whose update step did not run keeps it; one that found nothing held drops it.
    let cs = with_status(cloneset(1), status);
    let (kept, _) = status_with(&cs, &[], &SyncProblems::default(), ts(20));
    assert!(condition(&kept, UPDATE_HELD).is_some());
    let clear = SyncProblems {
        update_hold: UpdateHoldSeen::Clear,
        ..SyncProblems::default()
    };
    let (cleared, _) = status_with(&cs, &[], &clear, ts(30));
    assert!(condition(&cleared, UPDATE_HELD).is_none());
}

#![allow(
    clippy::type_complexity,
    reason = "case tables are tuples read in one place"
)]

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;
use crate::workload::deletion::REVISION_LABEL;
use crate::workload::lifecycle::STATE_LABEL;

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn view<'p>(
    pod: &'p Pod,
    update_revision: &str,
    min_ready_seconds: i32,
    now: Timestamp,
) -> PodView<'p> {
    PodView::of(
        pod,
        &ViewContext {
            update_revision,
            min_ready_seconds,
            now,
            named_for_deletion: &BTreeSet::new(),
        },
    )
}

fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            creation_timestamp: Some(Time(ts(0))),
            labels: Some(BTreeMap::from([(
                REVISION_LABEL.to_owned(),
                "rev-2".to_owned(),
            )])),
            annotations: Some(BTreeMap::from([(
                POD_DELETION_COST_ANNOTATION.to_owned(),
                "-3".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("node-a".to_owned()),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".to_owned()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".to_owned(),
                status: "True".to_owned(),
                last_transition_time: Some(Time(ts(100))),
                ..PodCondition::default()
            }]),
            container_statuses: Some(vec![
                ContainerStatus {
                    name: "a".into(),
                    restart_count: 2,
                    ..ContainerStatus::default()
                },
                ContainerStatus {
                    name: "b".into(),
                    restart_count: 5,
                    ..ContainerStatus::default()
                },
            ]),
            ..PodStatus::default()
        }),
    }
}

#[test]
fn facts_from_pod() {
    let p = pod("p");
    let facts = view(&p, "rev-2", 30, ts(200));
    assert_eq!(
        facts,
        PodView {
            name: "p".into(),
            node_name: "node-a".into(),
            phase: "Running".into(),
            ready: true,
            ready_since: Some(ts(100)),
            available: true,
            in_place_not_ready: false,
            deletion_cost: -3,
            max_restarts: 5,
            created: Some(ts(0)),
            updated: true,
            specified_delete: false,
            lifecycle: None,
            updating_in_place: false,
            terminating: false,
            labels: std::borrow::Cow::Owned(pod("p").metadata.labels.unwrap()),
        }
    );
}

#[test]
fn facts_availability_and_labels() {
    // Ready 100s ago is not available with minReadySeconds 101.
    assert!(!view(&pod("p"), "rev-2", 101, ts(200)).available);
    assert!(view(&pod("p"), "rev-2", 100, ts(200)).available);
    assert!(!view(&pod("p"), "rev-3", 0, ts(200)).updated);

    let mut marked = pod("p");
    let labels = marked.metadata.labels.get_or_insert_default();
    labels.insert(SPECIFIED_DELETE_LABEL.into(), String::new());
    labels.insert(STATE_LABEL.into(), "PreparingDelete".into());
    let facts = view(&marked, "rev-2", 0, ts(200));
    assert!(facts.specified_delete && facts.preparing_delete());

    let empty = Pod::default();
    let facts = view(&empty, "rev-2", 0, ts(0));
    assert_eq!(facts, PodView::default());
}

#[test]
fn named_pods_short_hashes_and_in_place_updates_show_in_the_view() {
    let named = BTreeSet::from(["p".to_owned()]);
    let ctx = ViewContext {
        update_revision: "web-2",
        min_ready_seconds: 0,
        now: ts(200),
        named_for_deletion: &named,
    };
    let mut short = pod("p");
    short
        .metadata
        .labels
        .get_or_insert_default()
        .insert(REVISION_LABEL.into(), "2".into());
    short.metadata.annotations.get_or_insert_default().insert(
        crate::workload::inplace::STATE_ANNOTATION.into(),
        "{}".into(),
    );
    let view = PodView::of(&short, &ctx);
    assert!(view.specified_delete, "named in podsToDelete");
    assert!(view.updated, "the short hash names the update revision");
    assert!(
        view.available && !view.serving(),
        "an in-place update is not serving"
    );
}

#[test]
fn a_kept_state_annotation_counts_as_updating_only_until_marked_finished() {
    use crate::workload::inplace::{GRACE_ANNOTATION, STATE_ANNOTATION};
    let finished = r#"{"revision":"web-2","updateTimestamp":"2024-01-01T00:00:00Z","lastContainerStatuses":{},"stevedoreCompleted":true}"#;
    let under_way = r#"{"revision":"web-2","updateTimestamp":"2024-01-01T00:00:00Z","lastContainerStatuses":{}}"#;
    // (case, annotations, updating in place)
    let cases: Vec<(&str, Vec<(&str, &str)>, bool)> = vec![
        ("no annotation", vec![], false),
        ("state under way", vec![(STATE_ANNOTATION, under_way)], true),
        (
            "state kept, finished",
            vec![(STATE_ANNOTATION, finished)],
            false,
        ),
        (
            "finished state and a new grace period",
            vec![(STATE_ANNOTATION, finished), (GRACE_ANNOTATION, "{}")],
            true,
        ),
    ];
    for (case, annotations, want) in cases {
        let mut p = pod("p");
        let map = p.metadata.annotations.get_or_insert_default();
        for (k, v) in annotations {
            map.insert(k.to_owned(), v.to_owned());
        }
        let view = view(&p, "rev-2", 0, ts(200));
        assert_eq!(view.updating_in_place, want, "{case}");
        assert_eq!(view.serving(), !want, "{case}");
    }
}

/// `pod("p")` (Ready since t=100, no lifecycle state) with `InPlaceUpdateReady` set to
/// `in_place` (None: absent) and the lifecycle state label set to `state` (None: absent).
fn held(in_place: Option<&str>, state: Option<&str>) -> Pod {
    let mut p = pod("p");
    if let Some(status) = in_place {
        let conditions = p
            .status
            .as_mut()
            .unwrap()
            .conditions
            .get_or_insert_default();
        conditions.push(PodCondition {
            type_: INPLACE_UPDATE_READY.to_owned(),
            status: status.to_owned(),
            ..PodCondition::default()
        });
    }
    if let Some(state) = state {
        let labels = p.metadata.labels.get_or_insert_default();
        labels.insert(STATE_LABEL.to_owned(), state.to_owned());
    }
    p
}

#[test]
fn update_ready_and_serving_follow_openkruise() {
    // (name, InPlaceUpdateReady, lifecycle state, update_ready, serving)
    let cases: Vec<(&str, Option<&str>, Option<&str>, bool, bool)> = vec![
        ("plain ready pod", None, None, true, true),
        ("in-place update done", Some("True"), None, true, true),
        (
            "mid in-place update: Ready still True, not update-ready",
            Some("False"),
            None,
            false,
            false,
        ),
        ("lifecycle Normal", None, Some("Normal"), true, true),
        (
            "held in PreparingNormal by preNormal: ready, not available",
            None,
            Some("PreparingNormal"),
            true,
            false,
        ),
        (
            "PreparingUpdate",
            None,
            Some("PreparingUpdate"),
            true,
            false,
        ),
        (
            "PreparingDelete",
            None,
            Some("PreparingDelete"),
            true,
            false,
        ),
        (
            "Updated, waiting for the hook",
            None,
            Some("Updated"),
            true,
            false,
        ),
    ];
    for (name, in_place, state, update_ready, serving) in cases {
        let pod = held(in_place, state);
        let v = view(&pod, "rev-2", 0, ts(200));
        assert_eq!(v.update_ready(), update_ready, "{name}: update_ready");
        assert_eq!(v.serving(), serving, "{name}: serving");
    }
}

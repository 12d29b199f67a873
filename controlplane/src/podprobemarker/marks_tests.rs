//! What a pod carries for each probe state, and the patches that put it there.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::marks::{MarkedProbe, PodMarks, metadata_patch, pod_marks, status_patch};
use crate::api::nodepodprobe::ContainerProbeState;
use crate::api::podprobemarker::{PodContainerProbe, ProbeState};

fn probe(condition: Option<&str>) -> PodContainerProbe {
    let mut probe = json!({
        "name": "Idle", "containerName": "main",
        "probe": { "exec": { "command": ["true"] } },
        "markerPolicy": [
            { "state": "Succeeded", "labels": { "idle": "true" }, "annotations": { "cost": "-10" } },
            { "state": "Failed", "labels": { "idle": "false" } },
        ],
    });
    if let Some(condition) = condition {
        probe["podConditionType"] = json!(condition);
    }
    serde_json::from_value(probe).expect("valid probe")
}

fn pod(labels: Value, annotations: Value, conditions: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": "p", "namespace": "ns", "uid": "u1", "labels": labels, "annotations": annotations },
        "status": { "conditions": conditions },
    }))
    .expect("valid pod")
}

fn state(state: ProbeState, message: &str) -> ContainerProbeState {
    ContainerProbeState {
        name: "m#Idle".into(),
        state,
        message: message.into(),
        ..ContainerProbeState::default()
    }
}

fn set(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
        .collect()
}

/// (condition type and status, labels, annotations) a case expects.
type Expected = (
    Vec<(&'static str, &'static str)>,
    BTreeMap<String, Option<String>>,
    BTreeMap<String, Option<String>>,
);

fn summary(marks: &PodMarks) -> Expected {
    (
        marks
            .conditions
            .iter()
            .map(|c| (leak(&c.type_), c.status))
            .collect(),
        marks.labels.clone(),
        marks.annotations.clone(),
    )
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

#[test]
fn each_state_marks_and_unmarks_as_the_policy_says() {
    let healthy = json!([{ "type": "Healthy", "status": "True", "message": "ok" }]);
    let cases: [(&str, Pod, Option<ContainerProbeState>, Expected); 7] = [
        (
            "succeeded on a bare pod: condition True, success marks",
            pod(json!({}), json!({}), json!([])),
            Some(state(ProbeState::Succeeded, "ok")),
            (
                vec![("Healthy", "True")],
                set(&[("idle", Some("true"))]),
                set(&[("cost", Some("-10"))]),
            ),
        ),
        (
            "already right: nothing",
            pod(
                json!({ "idle": "true" }),
                json!({ "cost": "-10" }),
                healthy.clone(),
            ),
            Some(state(ProbeState::Succeeded, "ok")),
            (vec![], set(&[]), set(&[])),
        ),
        (
            "failed after success: condition False, failure label, success annotation removed",
            pod(
                json!({ "idle": "true" }),
                json!({ "cost": "-10" }),
                healthy.clone(),
            ),
            Some(state(ProbeState::Failed, "exit 1")),
            (
                vec![("Healthy", "False")],
                set(&[("idle", Some("false"))]),
                set(&[("cost", None)]),
            ),
        ),
        (
            "a new message alone rewrites the condition",
            pod(
                json!({ "idle": "true" }),
                json!({ "cost": "-10" }),
                healthy.clone(),
            ),
            Some(state(ProbeState::Succeeded, "still ok")),
            (vec![("Healthy", "True")], set(&[]), set(&[])),
        ),
        (
            "unknown changes nothing",
            pod(json!({}), json!({}), json!([])),
            Some(state(ProbeState::Unknown, "")),
            (vec![], set(&[]), set(&[])),
        ),
        (
            "no state reported yet changes nothing",
            pod(json!({}), json!({}), json!([])),
            None,
            (vec![], set(&[]), set(&[])),
        ),
        (
            "other labels and conditions are not touched",
            pod(
                json!({ "app": "web" }),
                json!({}),
                json!([{ "type": "Ready", "status": "True" }]),
            ),
            Some(state(ProbeState::Failed, "")),
            (
                vec![("Healthy", "False")],
                set(&[("idle", Some("false"))]),
                set(&[]),
            ),
        ),
    ];
    let spec = probe(Some("Healthy"));
    for (name, pod, reported, expected) in cases {
        let probes = [MarkedProbe {
            marker: "m",
            probe: &spec,
        }];
        let states: Vec<ContainerProbeState> = reported.into_iter().collect();
        assert_eq!(
            summary(&pod_marks(&pod, &probes, &states)),
            expected,
            "{name}"
        );
    }
}

#[test]
fn a_failure_without_a_failed_policy_removes_the_success_marks() {
    let mut spec = probe(None);
    spec.marker_policy
        .retain(|p| p.state == ProbeState::Succeeded);
    let pod = pod(
        json!({ "idle": "true" }),
        json!({ "cost": "-10" }),
        json!([]),
    );
    let marks = pod_marks(
        &pod,
        &[MarkedProbe {
            marker: "m",
            probe: &spec,
        }],
        &[state(ProbeState::Failed, "")],
    );
    assert_eq!(
        summary(&marks),
        (vec![], set(&[("idle", None)]), set(&[("cost", None)]))
    );
}

#[test]
fn patches_carry_the_uid_and_only_what_changes() {
    let now = Time(Timestamp::from_second(100).expect("time"));
    let spec = probe(Some("Healthy"));
    let probes = [MarkedProbe {
        marker: "m",
        probe: &spec,
    }];
    let bare = pod(json!({}), json!({}), json!([]));
    let marks = pod_marks(&bare, &probes, &[state(ProbeState::Succeeded, "ok")]);
    assert_eq!(
        metadata_patch("u1", &marks),
        Some(
            json!({ "metadata": { "uid": "u1", "labels": { "idle": "true" }, "annotations": { "cost": "-10" } } })
        )
    );
    let status = status_patch("u1", &marks, &now).expect("a status patch");
    assert_eq!(status["metadata"]["uid"], "u1");
    let condition = &status["status"]["conditions"][0];
    assert_eq!(
        (condition["type"].as_str(), condition["status"].as_str()),
        (Some("Healthy"), Some("True"))
    );
    assert_eq!(condition["lastTransitionTime"], json!(now));

    // A message change alone keeps the transition time; nothing at all, no patches.
    let healthy = pod(
        json!({ "idle": "true" }),
        json!({ "cost": "-10" }),
        json!([{ "type": "Healthy", "status": "True", "message": "ok" }]),
    );
    let reworded = pod_marks(&healthy, &probes, &[state(ProbeState::Succeeded, "fine")]);
    let status = status_patch("u1", &reworded, &now).expect("a status patch");
    assert!(
        status["status"]["conditions"][0]
            .get("lastTransitionTime")
            .is_none()
    );
    assert_eq!(metadata_patch("u1", &reworded), None);
    let same = pod_marks(&healthy, &probes, &[state(ProbeState::Succeeded, "ok")]);
    assert!(same.is_empty());
    assert_eq!(
        (metadata_patch("u1", &same), status_patch("u1", &same, &now)),
        (None, None)
    );
}

//! What refresh does before any scaling or update: readiness conditions of new pods set
//! True, and in-place grace periods waited out (requeue) and then carried out: rules of
//! the shared planner, over the toy workload.

#![allow(
    clippy::type_complexity,
    reason = "case tables are tuples read in one place"
)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::toy_case::{
    Case, NEW, NEW_IMAGE, OLD, OLD_IMAGE, PodBuilder, change, conditions, hook, is_quiet, names,
    patch, patch_annotation, pod, set, set_with,
};
use super::toy_tests::{Toy, ts};
use crate::api::common::{Lifecycle, PodUpdatePolicy};
use crate::workload::inplace::{
    GRACE_ANNOTATION, GraceSpec, INPLACE_UPDATE_READY, InPlaceUpdateState, REASON_SIDECAR_START,
    STATE_ANNOTATION, sidecar_gate_message,
};
use crate::workload::lifecycle::{KRUISE_POD_READY, LifecycleState};

#[test]
fn new_pods_get_their_readiness_conditions_set_true() {
    let gated = |gate| pod("toy-a", NEW).gate(gate);
    let cases: Vec<(&str, PodBuilder, Vec<(&str, bool, &str)>)> = vec![
        (
            "InPlaceUpdateReady gate without a condition",
            gated(INPLACE_UPDATE_READY),
            vec![(INPLACE_UPDATE_READY, true, "PodCreated")],
        ),
        (
            "condition already there",
            gated(INPLACE_UPDATE_READY).condition(INPLACE_UPDATE_READY, "True"),
            vec![],
        ),
        (
            // The control plane died between closing the gate and the update's patch.
            "a False condition with no update under way is set True again",
            gated(INPLACE_UPDATE_READY).condition(INPLACE_UPDATE_READY, "False"),
            vec![(INPLACE_UPDATE_READY, true, "InPlaceUpdateDone")],
        ),
        (
            "a False condition of an update under way is left to the update protocol",
            gated(INPLACE_UPDATE_READY)
                .condition(INPLACE_UPDATE_READY, "False")
                .annotation(STATE_ANNOTATION, &under_way_to(NEW)),
            vec![],
        ),
        (
            "a False condition a SidecarSet set is left to the SidecarSet",
            gated(INPLACE_UPDATE_READY).condition_because(
                INPLACE_UPDATE_READY,
                "False",
                REASON_SIDECAR_START,
                &sidecar_gate_message("mesh"),
            ),
            vec![],
        ),
        ("no gate", pod("toy-a", NEW), vec![]),
        (
            "KruisePodReady gate",
            gated(KRUISE_POD_READY),
            vec![(KRUISE_POD_READY, true, "PodCreated")],
        ),
        (
            "KruisePodReady gate in PreparingDelete stays not ready",
            gated(KRUISE_POD_READY)
                .state(LifecycleState::PreparingDelete)
                .label("hold", "true"),
            vec![],
        ),
        (
            "both gates",
            gated(INPLACE_UPDATE_READY).gate(KRUISE_POD_READY),
            vec![
                (INPLACE_UPDATE_READY, true, "PodCreated"),
                (KRUISE_POD_READY, true, "PodCreated"),
            ],
        ),
    ];
    for (name, p, want) in cases {
        let toy = Toy {
            lifecycle: Some(Lifecycle {
                pre_delete: Some(hook(&[("hold", "true")], true)),
                ..Lifecycle::default()
            }),
            ..set_with(1, PodUpdatePolicy::InPlaceIfPossible)
        };
        let plan = Case::settled(toy).pods(vec![p]).plan();
        // Only what turns True here; a hook holding the pod may set False on its own.
        let got: Vec<(&str, bool, &str)> = (plan.pod_changes.iter())
            .filter(|c| c.pod == "toy-a")
            .flat_map(conditions)
            .filter(|(_, status, _)| *status)
            .collect();
        assert_eq!(got, want, "{name}: {plan:#?}");
    }
}

/// The state of an in-place update to `revision`, begun at `at(60)`, after the toy pod's
/// container started: it has not restarted yet.
fn under_way_to(revision: &str) -> String {
    json!({
        "revision": revision,
        "updateTimestamp": ts(60).to_string(),
        "lastContainerStatuses": { "app": { "imageID": format!("sha-{NEW_IMAGE}") } },
    })
    .to_string()
}

/// `name`, labelled at `label_revision`, mid in-place update to NEW since `started` with
/// `grace_seconds` of grace: its images not yet patched.
fn grace_pod(
    name: &str,
    started: Timestamp,
    grace_seconds: i32,
    label_revision: &str,
) -> PodBuilder {
    let grace = GraceSpec {
        revision: NEW.to_owned(),
        container_images: BTreeMap::from([("app".to_owned(), NEW_IMAGE.to_owned())]),
        container_resources: BTreeMap::new(),
        meta_data_patch: None,
        grace_seconds,
        other: BTreeMap::new(),
    };
    let state = InPlaceUpdateState {
        revision: NEW.to_owned(),
        update_timestamp: Time(started),
        last_container_statuses: BTreeMap::new(),
        other: BTreeMap::new(),
    };
    pod(name, label_revision)
        .spec_image(OLD_IMAGE)
        .running(OLD_IMAGE, "sha-old", ts(0), true)
        .gate(INPLACE_UPDATE_READY)
        .condition(INPLACE_UPDATE_READY, "False")
        .annotation(STATE_ANNOTATION, &state.to_annotation().unwrap())
        .annotation(GRACE_ANNOTATION, &grace.to_annotation().unwrap())
}

#[test]
fn grace_period_requeues_then_patches_the_images() {
    let toy = || Toy {
        in_place_grace_seconds: 30,
        ..set_with(1, PodUpdatePolicy::InPlaceIfPossible)
    };
    // Started 10s ago with 30s of grace: wait 20s more.
    let plan = Case::settled(toy())
        .pods(vec![grace_pod("toy-a", ts(990), 30, NEW)])
        .plan();
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(20)));
    assert!(is_quiet(&plan), "{plan:#?}");

    // Over: the images now, the grace annotation removed, the old image ID recorded.
    let plan = Case::settled(toy())
        .pods(vec![grace_pod("toy-a", ts(960), 30, NEW)])
        .plan();
    let c = change(&plan, "toy-a");
    assert_eq!(
        patch(c)["spec"]["containers"],
        json!([{ "name": "app", "image": NEW_IMAGE }])
    );
    assert_eq!(patch_annotation(c, GRACE_ANNOTATION), Some(&Value::Null));
    let state = InPlaceUpdateState::parse(
        patch_annotation(c, STATE_ANNOTATION)
            .and_then(Value::as_str)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(state.last_container_statuses["app"].image_id, "sha-old");
    assert_eq!(c.resource_version.as_deref(), Some("7"));
    assert_eq!(plan.requeue_after, None);

    // The pod's revision moved on meanwhile: drop the grace annotation.
    let plan = Case::new(toy())
        .pods(vec![grace_pod("toy-a", ts(990), 30, OLD)])
        .plan();
    let c = change(&plan, "toy-a");
    assert_eq!(patch_annotation(c, GRACE_ANNOTATION), Some(&Value::Null));
    assert!(patch(c).get("spec").is_none());
}

#[test]
fn shortest_requeue_wins() {
    let plan = Case::settled(set_with(2, PodUpdatePolicy::InPlaceIfPossible))
        .pods(vec![
            grace_pod("toy-a", ts(990), 30, NEW),
            grace_pod("toy-b", ts(995), 30, NEW),
        ])
        .plan();
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(20)));
}

#[test]
fn a_bad_int_or_percent_is_an_error() {
    let toy = Toy {
        max_unavailable: Some(IntOrString::String("lots".into())),
        ..set(3)
    };
    let err = Case::new(toy)
        .pods(names(3, OLD))
        .try_plan()
        .expect_err("bad maxUnavailable");
    assert!(err.to_string().contains("maxUnavailable"), "{err}");
}

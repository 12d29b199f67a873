//! The executor's budget gate against the scripted budgets: which disruptions are asked
//! about, what a held one leaves undone and reports, and deletes through the Eviction API.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::recording::{RecordingWrites, Write};
use super::tests::{Fixture, delete, in_place_start};
use super::*;
use crate::workload::actions::{ChangeReason, DeleteReason, Plan, PodChange};
use crate::workload::budget::{Admission, DisruptionKind};

const HELD: &str = "the PodUnavailableBudget web allows no more unavailable pods";

fn fixture(answers: &[(&str, Admission)], failures: &[(&str, u16)]) -> Fixture {
    let mut fx = Fixture::new(RecordingWrites {
        nodes: BTreeSet::from(["n1".to_owned()]),
        failures: failures
            .iter()
            .map(|(n, c)| ((*n).to_owned(), *c))
            .collect(),
        ..RecordingWrites::default()
    });
    fx.budgets.answers = answers
        .iter()
        .map(|(pod, a)| ((*pod).to_owned(), a.clone()))
        .collect::<BTreeMap<_, _>>();
    fx
}

fn held_events(fx: &Fixture) -> Vec<String> {
    (fx.writes.events().into_iter())
        .filter(|e| e.warning && e.reason == DISRUPTION_HELD)
        .map(|e| e.note)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_held_delete_is_not_made_and_is_reported_naming_the_budget() {
    let fx = fixture(&[("toy-a", Admission::Held(HELD.into()))], &[]);
    let plan = Plan {
        deletes: vec![
            delete(
                "toy-a",
                "uid-a",
                &["data-toy-a"],
                DeleteReason::ScaleDown,
                "",
            ),
            delete("toy-b", "uid-b", &[], DeleteReason::RecreateUpdate, ""),
        ],
        ..Plan::default()
    };
    let (result, problems) = fx.run(&plan).await;
    assert_eq!(result.expect("no error"), Some(BUDGET_RETRY));
    assert_eq!(
        fx.writes.calls(),
        [Write::DeletePod {
            name: "toy-b".into(),
            uid: "uid-b".into()
        }],
        "toy-a and its claim stay"
    );
    let message = problems.update.expect("a FailedUpdate problem");
    assert!(
        message.contains("pod toy-a") && message.contains(HELD),
        "{message}"
    );
    assert_eq!(held_events(&fx), [message]);
}

#[tokio::test(start_paused = true)]
async fn a_pod_a_native_budget_selects_is_evicted_and_a_refused_eviction_is_held() {
    let evict = Admission::Allowed { evict: true };
    let fx = fixture(
        &[("toy-a", evict.clone()), ("toy-b", evict)],
        &[("toy-b", 429)],
    );
    let plan = Plan {
        deletes: vec![
            delete("toy-a", "uid-a", &[], DeleteReason::Specified, ""),
            delete("toy-b", "uid-b", &[], DeleteReason::ScaleDown, ""),
        ],
        ..Plan::default()
    };
    let (result, problems) = fx.run(&plan).await;
    assert_eq!(result.expect("no error"), Some(BUDGET_RETRY));
    assert_eq!(
        fx.writes.calls(),
        [
            Write::EvictPod {
                name: "toy-a".into(),
                uid: "uid-a".into()
            },
            Write::EvictPod {
                name: "toy-b".into(),
                uid: "uid-b".into()
            },
        ]
    );
    assert_eq!(fx.expected().len(), 1, "only the eviction that happened");
    let message = problems.update.expect("held");
    assert!(message.contains("toy-b refused with 429"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn a_held_in_place_start_leaves_the_pod_untouched() {
    let fx = fixture(&[("toy-a", Admission::Held(HELD.into()))], &[]);
    let plan = Plan {
        pod_changes: vec![in_place_start("n1", true)],
        ..Plan::default()
    };
    let (result, problems) = fx.run(&plan).await;
    assert_eq!(result.expect("no error"), Some(BUDGET_RETRY));
    assert!(fx.writes.calls().is_empty(), "{:?}", fx.writes.calls());
    assert!(problems.update.is_some_and(|m| m.contains(HELD)));
    assert_eq!(
        fx.budgets.asked(),
        [("toy-a".to_owned(), DisruptionKind::InPlaceUpdate)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_held_resize_is_not_made() {
    // OpenKruise 1.9 (#2061): a budget protects an in-place resize like any in-place start.
    let fx = fixture(&[("toy-a", Admission::Held(HELD.into()))], &[]);
    let mut resize = in_place_start("n1", true);
    resize.resize = Some(serde_json::json!({
        "spec": { "containers": [{ "name": "app", "resources": { "requests": { "cpu": "200m" } } }] }
    }));
    let plan = Plan {
        pod_changes: vec![resize],
        ..Plan::default()
    };
    let (result, problems) = fx.run(&plan).await;
    assert_eq!(result.expect("no error"), Some(BUDGET_RETRY));
    assert!(
        fx.writes.calls().is_empty(),
        "neither resized nor patched: {:?}",
        fx.writes.calls()
    );
    assert!(problems.update.is_some_and(|m| m.contains(HELD)));
    assert_eq!(held_events(&fx).len(), 1);
    assert_eq!(
        fx.budgets.asked(),
        [("toy-a".to_owned(), DisruptionKind::InPlaceUpdate)]
    );
}

#[tokio::test(start_paused = true)]
async fn only_disruptions_are_asked_about() {
    let fx = fixture(&[], &[]);
    let mut refresh = in_place_start("n1", false);
    refresh.reason = ChangeReason::Refresh;
    let plan = Plan {
        deletes: vec![
            delete("toy-f", "uid-f", &[], DeleteReason::Failed, ""),
            delete("toy-s", "uid-s", &[], DeleteReason::ScaleDown, ""),
        ],
        pod_changes: vec![refresh, in_place_start("n1", true)],
        ..Plan::default()
    };
    let (result, problems) = fx.run(&plan).await;
    assert_eq!(result.expect("no error"), None::<Duration>);
    assert_eq!(problems, Problems::default());
    assert_eq!(
        fx.budgets.asked(),
        [
            ("toy-s".to_owned(), DisruptionKind::Delete),
            ("toy-a".to_owned(), DisruptionKind::InPlaceUpdate),
        ],
        "a failed pod's replacement and routine upkeep disrupt nothing"
    );
}

/// Every pod-set kind seeds the executor with the update guard's refusal: a budget that
/// holds a disruption as well leaves the refusal as the FailedUpdate message (it is why
/// the rollout cannot move at all), and still says so in its own event.
#[tokio::test(start_paused = true)]
async fn a_held_delete_keeps_the_problem_the_sync_found_before() {
    let fx = fixture(&[("toy-a", Admission::Held(HELD.into()))], &[]);
    let plan = Plan {
        deletes: vec![delete("toy-a", "uid-a", &[], DeleteReason::ScaleDown, "")],
        ..Plan::default()
    };
    let refused = "the apiserver refuses the update revision's pod".to_owned();
    let seed = Problems {
        scale: None,
        update: Some(refused.clone()),
    };
    let (result, problems) = fx.run_seeded(&plan, seed).await;
    assert_eq!(result.expect("no error"), Some(BUDGET_RETRY));
    assert_eq!(problems.update, Some(refused));
    assert_eq!(held_events(&fx).len(), 1, "the hold is still reported");
}

#[tokio::test(start_paused = true)]
async fn a_sync_that_disrupts_no_pod_asks_no_budget_and_a_wave_asks_once() {
    let fx = fixture(&[], &[]);
    // Upkeep and a failed pod's delete disrupt nothing the budgets guard.
    let refresh = PodChange {
        reason: ChangeReason::Refresh,
        ..in_place_start("n1", false)
    };
    let plan = Plan {
        pod_changes: vec![refresh],
        deletes: vec![delete("toy-f", "uid-f", &[], DeleteReason::Failed, "")],
        ..Plan::default()
    };
    let (result, _) = fx.run(&plan).await;
    result.expect("no error");
    assert!(fx.budgets.waves().is_empty(), "{:?}", fx.budgets.waves());

    // Two in-place starts and two deletes: one question per wave, naming all its pods.
    let fx = fixture(&[], &[]);
    let start = |pod: &str| PodChange {
        pod: pod.into(),
        uid: format!("uid-{pod}"),
        ..in_place_start("n1", false)
    };
    let plan = Plan {
        pod_changes: vec![start("toy-a"), start("toy-b")],
        deletes: vec![
            delete("toy-c", "uid-c", &[], DeleteReason::ScaleDown, ""),
            delete("toy-d", "uid-d", &[], DeleteReason::RecreateUpdate, ""),
        ],
        ..Plan::default()
    };
    let (result, _) = fx.run(&plan).await;
    result.expect("no error");
    let mut waves = fx.budgets.waves();
    waves.sort();
    assert_eq!(waves, [["toy-a", "toy-b"], ["toy-c", "toy-d"]]);
}

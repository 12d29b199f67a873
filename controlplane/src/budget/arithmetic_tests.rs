//! The budget arithmetic with seed 003's examples, the expiry of recorded disruptions,
//! and the check-and-decrement decision.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::arithmetic::{
    Amount, BudgetPod, Observed, compute, desired_available, marked_unavailable,
};
use super::decision::{Decision, DisruptionKind, decide, decide_all};
use crate::api::podunavailablebudget::PodUnavailableBudgetStatus;

fn at(seconds: i64) -> Timestamp {
    Timestamp::UNIX_EPOCH + SignedDuration::from_secs(1_700_000_000 + seconds)
}

fn pod(name: &str, ready: bool) -> BudgetPod {
    BudgetPod {
        name: name.into(),
        ready,
        terminating: false,
        in_place_ready_since: Some(at(-1000)),
        ready_since: Some(at(-1000)),
        no_protect: false,
    }
}

fn ready_pods(n: usize) -> Vec<BudgetPod> {
    (0..n).map(|i| pod(&format!("p{i}"), true)).collect()
}

fn int(n: i32) -> IntOrString {
    IntOrString::Int(n)
}

fn percent(text: &str) -> IntOrString {
    IntOrString::String(text.into())
}

#[test]
fn seed_003_examples() {
    // (amount, expected pods, all healthy) → (desired available, allowed)
    let cases = [
        (Amount::MinAvailable(int(2)), 3, (2, 1)),
        (Amount::MinAvailable(percent("60%")), 5, (3, 2)),
        (Amount::MaxUnavailable(percent("40%")), 5, (3, 2)),
        (Amount::MaxUnavailable(int(0)), 3, (3, 0)),
        (Amount::MinAvailable(percent("100%")), 3, (3, 0)),
        (Amount::MaxUnavailable(int(1)), 6, (5, 1)),
        (Amount::MaxUnavailable(percent("20%")), 6, (4, 2)), // 1.2 rounds up to 2
        (Amount::MaxUnavailable(int(10)), 3, (0, 3)),
    ];
    for (amount, expected, want) in cases {
        let pods = ready_pods(expected);
        let none = BTreeMap::new();
        let observed = Observed {
            target_replicas: None,
            amount: &amount,
            pods: &pods,
            disrupted: &none,
            unavailable: &none,
            now: at(0),
        };
        let got = compute(&observed).expect("valid");
        assert_eq!(
            (got.desired_available, got.unavailable_allowed),
            want,
            "{amount:?} of {expected}"
        );
        assert_eq!(
            got.current_available,
            i32::try_from(expected).expect("small")
        );
    }
}

#[test]
fn the_target_scale_is_the_expected_count_even_before_its_pods_exist() {
    // The budget was made before the pods (kruise #1857): recomputed as they come.
    let amount = Amount::MaxUnavailable(int(1));
    let none = BTreeMap::new();
    for (pods, allowed) in [(0, 0), (3, 0), (5, 0), (6, 1)] {
        let pods = ready_pods(pods);
        let observed = Observed {
            target_replicas: Some(6),
            amount: &amount,
            pods: &pods,
            disrupted: &none,
            unavailable: &none,
            now: at(0),
        };
        let got = compute(&observed).expect("valid");
        assert_eq!((got.total_replicas, got.desired_available), (6, 5));
        assert_eq!(got.unavailable_allowed, allowed, "{} pods", pods.len());
    }
}

#[test]
fn unready_terminating_and_recorded_pods_are_not_available() {
    let mut pods = ready_pods(4);
    pods[0].ready = false;
    pods[1].terminating = true;
    let disrupted = BTreeMap::from([("p2".to_owned(), at(-10)), ("p1".to_owned(), at(-10))]);
    let amount = Amount::MinAvailable(int(1));
    let none = BTreeMap::new();
    let got = compute(&Observed {
        target_replicas: None,
        amount: &amount,
        pods: &pods,
        disrupted: &disrupted,
        unavailable: &none,
        now: at(0),
    })
    .expect("valid");
    assert_eq!(got.current_available, 1);
    assert_eq!(got.unavailable_allowed, 0);
    // p1 is going: its entry is done with; p2 stays until it expires.
    assert_eq!(got.disrupted.keys().collect::<Vec<_>>(), ["p2"]);
    assert_eq!(got.recheck_after, Some(Duration::from_secs(110)));
}

#[test]
fn recorded_disruptions_expire_after_two_minutes() {
    let pods = ready_pods(3);
    let amount = Amount::MaxUnavailable(int(1));
    let none = BTreeMap::new();
    let cases = [(-119, true), (-120, false), (-500, false), (0, true)];
    for (recorded, kept) in cases {
        let entries = BTreeMap::from([("p0".to_owned(), at(recorded))]);
        for (disrupted, unavailable) in [(&entries, &none), (&none, &entries)] {
            let got = compute(&Observed {
                target_replicas: None,
                amount: &amount,
                pods: &pods,
                disrupted,
                unavailable,
                now: at(0),
            })
            .expect("valid");
            let held = got.disrupted.contains_key("p0") || got.unavailable.contains_key("p0");
            assert_eq!(held, kept, "recorded at {recorded}");
            assert_eq!(got.current_available, if kept { 2 } else { 3 });
        }
    }
}

#[test]
fn an_in_place_entry_ends_when_the_pod_is_ready_after_its_update() {
    let amount = Amount::MaxUnavailable(int(1));
    let none = BTreeMap::new();
    let entries = BTreeMap::from([("p0".to_owned(), at(-30))]);
    // (ready, InPlaceUpdateReady True since) → entry kept
    let cases = [
        (true, Some(at(-100)), true), // the update has not started yet
        (false, Some(at(-5)), true),  // updated, not ready yet
        (true, None, true),           // InPlaceUpdateReady still False
        (true, Some(at(-5)), false),  // done
        (true, Some(at(-30)), false), // done within the same second
    ];
    for (ready, since, kept) in cases {
        let mut pods = ready_pods(3);
        pods[0].ready = ready;
        pods[0].in_place_ready_since = since;
        let got = compute(&Observed {
            target_replicas: None,
            amount: &amount,
            pods: &pods,
            disrupted: &none,
            unavailable: &entries,
            now: at(0),
        })
        .expect("valid");
        assert_eq!(
            got.unavailable.contains_key("p0"),
            kept,
            "{ready} {since:?}"
        );
    }
}

#[test]
fn a_recreate_entry_ends_when_the_pod_turned_ready_after_it() {
    let amount = Amount::MaxUnavailable(int(1));
    let none = BTreeMap::new();
    let entries = BTreeMap::from([("p0".to_owned(), at(-30))]);
    // (ready, Ready True since (None: an in-place update holds it)) → entry kept
    let cases = [
        (true, Some(at(-100)), true), // the containers have not gone down yet
        (false, None, true),          // recreating
        (true, Some(at(-30)), true),  // turned ready within the second of the admission
        (true, Some(at(-5)), false),  // back
        (true, None, true),           // ready, but InPlaceUpdateReady False
    ];
    for (ready, since, kept) in cases {
        let mut pods = ready_pods(3);
        pods[0].ready = ready;
        pods[0].ready_since = since;
        let got = compute(&Observed {
            target_replicas: None,
            amount: &amount,
            pods: &pods,
            disrupted: &none,
            unavailable: &entries,
            now: at(0),
        })
        .expect("valid");
        assert_eq!(
            got.unavailable.contains_key("p0"),
            kept,
            "{ready} {since:?}"
        );
    }
}

#[test]
fn a_percentage_that_does_not_parse_is_an_error_naming_the_field() {
    let err = desired_available(&Amount::MinAvailable(percent("x%")), 3).expect_err("bad");
    assert!(err.to_string().contains("spec.minAvailable"), "{err}");
}

fn status(allowed: i32, generation: i64) -> PodUnavailableBudgetStatus {
    PodUnavailableBudgetStatus {
        observed_generation: Some(generation),
        unavailable_allowed: allowed,
        current_available: 5,
        desired_available: 5 - allowed.max(0),
        ..PodUnavailableBudgetStatus::default()
    }
}

#[test]
fn check_and_decrement_decisions() {
    let now = at(0);
    let ready = pod("p0", true);
    let unready = pod("p0", false);
    let no_protect = BudgetPod {
        no_protect: true,
        ..pod("p0", true)
    };
    let mut recorded = status(0, 1);
    recorded.disrupted_pods.insert("p0".into(), Time(at(-5)));
    // (status, generation, pod) → free / take / refuse
    let cases = [
        (Some(status(1, 1)), 1, &ready, "take"),
        (Some(status(2, 1)), 1, &ready, "take"),
        (Some(status(0, 1)), 1, &ready, "refuse"),
        (Some(status(1, 1)), 2, &ready, "refuse"), // spec changed, status not yet
        (None, 1, &ready, "refuse"),
        (Some(status(0, 1)), 1, &unready, "free"), // unavailable already
        (Some(recorded), 1, &ready, "free"),       // a specified delete asked twice
        (Some(status(0, 1)), 1, &no_protect, "free"), // pub.kruise.io/no-protect
        (None, 1, &no_protect, "free"),
    ];
    for (status, generation, pod, want) in cases {
        let got = decide(
            "web",
            Some(generation),
            status.as_ref(),
            pod,
            DisruptionKind::Delete,
            now,
        );
        let kind = match &got {
            Decision::Free => "free",
            Decision::Take(_) => "take",
            Decision::Refuse(message) => {
                assert!(message.contains("PodUnavailableBudget web"), "{message}");
                "refuse"
            }
        };
        assert_eq!(kind, want, "{status:?} generation {generation} {pod:?}");
    }
}

#[test]
fn an_admitted_disruption_is_recorded_and_taken_from_the_budget() {
    let now = at(0);
    let ready = pod("p3", true);
    for (kind, deleted) in [
        (DisruptionKind::Delete, true),
        (DisruptionKind::InPlaceUpdate, false),
    ] {
        let Decision::Take(taken) = decide("web", Some(1), Some(&status(2, 1)), &ready, kind, now)
        else {
            panic!("{kind:?} refused");
        };
        assert_eq!(taken.unavailable_allowed, 1);
        assert_eq!(taken.disrupted_pods.contains_key("p3"), deleted);
        assert_eq!(taken.unavailable_pods.contains_key("p3"), !deleted);
        // The next one is refused once the budget is used up.
        let Decision::Take(last) =
            decide("web", Some(1), Some(&taken), &pod("p4", true), kind, now)
        else {
            panic!("second refused");
        };
        let third = decide("web", Some(1), Some(&last), &pod("p5", true), kind, now);
        assert!(matches!(third, Decision::Refuse(_)), "{third:?}");
    }
}

/// A pod as the apiserver has it: Ready, with `labels` and `annotations`.
fn ready_pod_with(
    labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
) -> k8s_openapi::api::core::v1::Pod {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": "p0", "labels": map(labels), "annotations": map(annotations) },
        "status": { "conditions": [{ "type": "Ready", "status": "True" }] }
    }))
    .expect("a pod")
}

#[test]
fn openkruise_pod_marks_read_into_the_budget_view() {
    // (case, labels, annotations, counted ready, no-protect)
    type Case = (
        &'static str,
        Vec<(&'static str, &'static str)>,
        Vec<(&'static str, &'static str)>,
        bool,
        bool,
    );
    let cases: Vec<Case> = vec![
        ("plain ready pod", vec![], vec![], true, false),
        (
            "unavailable label true",
            vec![("unavailable-pod.kruise.io/data", "true")],
            vec![],
            false,
            false,
        ),
        (
            "any name under the prefix",
            vec![("unavailable-pod.kruise.io/x", "true")],
            vec![],
            false,
            false,
        ),
        (
            "unavailable label not true",
            vec![("unavailable-pod.kruise.io/data", "false")],
            vec![],
            true,
            false,
        ),
        (
            "another prefix",
            vec![("unavailable-pod.example.com/data", "true")],
            vec![],
            true,
            false,
        ),
        (
            "no-protect",
            vec![],
            vec![("pub.kruise.io/no-protect", "true")],
            true,
            true,
        ),
        (
            "no-protect not true",
            vec![],
            vec![("pub.kruise.io/no-protect", "false")],
            true,
            false,
        ),
        (
            "no-protect as a label is not read",
            vec![("pub.kruise.io/no-protect", "true")],
            vec![],
            true,
            false,
        ),
    ];
    for (case, labels, annotations, ready, no_protect) in cases {
        let view = BudgetPod::of(&ready_pod_with(&labels, &annotations));
        assert_eq!((view.ready, view.no_protect), (ready, no_protect), "{case}");
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(marked_unavailable(&labels), !ready, "{case}");
    }
}

#[test]
fn a_pod_marked_unavailable_drops_current_available_at_once() {
    let mut pods = ready_pods(3);
    pods[0].ready = BudgetPod::of(&ready_pod_with(
        &[("unavailable-pod.kruise.io/data", "true")],
        &[],
    ))
    .ready;
    let amount = Amount::MaxUnavailable(int(1));
    let empty = BTreeMap::new();
    let computed = compute(&Observed {
        target_replicas: None,
        amount: &amount,
        pods: &pods,
        disrupted: &empty,
        unavailable: &empty,
        now: at(0),
    })
    .expect("computes");
    assert_eq!(
        (
            computed.current_available,
            computed.desired_available,
            computed.unavailable_allowed
        ),
        (2, 2, 0)
    );
}

/// Asking about pods one at a time, a write each: the answers and the status after them.
fn one_at_a_time(
    status: Option<PodUnavailableBudgetStatus>,
    generation: i64,
    pods: &[BudgetPod],
    kind: DisruptionKind,
) -> (Vec<bool>, Option<PodUnavailableBudgetStatus>) {
    let (mut current, mut admitted) = (status, Vec::new());
    for pod in pods {
        match decide("web", Some(generation), current.as_ref(), pod, kind, at(0)) {
            Decision::Free => admitted.push(true),
            Decision::Take(next) => {
                current = Some(next);
                admitted.push(true);
            }
            Decision::Refuse(_) => admitted.push(false),
        }
    }
    (admitted, current)
}

#[test]
fn a_wave_decided_at_once_admits_what_asking_pod_by_pod_admits_in_one_status() {
    let mut asked_before = status(1, 1);
    asked_before
        .unavailable_pods
        .insert("p0".into(), Time(at(-5)));
    let mixed = vec![
        pod("p0", true),
        pod("u", false),
        pod("p1", true),
        pod("p2", true),
    ];
    // (status, generation, pods, admitted in order, whether a status is written)
    let cases = [
        (
            Some(status(2, 1)),
            1,
            ready_pods(3),
            vec![true, true, false],
            true,
        ),
        (
            Some(status(5, 1)),
            1,
            ready_pods(3),
            vec![true, true, true],
            true,
        ),
        (
            Some(status(0, 1)),
            1,
            ready_pods(2),
            vec![false, false],
            false,
        ),
        (
            Some(status(3, 1)),
            2,
            ready_pods(2),
            vec![false, false],
            false,
        ), // not observed
        (
            Some(status(0, 1)),
            1,
            vec![pod("u", false)],
            vec![true],
            false,
        ), // free only
        (
            Some(asked_before),
            1,
            mixed,
            vec![true, true, true, false],
            true,
        ),
        (None, 1, vec![], vec![], false),
    ];
    for (status, generation, pods, want, writes) in cases {
        for kind in [DisruptionKind::Delete, DisruptionKind::InPlaceUpdate] {
            let decided = decide_all("web", Some(generation), status.as_ref(), &pods, kind, at(0));
            let admitted: Vec<bool> = decided.refusals.iter().map(Option::is_none).collect();
            assert_eq!(admitted, want, "{kind:?} {pods:?}");
            assert_eq!(decided.status.is_some(), writes, "{kind:?} {pods:?}");
            let (one_by_one, last) = one_at_a_time(status.clone(), generation, &pods, kind);
            assert_eq!(admitted, one_by_one, "{kind:?} {pods:?}");
            if writes {
                assert_eq!(decided.status, last, "{kind:?} {pods:?}");
            }
        }
    }
}

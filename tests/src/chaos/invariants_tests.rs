use std::time::Duration;

use super::invariants::{BudgetRule, Checker, PodView, SetKind, SetRule, Violation};

const GRACE: Duration = Duration::from_secs(2);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn checker(kind: SetKind, replicas: i32) -> Checker {
    let rule = SetRule {
        kind,
        name: "web".into(),
        replicas,
        max_unavailable: 1,
    };
    Checker::new(vec![rule], GRACE)
}

fn pod(uid: &str, ready: bool) -> PodView {
    PodView {
        uid: uid.into(),
        name: format!("web-{uid}"),
        app: Some("web".into()),
        owner_kind: Some("CloneSet".into()),
        owner_name: Some("web".into()),
        instance_id: Some(uid.into()),
        ordinal: None,
        terminating: false,
        ready,
        in_place_pending: false,
        node: None,
        finished: false,
    }
}

fn terminating(uid: &str) -> PodView {
    PodView {
        terminating: true,
        ..pod(uid, true)
    }
}

/// Three ready pods a, b, c at time 0.
fn three_ready(kind: SetKind) -> Checker {
    let mut c = checker(kind, 3);
    for uid in ["a", "b", "c"] {
        assert!(c.observe(secs(0), pod(uid, true)).is_empty());
    }
    c
}

fn rules(found: &[Violation]) -> Vec<&'static str> {
    found.iter().map(|v| v.rule).collect()
}

#[test]
fn a_rollout_one_pod_at_a_time_breaks_nothing() {
    let mut c = three_ready(SetKind::CloneSet);
    let mut t = 10;
    for (old, new) in [("a", "a2"), ("b", "b2"), ("c", "c2")] {
        assert!(c.observe(secs(t), terminating(old)).is_empty());
        assert!(c.forget(secs(t + 1), old).is_empty());
        assert!(c.observe(secs(t + 1), pod(new, false)).is_empty());
        assert!(c.observe(secs(t + 5), pod(new, true)).is_empty());
        t += 10;
    }
}

#[test]
fn a_second_deletion_while_a_replacement_is_unready_is_reported_naming_it() {
    let mut c = three_ready(SetKind::CloneSet);
    c.observe(secs(10), terminating("a"));
    c.forget(secs(11), "a");
    c.observe(secs(11), pod("a2", false));
    let found = c.observe(secs(20), terminating("b"));
    assert_eq!(rules(&found), ["maxUnavailable"]);
    assert!(found[0].detail.contains("web-a2"), "{}", found[0].detail);
    assert!(found[0].detail.contains("web-b"), "{}", found[0].detail);
}

#[test]
fn a_hole_not_yet_refilled_counts_once_it_has_lasted_the_grace() {
    let mut c = three_ready(SetKind::StatefulSet);
    c.observe(secs(10), terminating("a"));
    c.forget(secs(10), "a");
    // Within the grace the controller may not have seen the hole yet.
    assert!(c.observe(secs(11), terminating("b")).is_empty());

    let mut c = three_ready(SetKind::StatefulSet);
    c.observe(secs(10), terminating("a"));
    c.forget(secs(10), "a");
    assert_eq!(
        rules(&c.observe(secs(30), terminating("b"))),
        ["maxUnavailable"]
    );
}

#[test]
fn what_the_harness_deleted_is_not_the_controllers_but_its_hole_counts() {
    let mut c = three_ready(SetKind::CloneSet);
    c.harness_deleted("a");
    assert!(c.observe(secs(10), terminating("a")).is_empty());
    c.forget(secs(10), "a");
    assert_eq!(
        rules(&c.observe(secs(30), terminating("b"))),
        ["maxUnavailable"]
    );
}

#[test]
fn surplus_unready_and_daemon_pods_are_not_counted_disruptions() {
    // Four pods for three replicas: deleting one is a scale-down.
    let mut c = three_ready(SetKind::CloneSet);
    c.observe(secs(0), pod("d", true));
    c.observe(secs(0), pod("e", false));
    assert!(c.observe(secs(30), terminating("a")).is_empty());
    // Deleting a pod that is not ready takes nothing more away.
    let mut c = three_ready(SetKind::CloneSet);
    c.observe(secs(1), pod("b", false));
    assert!(c.observe(secs(30), terminating("b")).is_empty());
    // DaemonSets are counted per node, not here.
    let mut c = three_ready(SetKind::DaemonSet);
    c.observe(secs(1), pod("b", false));
    assert!(c.observe(secs(30), terminating("c")).is_empty());
}

#[test]
fn two_live_pods_with_one_identity_are_reported_once() {
    let mut c = three_ready(SetKind::CloneSet);
    let twin = PodView {
        uid: "z".into(),
        name: "web-z".into(),
        ..pod("a", true)
    };
    assert_eq!(rules(&c.observe(secs(5), twin.clone())), ["identity"]);
    assert!(c.observe(secs(6), twin).is_empty(), "reported once");

    let mut c = checker(SetKind::StatefulSet, 2);
    let ordinal = |uid: &str| PodView {
        ordinal: Some("0".into()),
        instance_id: None,
        ..pod(uid, true)
    };
    c.observe(secs(0), ordinal("a"));
    let found = c.observe(secs(1), ordinal("b"));
    assert_eq!(rules(&found), ["identity"]);
    assert!(found[0].detail.contains("ordinal 0"), "{}", found[0].detail);
    // A terminating twin is not live: no report.
    let mut c = checker(SetKind::StatefulSet, 2);
    c.observe(secs(0), ordinal("a"));
    c.observe(
        secs(1),
        PodView {
            terminating: true,
            ..ordinal("a")
        },
    );
    assert!(c.observe(secs(2), ordinal("b")).is_empty());
}

#[test]
fn a_live_pod_with_a_sets_labels_and_no_controller_is_an_orphan() {
    let mut c = three_ready(SetKind::CloneSet);
    let orphan = PodView {
        owner_kind: None,
        ..pod("o", true)
    };
    assert_eq!(rules(&c.observe(secs(1), orphan)), ["ownership"]);
}

#[test]
fn an_in_place_update_takes_a_pod_down_as_a_deletion_does() {
    let in_place = |uid: &str| PodView {
        ready: false,
        in_place_pending: true,
        ..pod(uid, true)
    };
    let mut c = three_ready(SetKind::CloneSet);
    assert!(
        c.observe(secs(10), in_place("a")).is_empty(),
        "the first one is allowed"
    );
    let found = c.observe(secs(20), in_place("b"));
    assert_eq!(rules(&found), ["maxUnavailable"]);
    assert!(found[0].detail.contains("web-a"), "{}", found[0].detail);
    // Once a is back, b may go.
    let mut c = three_ready(SetKind::CloneSet);
    c.observe(secs(10), in_place("a"));
    c.observe(secs(12), pod("a", true));
    assert!(c.observe(secs(20), in_place("b")).is_empty());
    // Not ready for another reason (a probe) is not the controller's doing.
    let mut c = three_ready(SetKind::CloneSet);
    c.observe(secs(10), in_place("a"));
    assert!(c.observe(secs(20), pod("b", false)).is_empty());
}

#[test]
fn two_running_pods_of_one_job_on_one_node_are_reported_and_a_finished_one_is_not() {
    let mut c = Checker::new(Vec::new(), GRACE);
    c.add_rule(SetRule {
        kind: SetKind::BroadcastJob,
        name: "web".into(),
        replicas: 2,
        max_unavailable: 1,
    });
    let on = |uid: &str, node: &str, finished: bool| PodView {
        node: Some(node.into()),
        finished,
        instance_id: None,
        ..pod(uid, !finished)
    };
    assert!(c.observe(secs(0), on("a", "n1", true)).is_empty());
    assert!(
        c.observe(secs(1), on("b", "n1", false)).is_empty(),
        "a finished pod is not running"
    );
    assert!(c.observe(secs(1), on("c", "n2", false)).is_empty());
    let found = c.observe(secs(2), on("d", "n1", false));
    assert_eq!(rules(&found), ["identity"]);
    assert!(
        found[0].detail.contains("running on node n1"),
        "{}",
        found[0].detail
    );
}

#[test]
fn a_budget_tighter_than_the_sets_max_unavailable_is_what_holds_and_is_reported_by_name() {
    let rule = SetRule {
        kind: SetKind::CloneSet,
        name: "web".into(),
        replicas: 3,
        max_unavailable: 2,
    };
    let budgeted = || {
        let mut c = Checker::new(vec![rule.clone()], GRACE);
        c.add_budget(BudgetRule {
            name: "web-pub".into(),
            app: "web".into(),
            max_unavailable: 1,
        });
        for uid in ["a", "b", "c"] {
            c.observe(secs(0), pod(uid, true));
        }
        c
    };
    let in_place = |uid: &str| PodView {
        ready: false,
        in_place_pending: true,
        ..pod(uid, true)
    };
    // One at a time: within both.
    let mut c = budgeted();
    assert!(c.observe(secs(10), in_place("a")).is_empty());
    c.observe(secs(12), pod("a", true));
    assert!(c.observe(secs(20), in_place("b")).is_empty());
    // Two at once: within the set's 2, over the budget's 1.
    let mut c = budgeted();
    c.observe(secs(10), in_place("a"));
    let found = c.observe(secs(20), terminating("b"));
    assert_eq!(rules(&found), ["PodUnavailableBudget"]);
    assert!(found[0].detail.contains("web-pub"), "{}", found[0].detail);
    // A budget over another set does not count here.
    let mut c = Checker::new(vec![rule.clone()], GRACE);
    c.add_budget(BudgetRule {
        name: "other".into(),
        app: "other".into(),
        max_unavailable: 1,
    });
    for uid in ["a", "b", "c"] {
        c.observe(secs(0), pod(uid, true));
    }
    c.observe(secs(10), in_place("a"));
    assert!(c.observe(secs(20), terminating("b")).is_empty());
}

#[test]
fn two_runs_of_a_forbid_cron_running_at_once_are_reported_and_a_finished_one_is_not() {
    let mut c = Checker::new(Vec::new(), GRACE);
    c.add_rule(SetRule {
        kind: SetKind::ForbidCron,
        name: "web".into(),
        replicas: 1,
        max_unavailable: 1,
    });
    let run_pod = |uid: &str, run: &str, finished: bool| PodView {
        owner_kind: Some("Job".into()),
        owner_name: Some(run.into()),
        instance_id: None,
        finished,
        ..pod(uid, !finished)
    };
    assert!(c.observe(secs(0), run_pod("a", "web-1", false)).is_empty());
    // A second pod of the same run (its first deleted, say) is one run.
    assert!(c.observe(secs(1), run_pod("b", "web-1", false)).is_empty());
    assert!(c.observe(secs(2), run_pod("a", "web-1", true)).is_empty());
    assert!(c.observe(secs(2), run_pod("b", "web-1", true)).is_empty());
    assert!(
        c.observe(secs(60), run_pod("c", "web-2", false)).is_empty(),
        "the last run finished"
    );
    let found = c.observe(secs(61), run_pod("d", "web-3", false));
    assert_eq!(rules(&found), ["Forbid"]);
    assert!(found[0].detail.contains("web-2"), "{}", found[0].detail);
}

#[test]
fn a_relist_forgets_the_pods_it_lacks_before_it_observes_their_replacements() {
    let mut c = checker(SetKind::StatefulSet, 2);
    let ordinal = |uid: &str, ordinal: &str| PodView {
        name: format!("web-{ordinal}"),
        ordinal: Some(ordinal.into()),
        instance_id: None,
        ..pod(uid, true)
    };
    c.observe(secs(0), ordinal("a", "0"));
    c.observe(secs(0), ordinal("b", "1"));
    // While the watch was down, web-1 was replaced (a new UID under its old name).
    let found = c.relisted(secs(30), vec![ordinal("a", "0"), ordinal("c", "1")]);
    assert!(
        !rules(&found).contains(&"identity"),
        "no twin of ordinal 1: {:?}",
        rules(&found)
    );
    // A real twin in one list is still reported.
    let found = c.relisted(
        secs(31),
        vec![ordinal("a", "0"), ordinal("c", "1"), ordinal("d", "1")],
    );
    assert_eq!(rules(&found), ["identity"]);
}

#[test]
fn a_relist_judges_a_take_down_against_the_listed_state_not_the_one_before_the_gap() {
    let rule = SetRule {
        kind: SetKind::CloneSet,
        name: "web".into(),
        replicas: 4,
        max_unavailable: 2,
    };
    let in_place = |uid: &str| PodView {
        ready: false,
        in_place_pending: true,
        ..pod(uid, true)
    };
    let before_the_gap = || {
        let mut c = Checker::new(vec![rule.clone()], GRACE);
        for uid in ["a", "b", "c", "d"] {
            c.observe(secs(0), pod(uid, true));
        }
        c.observe(secs(1), in_place("a"));
        c.observe(secs(1), in_place("b"));
        c
    };
    // While the watch was down a and b finished their update and c started its own: the
    // list (in any order) never shows three pods down at once.
    let mut c = before_the_gap();
    let found = c.relisted(
        secs(30),
        vec![
            in_place("c"),
            pod("a", true),
            pod("b", true),
            pod("d", true),
        ],
    );
    assert!(found.is_empty(), "{:?}", rules(&found));
    // A list that shows three of four down at once is still a violation.
    let mut c = before_the_gap();
    let found = c.relisted(
        secs(30),
        vec![in_place("c"), in_place("a"), in_place("b"), pod("d", true)],
    );
    assert_eq!(rules(&found), ["maxUnavailable"]);
}

/// The gate closed by a controller, the pod's Ready condition not yet derived from it.
fn gate_closed(uid: &str, ready: bool) -> PodView {
    PodView {
        in_place_pending: true,
        ..pod(uid, ready)
    }
}

#[test]
fn an_in_place_take_down_is_judged_when_the_gate_closes_not_when_ready_follows() {
    // a goes unready at 10 (a probe); b's gate closes at 11, within the grace of a's
    // going, and a busy kubelet derives b's Ready=False only at 14.
    let mut c = three_ready(SetKind::CloneSet);
    assert!(c.observe(secs(10), pod("a", false)).is_empty());
    assert!(c.observe(secs(11), gate_closed("b", true)).is_empty());
    assert!(
        c.observe(secs(14), gate_closed("b", false)).is_empty(),
        "b was taken down at 11, not again at 14"
    );
}

#[test]
fn a_pod_whose_gate_is_closed_is_unavailable_while_its_ready_condition_lags() {
    let mut c = three_ready(SetKind::CloneSet);
    assert!(c.observe(secs(10), gate_closed("a", true)).is_empty());
    let found = c.observe(secs(20), gate_closed("b", true));
    assert_eq!(rules(&found), ["maxUnavailable"]);
    assert!(found[0].detail.contains("web-a"), "{}", found[0].detail);
}

#[test]
fn an_availability_violation_carries_the_sets_last_transitions() {
    let mut c = three_ready(SetKind::CloneSet);
    c.observe(secs(10), pod("a", false));
    let found = c.observe(secs(20), gate_closed("b", true));
    assert_eq!(rules(&found), ["maxUnavailable"]);
    assert_eq!(
        found[0].history,
        [
            "0.0ns web-a ready",
            "0.0ns web-b ready",
            "0.0ns web-c ready",
            "10.0s web-a not ready",
            "20.0s web-b ready, InPlaceUpdateReady False",
        ]
    );
    // Only transitions are kept: the same state seen again adds no line.
    let mut c = three_ready(SetKind::CloneSet);
    c.observe(secs(5), pod("a", true));
    c.observe(secs(10), terminating("a"));
    let found = c.observe(secs(13), terminating("b"));
    assert_eq!(found[0].history.len(), 5, "{:?}", found[0].history);
}

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::workload::deletion_marks::parse_deletion_cost;
use crate::workload::lifecycle::LifecycleState;

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

/// A scheduled, running, ready, available pod created at t=0, ready since t=10.
fn running(name: &str, node: &str) -> PodView<'static> {
    PodView {
        name: name.to_owned(),
        node_name: node.to_owned(),
        phase: "Running".to_owned(),
        ready: true,
        ready_since: Some(ts(10)),
        available: true,
        created: Some(ts(0)),
        ..PodView::default()
    }
}

fn names(pods: &[&PodView<'_>]) -> Vec<String> {
    pods.iter().map(|p| p.name.clone()).collect()
}

#[test]
fn pairwise_order_follows_kruise_active_pods_with_ranks() {
    let base = running("b", "n2");
    let with = |f: &dyn Fn(&mut PodView<'_>)| {
        let mut p = running("a", "n1");
        f(&mut p);
        p
    };
    // (case, first, first's rank, second, second's rank): `first` must go first.
    let cases: Vec<(&str, PodView<'_>, u32, PodView<'_>, u32)> = vec![
        (
            "unassigned before assigned",
            with(&|p| p.node_name.clear()),
            0,
            base.clone(),
            0,
        ),
        (
            "pending before running",
            with(&|p| p.phase = "Pending".into()),
            0,
            base.clone(),
            0,
        ),
        (
            "unknown before running",
            with(&|p| p.phase = "Unknown".into()),
            0,
            base.clone(),
            0,
        ),
        (
            "pending before unknown",
            with(&|p| p.phase = "Pending".into()),
            0,
            with(&|p| p.phase = "Unknown".into()),
            0,
        ),
        (
            "failed ranks as pending",
            with(&|p| p.phase = "Failed".into()),
            0,
            base.clone(),
            0,
        ),
        (
            "unavailable before available",
            with(&|p| p.available = false),
            0,
            base.clone(),
            0,
        ),
        (
            "not ready before ready",
            with(&|p| {
                p.ready = false;
                p.available = false;
            }),
            0,
            with(&|p| p.available = false),
            0,
        ),
        (
            "lower deletion cost first",
            with(&|p| p.deletion_cost = -5),
            0,
            base.clone(),
            0,
        ),
        (
            "cost beats spread rank",
            with(&|p| p.deletion_cost = 1),
            0,
            with(&|p| p.deletion_cost = 2),
            9,
        ),
        (
            "higher spread rank first",
            base.clone(),
            2,
            with(&|_| {}),
            1,
        ),
        (
            "ready for less time first",
            with(&|p| p.ready_since = Some(ts(20))),
            0,
            base.clone(),
            0,
        ),
        (
            "unknown ready time first",
            with(&|p| p.ready_since = None),
            0,
            base.clone(),
            0,
        ),
        (
            "more restarts first",
            with(&|p| p.max_restarts = 3),
            0,
            base.clone(),
            0,
        ),
        (
            "newer first",
            with(&|p| p.created = Some(ts(5))),
            0,
            base.clone(),
            0,
        ),
        (
            "missing creation time first",
            with(&|p| p.created = None),
            0,
            base.clone(),
            0,
        ),
        (
            "ready time beats restarts",
            with(&|p| p.ready_since = Some(ts(30))),
            0,
            with(&|p| p.max_restarts = 9),
            0,
        ),
        (
            "restarts beat age",
            with(&|p| p.max_restarts = 1),
            0,
            with(&|p| p.created = Some(ts(9))),
            0,
        ),
        (
            "phase beats readiness",
            with(&|p| p.phase = "Pending".into()),
            0,
            with(&|p| {
                p.ready = false;
                p.available = false;
            }),
            0,
        ),
    ];
    for (case, first, rank_first, second, rank_second) in cases {
        assert_eq!(
            deletion_order(&first, rank_first, &second, rank_second),
            Ordering::Less,
            "{case}"
        );
        assert_eq!(
            deletion_order(&second, rank_second, &first, rank_first),
            Ordering::Greater,
            "{case} (reversed)"
        );
    }
}

#[test]
fn equal_pods_compare_equal() {
    let (a, b) = (running("a", "n1"), running("b", "n2"));
    assert_eq!(deletion_order(&a, 0, &b, 0), Ordering::Equal);
    // Ready times are ignored unless both pods are ready.
    let mut c = running("c", "n1");
    let mut d = running("d", "n1");
    for p in [&mut c, &mut d] {
        p.ready = false;
        p.available = false;
    }
    c.ready_since = Some(ts(1));
    assert_eq!(deletion_order(&c, 0, &d, 0), Ordering::Equal);
}

#[test]
fn deletion_cost_parsing_matches_kubernetes() {
    let cases = [
        ("0", 0),
        ("10", 10),
        ("-10", -10),
        ("2147483647", i32::MAX),
        ("-2147483648", i32::MIN),
        ("+10", 0),
        ("008", 0),
        ("", 0),
        ("abc", 0),
        ("2147483648", 0),
        ("1.5", 0),
    ];
    for (value, want) in cases {
        assert_eq!(parse_deletion_cost(value), want, "{value:?}");
    }
}

#[test]
fn same_node_ranks_spare_the_best_pod_on_each_node() {
    let mut a = running("a", "n1");
    a.created = Some(ts(3)); // newest on n1: deleted first
    let mut b = running("b", "n1");
    b.created = Some(ts(2));
    let c = running("c", "n1"); // oldest: kept, no rank
    let d = running("d", "n2"); // alone on n2
    let mut e = running("e", "");
    e.phase = "Pending".into();
    let ranks = same_node_ranks(&[&a, &b, &c, &d, &e]);
    assert_eq!(
        ranks,
        BTreeMap::from([("a".to_owned(), 2), ("b".to_owned(), 1)])
    );
}

#[test]
fn ranking_spreads_scale_down_across_nodes() {
    // Three pods on n1, one on n2, all otherwise equal: n1's pods go first.
    let pods = [
        running("solo", "n2"),
        running("x", "n1"),
        running("y", "n1"),
        running("z", "n1"),
    ];
    let refs: Vec<&PodView<'_>> = pods.iter().collect();
    assert_eq!(names(&rank_for_deletion(&refs)), ["x", "y", "solo", "z"]);
}

#[test]
fn ranking_is_stable_for_ties() {
    let pods = [running("c", "n3"), running("a", "n1"), running("b", "n2")];
    let refs: Vec<&PodView<'_>> = pods.iter().collect();
    assert_eq!(names(&rank_for_deletion(&refs)), ["c", "a", "b"]);
}

fn rollout_pods() -> Vec<PodView<'static>> {
    let mut pods = Vec::new();
    for (name, updated, created) in [
        ("old-1", false, 1),
        ("old-2", false, 2),
        ("new-1", true, 3),
        ("new-2", true, 4),
    ] {
        let mut p = running(name, name);
        p.updated = updated;
        p.created = Some(ts(created));
        pods.push(p);
    }
    pods
}

/// (case, pods, podsToDelete, scale-down, expected choice in order).
type ScaleCase = (
    &'static str,
    Vec<PodView<'static>>,
    BTreeSet<String>,
    ScaleDown,
    Vec<&'static str>,
);

#[test]
fn scale_down_choices() {
    let none = BTreeSet::new();
    let cases: Vec<ScaleCase> = vec![
        (
            "nothing to delete",
            rollout_pods(),
            none.clone(),
            ScaleDown::default(),
            vec![],
        ),
        (
            "old revision first, newest old first",
            rollout_pods(),
            none.clone(),
            ScaleDown {
                total: 1,
                old_revision_surplus: 2,
            },
            vec!["old-2"],
        ),
        (
            "surplus covers part, rest from updated",
            rollout_pods(),
            none.clone(),
            ScaleDown {
                total: 3,
                old_revision_surplus: 1,
            },
            vec!["old-2", "new-2", "new-1"],
        ),
        (
            "no surplus: updated pods only",
            rollout_pods(),
            none.clone(),
            ScaleDown {
                total: 1,
                old_revision_surplus: 0,
            },
            vec!["new-2"],
        ),
        (
            "podsToDelete names go first and count",
            rollout_pods(),
            BTreeSet::from(["new-1".to_owned()]),
            ScaleDown {
                total: 2,
                old_revision_surplus: 2,
            },
            vec!["new-1", "old-2"],
        ),
        (
            "named pods are deleted even without scale-down",
            rollout_pods(),
            BTreeSet::from(["old-1".to_owned()]),
            ScaleDown::default(),
            vec!["old-1"],
        ),
        (
            "specified-delete label",
            {
                let mut pods = rollout_pods();
                pods[3].specified_delete = true;
                pods
            },
            none.clone(),
            ScaleDown {
                total: 1,
                old_revision_surplus: 1,
            },
            vec!["new-2"],
        ),
        (
            "pods in PreparingDelete count but are not chosen again",
            {
                let mut pods = rollout_pods();
                pods[0].lifecycle = Some(LifecycleState::PreparingDelete);
                pods
            },
            none.clone(),
            ScaleDown {
                total: 2,
                old_revision_surplus: 2,
            },
            vec!["old-2"],
        ),
        (
            "stale surplus never deletes extra pods",
            {
                let mut pods = rollout_pods();
                pods.retain(|p| p.updated);
                pods
            },
            none.clone(),
            ScaleDown {
                total: 2,
                old_revision_surplus: 1,
            },
            vec!["new-2"],
        ),
        (
            "an unready updated pod still waits for the old revision",
            {
                let mut pods = rollout_pods();
                pods[2].ready = false;
                pods[2].available = false;
                pods
            },
            none,
            ScaleDown {
                total: 1,
                old_revision_surplus: 1,
            },
            vec!["old-2"],
        ),
    ];
    for (case, pods, named, scale, want) in cases {
        assert_eq!(pods_to_delete(&pods, &named, scale), want, "{case}");
    }
}

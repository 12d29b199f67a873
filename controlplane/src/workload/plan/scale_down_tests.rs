//! Which pods a scale-down deletes and how many per sync, and pods named for deletion
//! (label or list): rules of the shared planner, over the toy workload.

#![allow(
    clippy::type_complexity,
    reason = "case tables are tuples read in one place"
)]

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::toy_case::{
    Case, NEW, OLD, PodBuilder, claim, deleted, deleted_sorted, names, pod, set,
};
use super::toy_tests::{Toy, ts};
use crate::workload::actions::DeleteReason;
use crate::workload::deletion::{
    POD_DELETION_COST_ANNOTATION, REVISION_LABEL, SPECIFIED_DELETE_LABEL,
};
use crate::workload::revision_adapter::RevisionAdapter;

#[test]
fn scale_down_deletes_by_ranking_with_the_pods_claims() {
    let cases: Vec<(&str, i32, Vec<PodBuilder>, Vec<&str>)> = vec![
        (
            "not ready first",
            2,
            vec![
                pod("toy-a", NEW),
                pod("toy-b", NEW).not_ready(),
                pod("toy-c", NEW),
            ],
            vec!["toy-b"],
        ),
        (
            "unscheduled before not ready",
            2,
            vec![
                pod("toy-a", NEW).not_ready(),
                pod("toy-b", NEW),
                pod("toy-c", NEW).unscheduled(),
            ],
            vec!["toy-c"],
        ),
        (
            "pending before running",
            2,
            vec![
                pod("toy-a", NEW),
                pod("toy-b", NEW).phase("Pending"),
                pod("toy-c", NEW),
            ],
            vec!["toy-b"],
        ),
        (
            "ready for less time first",
            2,
            vec![
                pod("toy-a", NEW).ready_since(ts(100)),
                pod("toy-b", NEW).ready_since(ts(500)),
                pod("toy-c", NEW).ready_since(ts(10)),
            ],
            vec!["toy-b"],
        ),
        (
            "lower deletion cost first",
            2,
            vec![
                pod("toy-a", NEW),
                pod("toy-b", NEW),
                pod("toy-c", NEW).annotation(POD_DELETION_COST_ANNOTATION, "-5"),
            ],
            vec!["toy-c"],
        ),
        (
            "two of three",
            1,
            vec![
                pod("toy-a", NEW).not_ready(),
                pod("toy-b", NEW),
                pod("toy-c", NEW).unscheduled(),
            ],
            vec!["toy-a", "toy-c"],
        ),
        (
            "terminating pods are not deleted again",
            2,
            vec![
                pod("toy-a", NEW).not_ready().terminating(),
                pod("toy-b", NEW),
                pod("toy-c", NEW),
            ],
            vec![],
        ),
    ];
    for (name, replicas, pods, want) in cases {
        let claims = vec![
            claim("data-toy-a"),
            claim("data-toy-b"),
            claim("data-toy-c"),
        ];
        let plan = Case::settled(set(replicas))
            .pods(pods)
            .claims(claims)
            .plan();
        assert_eq!(deleted_sorted(&plan), want, "{name}: {plan:#?}");
        for d in &plan.deletes {
            assert_eq!(d.reason, DeleteReason::ScaleDown, "{name}");
            assert_eq!(d.uid, format!("uid-{}", d.pod), "{name}");
            assert_eq!(
                d.pvcs,
                vec![format!("data-{}", d.pod)],
                "{name}: the pod's claim goes with it"
            );
        }
        assert!(plan.creates.is_empty(), "{name}");
    }
}

#[test]
fn scale_down_of_ready_pods_is_limited_by_max_unavailable() {
    // deleteReadyLimit = maxUnavailable + (pods - replicas) - unavailable; pods that are not
    // ready are deleted without using it.
    let fresh = |name: &str| pod(name, NEW).ready_since(ts(995));
    let with = |extra: Vec<PodBuilder>| {
        let mut pods = names(4, NEW);
        pods.extend(extra);
        pods
    };
    let cases: Vec<(&str, i32, Vec<PodBuilder>, usize)> = vec![
        ("6 -> 3, all available: 0 + 3 - 0", 3, names(6, NEW), 3),
        (
            "6 -> 3, two ready but not yet available: 0 + 3 - 2 = 1",
            3,
            with(vec![fresh("toy-f1"), fresh("toy-f2")]),
            1,
        ),
        (
            "6 -> 3, two not ready: deleted without budget, plus one ready",
            3,
            with(vec![
                pod("toy-u1", NEW).not_ready(),
                pod("toy-u2", NEW).not_ready(),
            ]),
            3,
        ),
    ];
    for (name, replicas, pods, want) in cases {
        let toy = Toy {
            max_unavailable: Some(IntOrString::Int(0)),
            min_ready_seconds: 10,
            ..set(replicas)
        };
        let plan = Case::settled(toy).pods(pods).plan();
        assert_eq!(plan.deletes.len(), want, "{name}: {plan:#?}");
        assert!(
            plan.creates.is_empty() && plan.pod_changes.is_empty(),
            "{name}"
        );
    }
}

fn names_abc() -> Vec<PodBuilder> {
    vec![pod("toy-a", NEW), pod("toy-b", NEW), pod("toy-c", NEW)]
}

#[test]
fn specified_pods_are_deleted_and_replaced_in_a_later_sync() {
    let one_unavailable = || Toy {
        max_unavailable: Some(IntOrString::Int(1)),
        ..set(3)
    };
    let cases: Vec<(&str, Toy, &[&str], Vec<PodBuilder>, Vec<&str>)> = vec![
        (
            "label apps.kruise.io/specified-delete",
            set(3),
            &[],
            vec![
                pod("toy-a", NEW),
                pod("toy-b", NEW).label(SPECIFIED_DELETE_LABEL, "true"),
                pod("toy-c", NEW),
            ],
            vec!["toy-b"],
        ),
        (
            "the label's value is not checked",
            set(3),
            &[],
            vec![
                pod("toy-a", NEW),
                pod("toy-b", NEW).label(SPECIFIED_DELETE_LABEL, "whatever"),
                pod("toy-c", NEW),
            ],
            vec!["toy-b"],
        ),
        (
            "named for deletion",
            set(3),
            &["toy-c"],
            names_abc(),
            vec!["toy-c"],
        ),
        (
            "two named pods, one budget unit: the unready one needs none",
            one_unavailable(),
            &["toy-a", "toy-b"],
            vec![
                pod("toy-a", NEW),
                pod("toy-b", NEW).not_ready(),
                pod("toy-c", NEW),
            ],
            vec!["toy-a", "toy-b"],
        ),
        (
            "ready named pods beyond maxUnavailable wait",
            one_unavailable(),
            &["toy-a", "toy-b"],
            names_abc(),
            vec!["toy-a"],
        ),
    ];
    for (name, toy, named, pods, want) in cases {
        let plan = Case::settled(toy)
            .pods(pods)
            .named_for_deletion(named)
            .claims(vec![claim("data-toy-b"), claim("data-toy-c")])
            .plan();
        assert_eq!(deleted_sorted(&plan), want, "{name}: {plan:#?}");
        assert!(
            (plan.deletes.iter()).all(|d| d.reason == DeleteReason::Specified),
            "{name}"
        );
        for d in &plan.deletes {
            let claims: Vec<String> = ["b", "c"]
                .iter()
                .filter(|id| d.pod == format!("toy-{id}"))
                .map(|id| format!("data-toy-{id}"))
                .collect();
            assert_eq!(d.pvcs, claims, "{name}");
        }
        assert!(
            plan.creates.is_empty(),
            "{name}: the replacement comes later"
        );
        assert!(plan.pod_changes.is_empty(), "{name}: no update either");
    }

    // The next sync: the deleted pod is terminating (or gone), so its replacement is
    // created.
    for pods in [
        vec![
            pod("toy-a", NEW),
            pod("toy-b", NEW)
                .label(SPECIFIED_DELETE_LABEL, "true")
                .terminating(),
            pod("toy-c", NEW),
        ],
        vec![pod("toy-a", NEW), pod("toy-c", NEW)],
    ] {
        let plan = Case::settled(set(3)).pods(pods).plan();
        assert_eq!(plan.creates.len(), 1, "{plan:#?}");
        assert!(plan.deletes.is_empty());
    }
}

#[test]
fn a_pod_named_for_deletion_is_deleted_even_with_fewer_replicas() {
    let plan = Case::settled(set(2))
        .pods(names_abc())
        .named_for_deletion(&["toy-c"])
        .plan();
    assert_eq!(deleted(&plan), vec![("toy-c", DeleteReason::Specified)]);
    assert!(plan.creates.is_empty());
}

#[test]
fn scale_down_ranks_a_short_hash_pod_as_updated_as_the_rollout_counts_it() {
    // Pods that name their revision in full may carry only its hash (OpenKruise may write
    // just that). The rollout counts toy-b as updated, so the old-revision surplus is toy-a
    // alone; the ranking must agree, though toy-b is the cheaper pod to lose.
    let full_names = Toy {
        revision_labels: RevisionAdapter::FullName,
        ..set(2)
    };
    let plan = Case::new(full_names)
        .pods(vec![
            pod("toy-a", OLD).label(REVISION_LABEL, OLD),
            pod("toy-b", NEW).annotation(POD_DELETION_COST_ANNOTATION, "-5"),
            pod("toy-c", NEW).label(REVISION_LABEL, NEW),
        ])
        .plan();
    assert_eq!(deleted(&plan), vec![("toy-a", DeleteReason::ScaleDown)]);
}

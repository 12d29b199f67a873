//! Lifecycle hooks in one sync: a preDelete hook holds a pod in PreparingDelete instead of
//! deleting it (and the rollout goes on around it), an inPlaceUpdate hook holds it in
//! PreparingUpdate, and refresh moves the states on as hooks let go: rules of the shared
//! planner, over the toy workload.

#![allow(
    clippy::type_complexity,
    reason = "case tables are tuples read in one place"
)]

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

use super::toy_case::{
    Case, NEW, NEW_IMAGE, OLD, PodBuilder, change, claim, conditions, deleted, deleted_sorted,
    hook, is_quiet, patch, patch_annotation, patch_label, pod, set, set_with, state_written,
};
use super::toy_tests::Toy;
use crate::api::common::{Lifecycle, PodUpdatePolicy};
use crate::workload::actions::DeleteReason;
use crate::workload::deletion::{REVISION_LABEL, SPECIFIED_DELETE_LABEL};
use crate::workload::lifecycle::{self, KRUISE_POD_READY, LifecycleState};

/// A toy of `replicas` whose preDelete hook is the label `hold: true`.
fn held_by_label(replicas: i32, mark_pod_not_ready: bool) -> Toy {
    Toy {
        lifecycle: Some(Lifecycle {
            pre_delete: Some(hook(&[("hold", "true")], mark_pod_not_ready)),
            ..Lifecycle::default()
        }),
        ..set(replicas)
    }
}

#[test]
fn pre_delete_hook_moves_the_pod_to_preparing_delete_instead_of_deleting() {
    for mark in [false, true] {
        let plan = Case::settled(held_by_label(2, mark))
            .pods(vec![
                pod("toy-a", NEW).label("hold", "true"),
                pod("toy-b", NEW).label("hold", "true").not_ready(),
                pod("toy-c", NEW),
            ])
            .claims(vec![claim("data-toy-b")])
            .plan();
        assert!(plan.deletes.is_empty(), "{plan:#?}");
        let c = change(&plan, "toy-b");
        assert_eq!(
            patch_label(c, lifecycle::STATE_LABEL),
            Some(&json!("PreparingDelete"))
        );
        assert_eq!(
            patch_annotation(c, lifecycle::TIMESTAMP_ANNOTATION),
            Some(&json!("2027-01-15T08:16:40Z"))
        );
        let want: Vec<(&str, bool, &str)> = if mark {
            vec![(KRUISE_POD_READY, false, "LifecycleNotReady")]
        } else {
            vec![]
        };
        assert_eq!(conditions(c), want, "markPodNotReady={mark}");
    }
}

#[test]
fn pods_without_the_pre_delete_hook_are_deleted_directly() {
    let plan = Case::settled(held_by_label(2, false))
        .pods(vec![
            pod("toy-a", NEW).label("hold", "true"),
            pod("toy-b", NEW).not_ready(),
            pod("toy-c", NEW).label("hold", "true"),
        ])
        .plan();
    assert_eq!(deleted(&plan), vec![("toy-b", DeleteReason::ScaleDown)]);
}

#[test]
fn specified_delete_goes_through_the_pre_delete_hook() {
    let plan = Case::settled(held_by_label(2, false))
        .pods(vec![
            pod("toy-a", NEW),
            pod("toy-b", NEW)
                .label("hold", "true")
                .label(SPECIFIED_DELETE_LABEL, "true"),
        ])
        .plan();
    assert!(plan.deletes.is_empty());
    assert_eq!(
        patch_label(change(&plan, "toy-b"), lifecycle::STATE_LABEL),
        Some(&json!("PreparingDelete"))
    );
}

#[test]
fn a_hooked_pod_in_preparing_delete_waits_and_is_not_replaced_early() {
    let plan = Case::settled(held_by_label(2, false))
        .pods(vec![
            pod("toy-a", NEW),
            pod("toy-b", NEW)
                .label("hold", "true")
                .state(LifecycleState::PreparingDelete),
            pod("toy-c", NEW),
        ])
        .plan();
    assert!(is_quiet(&plan), "{plan:#?}");
}

#[test]
fn a_released_pod_in_preparing_delete_is_deleted() {
    let plan = Case::settled(held_by_label(2, false))
        .pods(vec![
            pod("toy-a", NEW),
            // The user controller removed the hook label: the pod may go now.
            pod("toy-b", NEW).state(LifecycleState::PreparingDelete),
            pod("toy-c", NEW),
        ])
        .claims(vec![claim("data-toy-b")])
        .plan();
    let got: Vec<(&str, &[String])> = (plan.deletes.iter())
        .map(|d| (d.pod.as_str(), d.pvcs.as_slice()))
        .collect();
    assert_eq!(got, vec![("toy-b", &["data-toy-b".to_owned()][..])]);
}

/// Four old pods, `toy-b` on its way out (specified, held by the preDelete hook), every
/// pod free to update at once.
fn held_for_deletion(replicas: i32) -> Case {
    let toy = Toy {
        max_unavailable: Some(IntOrString::String("100%".into())),
        ..held_by_label(replicas, false)
    };
    Case::new(toy).pods(vec![
        pod("toy-a", OLD),
        pod("toy-b", OLD)
            .state(LifecycleState::PreparingDelete)
            .label("hold", "true")
            .label(SPECIFIED_DELETE_LABEL, "true"),
        pod("toy-c", OLD),
        pod("toy-d", OLD),
    ])
}

#[test]
fn pods_being_deleted_are_not_updated() {
    let plan = held_for_deletion(4).plan();
    assert_eq!(
        deleted_sorted(&plan),
        vec!["toy-a", "toy-c", "toy-d"],
        "{plan:#?}"
    );
    assert!((plan.deletes.iter()).all(|d| d.reason == DeleteReason::RecreateUpdate));
    assert!(plan.pod_changes.is_empty(), "{plan:#?}");
}

#[test]
fn a_pod_held_in_preparing_delete_does_not_stall_the_rollout() {
    // Replicas 3 of 4 pods, the surplus one held in PreparingDelete: OpenKruise's Scale
    // skips the scale-in ("numToDelete > 0") without changes, and the update goes on.
    let plan = held_for_deletion(3).plan();
    assert_eq!(
        deleted_sorted(&plan),
        vec!["toy-a", "toy-c", "toy-d"],
        "{plan:#?}"
    );
}

#[test]
fn in_place_update_hook_moves_the_pod_to_preparing_update_first() {
    let toy = || Toy {
        lifecycle: Some(Lifecycle {
            in_place_update: Some(hook(&[("drain", "true")], true)),
            ..Lifecycle::default()
        }),
        ..set_with(1, PodUpdatePolicy::InPlaceIfPossible)
    };
    let plan = Case::new(toy())
        .pods(vec![
            pod("toy-a", OLD)
                .label("drain", "true")
                .state(LifecycleState::Normal)
                .in_place_ready(),
        ])
        .plan();
    let c = change(&plan, "toy-a");
    assert_eq!(
        patch_label(c, lifecycle::STATE_LABEL),
        Some(&json!("PreparingUpdate"))
    );
    assert!(patch(c).get("spec").is_none(), "images wait: {c:#?}");
    assert_eq!(patch_label(c, REVISION_LABEL), None);
    assert_eq!(
        conditions(c),
        vec![(KRUISE_POD_READY, false, "LifecycleNotReady")]
    );

    // Still hooked in PreparingUpdate: wait.
    let plan = Case::new(toy())
        .pods(vec![
            pod("toy-a", OLD)
                .label("drain", "true")
                .state(LifecycleState::PreparingUpdate),
        ])
        .plan();
    assert!(is_quiet(&plan), "{plan:#?}");

    // Released: update now, state Updating.
    let plan = Case::new(toy())
        .pods(vec![
            pod("toy-a", OLD).state(LifecycleState::PreparingUpdate),
        ])
        .plan();
    let c = change(&plan, "toy-a");
    assert_eq!(
        patch_label(c, lifecycle::STATE_LABEL),
        Some(&json!("Updating"))
    );
    assert_eq!(
        patch(c)["spec"]["containers"],
        json!([{ "name": "app", "image": NEW_IMAGE }])
    );
}

#[test]
fn refresh_moves_lifecycle_states() {
    let pre_normal = || Lifecycle {
        pre_normal: Some(hook(&[("registered", "true")], false)),
        ..Lifecycle::default()
    };
    let in_place = || Lifecycle {
        in_place_update: Some(hook(&[("drain", "true")], false)),
        ..Lifecycle::default()
    };
    let at = |state| pod("toy-a", NEW).state(state);
    use LifecycleState::{Normal, PreparingNormal, Updated, Updating};
    let cases: Vec<(&str, Lifecycle, PodBuilder, Option<&str>)> = vec![
        (
            "PreparingNormal, all hooked: Normal",
            pre_normal(),
            at(PreparingNormal).label("registered", "true"),
            Some("Normal"),
        ),
        (
            "PreparingNormal, not hooked yet: stays",
            pre_normal(),
            at(PreparingNormal),
            None,
        ),
        (
            "PreparingNormal without a preNormal hook: Normal",
            in_place(),
            at(PreparingNormal),
            Some("Normal"),
        ),
        (
            "Updating, done, hook not re-attached: Updated",
            in_place(),
            at(Updating),
            Some("Updated"),
        ),
        (
            "Updating, done, hook re-attached: Normal",
            in_place(),
            at(Updating).label("drain", "true"),
            Some("Normal"),
        ),
        (
            "Updated, hook re-attached: Normal",
            in_place(),
            at(Updated).label("drain", "true"),
            Some("Normal"),
        ),
        (
            "Updated, hook not yet re-attached: stays",
            in_place(),
            at(Updated),
            None,
        ),
        ("Normal: stays", in_place(), at(Normal), None),
    ];
    for (name, lifecycle_, p, want) in cases {
        let toy = Toy {
            lifecycle: Some(lifecycle_),
            ..set_with(1, PodUpdatePolicy::InPlaceIfPossible)
        };
        let plan = Case::settled(toy).pods(vec![p]).plan();
        assert_eq!(state_written(&plan, "toy-a"), want, "{name}: {plan:#?}");
        assert!(plan.deletes.is_empty() && plan.creates.is_empty(), "{name}");
    }
}

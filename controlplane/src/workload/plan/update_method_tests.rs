//! How the update step moves a pod to the update revision — recreate, in place (with its
//! state, readiness condition, lifecycle state and grace period) or refuse — as the update
//! policy and what changed say: rules of the shared planner, over the toy workload.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{EnvVar, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use super::toy_case::{
    Case, NEW, NEW_IMAGE, OLD, OLD_IMAGE, change, changed, claim, conditions, deleted, hook,
    is_quiet, names, patch, patch_annotation, patch_label, pod, set, set_with, without_detail,
};
use super::toy_tests::{Toy, template};
use crate::api::common::{Lifecycle, PodUpdatePolicy};
use crate::workload::actions::{Delete, DeleteReason};
use crate::workload::deletion::REVISION_LABEL;
use crate::workload::inplace::{
    GRACE_ANNOTATION, GraceSpec, INPLACE_UPDATE_READY, InPlaceUpdateContainerStatus,
    InPlaceUpdateState, REASON_START, STATE_ANNOTATION,
};
use crate::workload::lifecycle::{self, LifecycleState};
use crate::workload::revision_adapter::{POD_TEMPLATE_HASH_LABEL, RevisionAdapter};

/// The pod `toy-a`, recreated for the update with its claim.
fn recreated_with_its_claim() -> Vec<Delete> {
    vec![Delete {
        pod: "toy-a".to_owned(),
        uid: "uid-toy-a".to_owned(),
        pvcs: vec!["data-toy-a".to_owned()],
        reason: DeleteReason::RecreateUpdate,
        detail: String::new(),
    }]
}

#[test]
fn recreate_update_deletes_the_pod_with_its_claims() {
    let plan = Case::new(set(1))
        .pods(vec![pod("toy-a", OLD)])
        .claims(vec![claim("data-toy-a")])
        .plan();
    assert_eq!(without_detail(&plan.deletes), recreated_with_its_claim());
    assert!(plan.pod_changes.is_empty());
    assert!(plan.creates.is_empty());
}

#[test]
fn in_place_image_update_patches_image_revision_and_state() {
    for policy in [
        PodUpdatePolicy::InPlaceIfPossible,
        PodUpdatePolicy::InPlaceOnly,
    ] {
        let plan = Case::new(set_with(1, policy))
            .pods(vec![pod("toy-a", OLD).in_place_ready()])
            .claims(vec![claim("data-toy-a")])
            .plan();
        assert!(plan.deletes.is_empty(), "{policy:?}: {plan:#?}");
        assert_eq!(changed(&plan), vec!["toy-a"], "{policy:?}");
        let c = change(&plan, "toy-a");
        assert_eq!(
            patch(c)["spec"]["containers"],
            json!([{ "name": "app", "image": NEW_IMAGE }]),
            "{policy:?}"
        );
        // The toy labels its pods with the short hash.
        assert_eq!(patch_label(c, REVISION_LABEL), Some(&json!("bbb222")));
        assert_eq!(
            patch_label(c, POD_TEMPLATE_HASH_LABEL),
            Some(&json!("bbb222"))
        );
        let state = patch_annotation(c, STATE_ANNOTATION)
            .and_then(Value::as_str)
            .expect("state annotation");
        let state = InPlaceUpdateState::parse(state).unwrap();
        assert_eq!(state.revision, NEW);
        assert_eq!(state.update_timestamp, Time(super::toy_case::now()));
        assert_eq!(
            state.last_container_statuses,
            BTreeMap::from([(
                "app".to_owned(),
                InPlaceUpdateContainerStatus {
                    image_id: format!("sha-{OLD_IMAGE}"),
                    ..Default::default()
                }
            )])
        );
        // The pod leaves the endpoints first: InPlaceUpdateReady=False before the patch.
        assert_eq!(
            conditions(c),
            vec![(INPLACE_UPDATE_READY, false, REASON_START)]
        );
        assert_eq!(c.node.as_deref(), Some("node-a"));
        assert_eq!(c.uid, "uid-toy-a");
        // The patch must not land on a pod that changed since the plan.
        assert_eq!(c.resource_version.as_deref(), Some("7"));
        // No lifecycle configured: no state label.
        assert_eq!(patch_label(c, lifecycle::STATE_LABEL), None);
        assert_eq!(plan.requeue_after, None);
    }
}

#[test]
fn in_place_update_sets_the_condition_only_with_the_readiness_gate() {
    let plan = Case::new(set_with(1, PodUpdatePolicy::InPlaceIfPossible))
        .pods(vec![pod("toy-a", OLD)])
        .plan();
    let c = change(&plan, "toy-a");
    assert!(c.conditions.is_empty(), "{c:#?}");
    assert!(patch_annotation(c, STATE_ANNOTATION).is_some());
}

#[test]
fn in_place_update_with_a_lifecycle_moves_the_pod_to_updating() {
    let toy = Toy {
        lifecycle: Some(Lifecycle {
            pre_delete: Some(hook(&[("hold", "true")], false)),
            ..Lifecycle::default()
        }),
        ..set_with(1, PodUpdatePolicy::InPlaceIfPossible)
    };
    let plan = Case::new(toy)
        .pods(vec![pod("toy-a", OLD).state(LifecycleState::Normal)])
        .plan();
    let c = change(&plan, "toy-a");
    assert_eq!(
        patch_label(c, lifecycle::STATE_LABEL),
        Some(&json!("Updating"))
    );
    assert!(patch(c)["spec"]["containers"].is_array());
}

#[test]
fn in_place_update_with_a_grace_period_waits_and_requeues() {
    let toy = Toy {
        in_place_grace_seconds: 30,
        ..set_with(1, PodUpdatePolicy::InPlaceIfPossible)
    };
    let plan = Case::new(toy)
        .pods(vec![pod("toy-a", OLD).in_place_ready()])
        .plan();
    let c = change(&plan, "toy-a");
    // Not ready now, images later.
    assert_eq!(
        conditions(c),
        vec![(INPLACE_UPDATE_READY, false, REASON_START)]
    );
    assert!(patch(c).get("spec").is_none(), "{c:#?}");
    let grace = patch_annotation(c, GRACE_ANNOTATION)
        .and_then(Value::as_str)
        .expect("grace annotation");
    let grace = GraceSpec::parse(grace).unwrap();
    assert_eq!(grace.revision, NEW);
    assert_eq!(grace.grace_seconds, 30);
    assert_eq!(
        grace.container_images,
        BTreeMap::from([("app".to_owned(), NEW_IMAGE.to_owned())])
    );
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(30)));
}

#[test]
fn update_method_follows_the_policy_and_what_changed() {
    #[derive(Debug, PartialEq)]
    enum Want {
        Recreate,
        InPlace,
        Refused(&'static str),
    }
    let with_env = || {
        let mut t = template(NEW_IMAGE, None);
        t.spec.as_mut().unwrap().containers[0].env = Some(vec![EnvVar {
            name: "MODE".to_owned(),
            value: Some("fast".to_owned()),
            ..EnvVar::default()
        }]);
        t
    };
    use PodUpdatePolicy::{InPlaceIfPossible, InPlaceOnly, ReCreate};
    let cases: Vec<(&str, PodUpdatePolicy, PodTemplateSpec, Want)> = vec![
        (
            "image, ReCreate",
            ReCreate,
            template(NEW_IMAGE, None),
            Want::Recreate,
        ),
        (
            "image, InPlaceIfPossible",
            InPlaceIfPossible,
            template(NEW_IMAGE, None),
            Want::InPlace,
        ),
        (
            "env, InPlaceIfPossible",
            InPlaceIfPossible,
            with_env(),
            Want::Recreate,
        ),
        (
            "env, InPlaceOnly",
            InPlaceOnly,
            with_env(),
            Want::Refused("spec.containers[app].env"),
        ),
    ];
    for (name, policy, new, want) in cases {
        let plan = Case::new(set_with(1, policy))
            .new_revision(new)
            .pods(vec![pod("toy-a", OLD).in_place_ready()])
            .claims(vec![claim("data-toy-a")])
            .plan();
        match want {
            Want::Recreate => {
                let deletes = without_detail(&plan.deletes);
                assert_eq!(deletes, recreated_with_its_claim(), "{name}");
                assert!(plan.pod_changes.is_empty(), "{name}: {plan:#?}");
                assert_eq!(plan.refusal, None, "{name}");
            }
            Want::InPlace => {
                assert!(plan.deletes.is_empty(), "{name}: {plan:#?}");
                let c = change(&plan, "toy-a");
                assert!(patch(c)["spec"]["containers"].is_array(), "{name}");
                assert!(patch_annotation(c, STATE_ANNOTATION).is_some(), "{name}");
            }
            Want::Refused(field) => {
                let refusal = plan.refusal.as_deref().expect("a refusal");
                assert!(refusal.contains(field), "{name}: {refusal}");
                assert!(refusal.contains("InPlaceOnly"), "{name}: {refusal}");
                assert!(plan.deletes.is_empty(), "{name}: nothing is deleted");
                assert!(plan.pod_changes.is_empty(), "{name}");
            }
        }
    }
}

#[test]
fn in_place_only_refusal_stops_the_whole_update() {
    let mut t = template(NEW_IMAGE, None);
    t.spec.as_mut().unwrap().host_network = Some(true);
    let plan = Case::new(set_with(5, PodUpdatePolicy::InPlaceOnly))
        .new_revision(t)
        .pods(names(5, OLD))
        .plan();
    assert!(
        plan.refusal
            .as_deref()
            .is_some_and(|r| r.contains("spec.hostNetwork")),
        "{plan:#?}"
    );
    assert!(is_quiet(&plan), "{plan:#?}");
}

#[test]
fn a_pod_whose_revision_is_gone_is_recreated() {
    let plan = Case::new(set_with(1, PodUpdatePolicy::InPlaceOnly))
        .pods(vec![pod("toy-a", "toy-vanished9")])
        .plan();
    assert_eq!(
        deleted(&plan),
        vec![("toy-a", DeleteReason::RecreateUpdate)]
    );
}

#[test]
fn pods_labelled_with_the_short_hash_count_as_on_their_revision() {
    // A workload whose pods name their revision in full: OpenKruise may write only the
    // hash into controller-revision-hash (the pod builder labels the short hash).
    let full_names = |replicas, policy| Toy {
        revision_labels: RevisionAdapter::FullName,
        ..set_with(replicas, policy)
    };
    let plan = Case::new(full_names(2, PodUpdatePolicy::ReCreate))
        .pods(vec![pod("toy-a", NEW), pod("toy-b", NEW)])
        .plan();
    assert!(is_quiet(&plan), "{plan:#?}");
    // And an old pod labelled with the short hash still finds its revision for an
    // in-place update.
    let plan = Case::new(full_names(1, PodUpdatePolicy::InPlaceOnly))
        .pods(vec![pod("toy-a", OLD)])
        .plan();
    assert!(plan.deletes.is_empty(), "{plan:#?}");
    assert_eq!(changed(&plan), vec!["toy-a"]);
}

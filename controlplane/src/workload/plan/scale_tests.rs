//! Which revision a scale-up creates pods at, and scaling while updates are paused: rules
//! of the shared planner, over the toy workload.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::toy_tests::{V1, V2, revisions, running_pod, sync, template, toy};
use crate::api::common::PodUpdatePolicy;
use crate::workload::actions::{DeleteReason, Plan};

fn created_revisions(plan: &Plan) -> Vec<&str> {
    plan.creates.iter().map(|c| c.revision.as_str()).collect()
}

#[test]
fn scale_up_during_a_rollout_keeps_the_partition_on_the_current_revision() {
    // replicas 4, partition 2: one old pod and one new exist, so one old and one new are
    // created (OpenKruise scaleUpNumOldRevision), the old first.
    let mut toy = toy(4, PodUpdatePolicy::ReCreate);
    toy.partition = Some(IntOrString::Int(2));
    let revisions = revisions(template("toy:v2", None));
    let pods = [
        running_pod(&toy, 0, V1, "toy:v1"),
        running_pod(&toy, 1, V2, "toy:v2"),
    ];
    let plan = sync(&toy, &pods, &revisions);
    assert_eq!(created_revisions(&plan), [V1, V2]);

    // Without a partition everything new is on the update revision.
    toy.partition = None;
    let plan = sync(&toy, &pods, &revisions);
    assert_eq!(created_revisions(&plan), [V2, V2]);
}

#[test]
fn scale_up_falls_back_to_the_update_revision_when_the_current_one_is_gone() {
    let mut toy = toy(2, PodUpdatePolicy::ReCreate);
    toy.partition = Some(IntOrString::Int(2));
    let only_update = BTreeMap::from([(V2.to_owned(), template("toy:v2", None))]);
    let plan = sync(&toy, &[], &only_update);
    assert_eq!(created_revisions(&plan), [V2, V2]);
}

#[test]
fn paused_stops_updates_but_not_scaling() {
    let revisions = revisions(template("toy:v2", None));
    let paused = |replicas| {
        let mut toy = toy(replicas, PodUpdatePolicy::ReCreate);
        toy.paused = true;
        toy
    };
    let three_old = |toy| {
        (0..3)
            .map(|n| running_pod(toy, n, V1, "toy:v1"))
            .collect::<Vec<_>>()
    };

    let toy = paused(3);
    let plan = sync(&toy, &three_old(&toy), &revisions);
    assert!(
        plan.creates.is_empty() && plan.deletes.is_empty() && plan.pod_changes.is_empty(),
        "{plan:#?}"
    );

    let toy = paused(4);
    let plan = sync(&toy, &three_old(&toy), &revisions);
    assert_eq!(created_revisions(&plan), [V2]);

    let toy = paused(2);
    let plan = sync(&toy, &three_old(&toy), &revisions);
    assert_eq!(plan.deletes.len(), 1);
    assert_eq!(plan.deletes[0].reason, DeleteReason::ScaleDown);

    // Unpaused, the same set updates.
    let mut toy = paused(3);
    toy.paused = false;
    let plan = sync(&toy, &three_old(&toy), &revisions);
    assert_eq!(plan.deletes.len(), 1);
    assert_eq!(plan.deletes[0].reason, DeleteReason::RecreateUpdate);
}

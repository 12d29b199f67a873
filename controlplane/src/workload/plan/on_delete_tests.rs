//! `updateStrategy.type: OnDelete` in the shared planning, over the toy workload: the
//! controller changes no live pod, and a pod deleted from outside comes back at the update
//! revision — the same rolling setup plans updates, to show each case can fail.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::toy_tests::{V1, V2, revisions, running_pod, sync, template, toy};
use crate::api::common::PodUpdatePolicy;
use crate::workload::actions::Plan;
use crate::workload::adapter::UpdateStrategyType;

fn created_revisions(plan: &Plan) -> Vec<&str> {
    plan.creates.iter().map(|c| c.revision.as_str()).collect()
}

#[test]
fn on_delete_leaves_every_live_pod_on_its_revision() {
    // (policy, update template, max surge): in place, recreate, and a surge that would
    // otherwise create a pod ahead of the update.
    let cases = [
        (
            PodUpdatePolicy::InPlaceIfPossible,
            template("toy:v2", None),
            None,
        ),
        (PodUpdatePolicy::ReCreate, template("toy:v2", None), None),
        (
            PodUpdatePolicy::InPlaceIfPossible,
            template("toy:v1", Some("debug")),
            None,
        ),
        (
            PodUpdatePolicy::InPlaceOnly,
            template("toy:v1", Some("debug")),
            None,
        ),
        (
            PodUpdatePolicy::ReCreate,
            template("toy:v2", None),
            Some(IntOrString::Int(1)),
        ),
    ];
    for (policy, v2, max_surge) in cases {
        let mut toy = toy(3, policy);
        toy.max_surge = max_surge.clone();
        let revisions = revisions(v2);
        let pods: Vec<_> = (0..3).map(|n| running_pod(&toy, n, V1, "toy:v1")).collect();

        let rolling = sync(&toy, &pods, &revisions);
        let rolled = rolling.pod_changes.len() + rolling.deletes.len() + rolling.creates.len();
        assert!(
            rolled > 0 || rolling.refusal.is_some(),
            "{policy:?}/{max_surge:?}: a rolling update acts"
        );

        toy.strategy = UpdateStrategyType::OnDelete;
        let plan = sync(&toy, &pods, &revisions);
        assert!(plan.pod_changes.is_empty(), "{policy:?}: {plan:?}");
        assert!(plan.deletes.is_empty(), "{policy:?}: {plan:?}");
        assert!(plan.creates.is_empty(), "{policy:?}: {plan:?}");
        assert_eq!(plan.refusal, None, "{policy:?}: nothing is refused");
    }
}

#[test]
fn on_delete_replaces_a_deleted_pod_at_the_update_revision_whatever_the_partition() {
    for partition in [
        None,
        Some(IntOrString::Int(3)),
        Some(IntOrString::String("100%".into())),
    ] {
        let mut toy = toy(3, PodUpdatePolicy::ReCreate);
        toy.partition = partition.clone();
        let revisions = revisions(template("toy:v2", None));
        // Pod 1 was deleted by a person; 0 and 2 still run the current revision.
        let pods = vec![
            running_pod(&toy, 0, V1, "toy:v1"),
            running_pod(&toy, 2, V1, "toy:v1"),
        ];
        if partition.is_some() {
            // Rolling: the partition keeps the replacement on the current revision.
            let rolling = sync(&toy, &pods, &revisions);
            assert_eq!(created_revisions(&rolling), [V1], "{partition:?}");
        }
        toy.strategy = UpdateStrategyType::OnDelete;
        let plan = sync(&toy, &pods, &revisions);
        assert_eq!(created_revisions(&plan), [V2], "{partition:?}");
        assert!(plan.deletes.is_empty() && plan.pod_changes.is_empty());
    }
}

#[test]
fn on_delete_scales_down_old_revision_pods_first() {
    let mut toy = toy(2, PodUpdatePolicy::ReCreate);
    toy.strategy = UpdateStrategyType::OnDelete;
    let revisions = revisions(template("toy:v2", None));
    let pods = vec![
        running_pod(&toy, 0, V2, "toy:v2"),
        running_pod(&toy, 1, V1, "toy:v1"),
        running_pod(&toy, 2, V2, "toy:v2"),
    ];
    let plan = sync(&toy, &pods, &revisions);
    let deleted: Vec<&str> = plan.deletes.iter().map(|d| d.pod.as_str()).collect();
    assert_eq!(deleted, ["toy-1"]);
    assert!(plan.creates.is_empty() && plan.pod_changes.is_empty());
}

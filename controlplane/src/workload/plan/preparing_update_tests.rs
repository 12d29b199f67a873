//! A pod held in PreparingUpdate by an inPlaceUpdate hook has begun its update: the scale
//! step counts it as updated (OpenKruise `revision.IsPodUpdate` with
//! PreparingUpdateAsUpdate), so a replacement for a deleted current-revision pod is
//! created at the current revision — while the update step still moves it by its label.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::toy_tests::{V1, revisions, running_pod, sync, template, toy};
use crate::api::common::{Lifecycle, LifecycleHook, PodUpdatePolicy};
use crate::workload::actions::ChangeReason;
use crate::workload::lifecycle::STATE_LABEL;

fn hooked_toy() -> super::toy_tests::Toy {
    let mut toy = toy(2, PodUpdatePolicy::InPlaceIfPossible);
    toy.partition = Some(IntOrString::String("99%".to_owned()));
    toy.lifecycle = Some(Lifecycle {
        in_place_update: Some(LifecycleHook {
            labels_handler: BTreeMap::from([("hold".to_owned(), "true".to_owned())]),
            finalizers_handler: Vec::new(),
            mark_pod_not_ready: false,
        }),
        ..Lifecycle::default()
    });
    toy
}

#[test]
fn partition_99_percent_of_2_with_one_pod_in_preparing_update() {
    let toy = hooked_toy();
    let revisions = revisions(template("toy:v2", None));
    let mut preparing = running_pod(&toy, 1, V1, "toy:v1");
    let labels = preparing.metadata.labels.get_or_insert_default();
    labels.insert(STATE_LABEL.to_owned(), "PreparingUpdate".to_owned());
    labels.insert("hold".to_owned(), "true".to_owned());

    // Both pods present: nothing more to update (the held one is the one update).
    let current = running_pod(&toy, 0, V1, "toy:v1");
    let plan = sync(&toy, &[current, preparing.clone()], &revisions);
    assert!(
        plan.creates.is_empty() && plan.deletes.is_empty(),
        "{plan:?}"
    );
    let started: Vec<_> = plan
        .pod_changes
        .iter()
        .filter(|c| c.reason.starts_update())
        .map(|c| c.pod.as_str())
        .collect();
    assert!(started.iter().all(|p| *p == "toy-1"), "{plan:?}");

    // The current-revision pod is deleted from outside: its replacement stays current.
    let plan = sync(&toy, &[preparing.clone()], &revisions);
    let created: Vec<&str> = plan.creates.iter().map(|c| c.revision.as_str()).collect();
    assert_eq!(created, [V1], "{plan:?}");

    // Once the hook lets go, the held pod still moves to the update revision by its label.
    preparing
        .metadata
        .labels
        .get_or_insert_default()
        .remove("hold");
    let current = running_pod(&toy, 0, V1, "toy:v1");
    let plan = sync(&toy, &[current, preparing], &revisions);
    let start: Vec<(&str, ChangeReason)> = plan
        .pod_changes
        .iter()
        .filter(|c| c.reason.starts_update())
        .map(|c| (c.pod.as_str(), c.reason))
        .collect();
    assert_eq!(start, [("toy-1", ChangeReason::InPlaceStart)], "{plan:?}");
}

//! CloneSet's pods through the shared executor (fresh instance ids from its kind): a selector naming a label the controller
//! sets on every pod (instance id, revision hashes, lifecycle state) creates no pod, though
//! the template guard lets it through.

use std::collections::BTreeMap;

use super::{CloneSetKind, CloneSetPlan};
use crate::api::{CloneSet, CloneSetSpec};
use crate::cloneset::pods::{INSTANCE_ID_LABEL, revision_spec};
use crate::pod_set::pods::SetPods;
use crate::workload::actions::Create;
use crate::workload::execute::Problems;
use crate::workload::execute::recording::{
    RecordingWrites, assert_owned_labels_refused, create_in_one_sync, created_pods,
    selector_and_template,
};
use crate::workload::lifecycle::STATE_LABEL;
use crate::workload::revision::{CONTROLLER_REVISION_HASH_LABEL, POD_TEMPLATE_HASH_LABEL};

const REVISION: &str = "web-5d8f9c";

fn cloneset(owned: Option<&str>) -> CloneSet {
    let (selector, template) = selector_and_template(owned);
    let mut cloneset = CloneSet::new(
        "web",
        CloneSetSpec {
            replicas: Some(3),
            selector,
            template,
            ..CloneSetSpec::default()
        },
    );
    cloneset.metadata.namespace = Some("default".to_owned());
    cloneset.metadata.uid = Some("web-uid".to_owned());
    cloneset
}

/// One sync creating three pods with fresh instance ids.
async fn create_three(cloneset: &CloneSet) -> (RecordingWrites, Problems) {
    let specs = BTreeMap::from([(REVISION.to_owned(), revision_spec(cloneset))]);
    let planned = CloneSetPlan::default();
    let pods = SetPods::<CloneSetKind> {
        set: cloneset,
        workload: cloneset,
        revisions: &specs,
        planned: &planned,
    };
    let creates = (0..3)
        .map(|_| Create {
            instance_id: String::new(),
            revision: REVISION.to_owned(),
        })
        .collect();
    create_in_one_sync(&pods, creates).await
}

#[tokio::test(start_paused = true)]
async fn a_selector_naming_a_label_the_controller_sets_creates_no_pod() {
    let owned = [
        // A fresh random id on every pod: the message names whichever it was.
        (INSTANCE_ID_LABEL, ""),
        (CONTROLLER_REVISION_HASH_LABEL, REVISION),
        (POD_TEMPLATE_HASH_LABEL, "5d8f9c"),
        (STATE_LABEL, "PreparingNormal"),
    ];
    assert_owned_labels_refused(&owned, |label| async move {
        create_three(&cloneset(label)).await
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_selector_of_template_labels_creates_every_pod() {
    let (writes, problems) = create_three(&cloneset(None)).await;
    assert_eq!(problems.scale, None);
    assert_eq!(created_pods(&writes).len(), 3);
}

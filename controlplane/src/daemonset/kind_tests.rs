//! DaemonSet's pods through the shared executor: a selector naming a label the controller
//! sets on every pod (revision hashes, lifecycle state) creates no pod on any node, though
//! the template guard lets it through.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::api::DaemonSetSpec;
use crate::pod_set::pods::SetPods;
use crate::workload::execute::Problems;
use crate::workload::execute::recording::{
    RecordingWrites, assert_owned_labels_refused, create_in_one_sync, created_pods,
    selector_and_template,
};
use crate::workload::lifecycle::STATE_LABEL;
use crate::workload::revision::{CONTROLLER_REVISION_HASH_LABEL, POD_TEMPLATE_HASH_LABEL};

const REVISION: &str = "web-5d8f9c";

/// One sync creating the pods of three nodes for a DaemonSet whose selector and template
/// both say `app=web` and `owned=abc`.
async fn create_three(owned: Option<&str>) -> (RecordingWrites, Problems) {
    let (selector, template) = selector_and_template(owned);
    let mut ds = DaemonSet::new(
        "web",
        DaemonSetSpec {
            selector,
            template: template.clone(),
            ..DaemonSetSpec::default()
        },
    );
    ds.metadata.namespace = Some("default".to_owned());
    ds.metadata.uid = Some("web-uid".to_owned());
    let workload = DaemonSetWorkload {
        ds: &ds,
        desired: 3,
        held_back: BTreeSet::new(),
    };
    let templates = BTreeMap::from([(REVISION.to_owned(), template)]);
    let planned = DaemonSetSync {
        planned: DaemonSetPlan::default(),
        fits: BTreeMap::new(),
        backoff_wait: None,
    };
    let pods = SetPods::<DaemonSetKind> {
        set: &ds,
        workload: &workload,
        revisions: &templates,
        planned: &planned,
    };
    let creates = ["node-0", "node-1", "node-2"]
        .map(|node| Create {
            instance_id: node.to_owned(),
            revision: REVISION.to_owned(),
        })
        .into();
    create_in_one_sync(&pods, creates).await
}

#[tokio::test(start_paused = true)]
async fn a_selector_naming_a_label_the_controller_sets_creates_no_pod() {
    let owned = [
        // The DaemonSet writes the short form, as OpenKruise's does.
        (CONTROLLER_REVISION_HASH_LABEL, "5d8f9c"),
        (POD_TEMPLATE_HASH_LABEL, "5d8f9c"),
        (STATE_LABEL, "PreparingNormal"),
    ];
    assert_owned_labels_refused(&owned, create_three).await;
}

#[tokio::test(start_paused = true)]
async fn a_selector_of_template_labels_creates_a_pod_per_node() {
    let (writes, problems) = create_three(None).await;
    assert_eq!(problems.scale, None);
    assert_eq!(created_pods(&writes).len(), 3);
}

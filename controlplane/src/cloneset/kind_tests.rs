//! CloneSet's pods through the shared executor (fresh instance ids from its kind): a selector naming a label the controller
//! sets on every pod (instance id, revision hashes, lifecycle state) creates no pod, though
//! the template guard lets it through.

use std::collections::BTreeMap;

use super::{CloneSetKind, CloneSetPlan};
use crate::api::{CloneSet, CloneSetSpec};
use crate::cloneset::pods::{INSTANCE_ID_LABEL, revision_spec};
use crate::controller::create_backoff::CreateBackoff;
use crate::pod_set::pods::SetPods;
use crate::workload::actions::Create;
use crate::workload::execute::Problems;
use crate::workload::execute::recording::{
    RecordingWrites, assert_refused_for_owned_label, created_pods, execute_creates,
    selector_and_template,
};
use crate::workload::lifecycle::STATE_LABEL;
use crate::workload::revision::{CONTROLLER_REVISION_HASH_LABEL, POD_TEMPLATE_HASH_LABEL};
use crate::workload::selector_guard::check_template_selected;

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
    let writes = RecordingWrites::default();
    let backoff = CreateBackoff::default();
    let (result, problems) = execute_creates(&pods, &writes, &backoff, 1, creates).await;
    result.expect("a refused create is not a sync error");
    (writes, problems)
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
    for (label, value) in owned {
        let cloneset = cloneset(Some(label));
        assert_eq!(
            check_template_selected(&cloneset.spec.selector, &cloneset.spec.template),
            Ok(()),
            "{label}: the template guard alone lets it through"
        );
        let (writes, problems) = create_three(&cloneset).await;
        assert_refused_for_owned_label(&writes, &problems, label, value);
    }
}

#[tokio::test(start_paused = true)]
async fn a_selector_of_template_labels_creates_every_pod() {
    let (writes, problems) = create_three(&cloneset(None)).await;
    assert_eq!(problems.scale, None);
    assert_eq!(created_pods(&writes).len(), 3);
}

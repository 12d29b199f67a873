//! The executor never creates a pod its workload's selector does not select, after every
//! label the workload adds: it builds and checks each slow-start batch before creating any
//! of it, reports the refusal once per attempt, and checks again at a new generation.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::recording::{
    RecordingWrites, ToyPods, Write, assert_refused_for_owned_label, created_pods, execute_creates,
    toy_selector,
};
use crate::controller::create_backoff::CreateBackoff;
use crate::workload::actions::Create;
use crate::workload::selector::SELECTOR_MISMATCH;

fn toy(selector: LabelSelector) -> ToyPods {
    ToyPods {
        set: "toy",
        revisions: BTreeSet::from(["toy-1"]),
        claims: true,
        selector,
        taken: BTreeSet::new(),
    }
}

/// `app=toy` and `key=value`, as a workload's selector and template would both say.
fn naming(key: &str, value: &str) -> LabelSelector {
    let mut selector = toy_selector("toy");
    (selector.match_labels.get_or_insert_default()).insert(key.to_owned(), value.to_owned());
    selector
}

fn fresh(n: usize) -> Vec<Create> {
    (0..n)
        .map(|_| Create {
            instance_id: String::new(),
            revision: "toy-1".into(),
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_selector_naming_a_label_the_workload_sets_creates_nothing_and_says_so() {
    let toy = toy(naming("controller-revision-hash", "abc"));
    let (writes, backoff) = (RecordingWrites::default(), CreateBackoff::default());
    let (result, problems) = execute_creates(&toy, &writes, &backoff, 1, fresh(5)).await;
    assert_eq!(
        result.expect("a refusal is not a sync error"),
        Some(Duration::from_secs(1)),
        "looked at again after the create backoff, not at once"
    );
    assert_refused_for_owned_label(&writes, &problems, "controller-revision-hash", "toy-1");
    assert_eq!(
        problems.scale.as_deref(),
        Some(
            "spec.selector.matchLabels requires controller-revision-hash=abc, but the \
             controller sets controller-revision-hash=toy-1 on the pods it creates (pod \
             toy-n0), so it could never claim them; controller-revision-hash is the \
             controller's own label, and no pods are created while the selector names it"
        )
    );

    // The next sync of the same generation backs off: no build, no event, no create.
    let (result, problems) = execute_creates(&toy, &writes, &backoff, 1, fresh(5)).await;
    assert!(result.expect("backing off").is_some());
    assert!(problems.scale.is_some(), "the condition stays");
    assert_eq!(writes.events().len(), 1, "reported once per attempt");

    // A new generation (the user changed the set) is checked again at once.
    let (_, problems) = execute_creates(&toy, &writes, &backoff, 2, fresh(5)).await;
    assert_eq!(created_pods(&writes), Vec::<String>::new());
    assert_eq!(writes.events().len(), 2);
    assert!(problems.scale.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_requirement_one_pod_meets_stops_at_the_first_batch_with_a_pod_it_does_not() {
    // Batches of 1, 2: toy-n0 is selected and created; toy-n1 is not, so neither it nor
    // toy-n2 of its batch is created, and nothing after.
    let mut selector = toy_selector("toy");
    selector.match_expressions = Some(vec![LabelSelectorRequirement {
        key: "toy-id".into(),
        operator: "In".into(),
        values: Some(vec!["n0".into(), "n2".into()]),
    }]);
    let toy = toy(selector);
    let (writes, backoff) = (RecordingWrites::default(), CreateBackoff::default());
    let (_, problems) = execute_creates(&toy, &writes, &backoff, 1, fresh(7)).await;
    assert_eq!(created_pods(&writes), ["toy-n0"]);
    let message = problems.scale.expect("reported");
    assert!(
        message.starts_with(
            "spec.selector.matchExpressions[0] requires toy-id in (n0,n2), but the controller \
             sets toy-id=n1 on the pods it creates (pod toy-n1)"
        ),
        "{message}"
    );
    assert!(message.ends_with("(1 created before it)"), "{message}");
    let reasons: Vec<String> = writes
        .events()
        .iter()
        .map(|e| e.reason.to_string())
        .collect();
    assert_eq!(
        reasons,
        ["SuccessfulCreate", SELECTOR_MISMATCH],
        "the pod created first has its event"
    );
}

#[tokio::test(start_paused = true)]
async fn a_selector_that_selects_every_built_pod_creates_them_all() {
    let toy = toy(naming("toy-id", "n0"));
    let (writes, backoff) = (RecordingWrites::default(), CreateBackoff::default());
    let creates = vec![Create {
        instance_id: "n0".into(),
        revision: "toy-1".into(),
    }];
    let (result, problems) = execute_creates(&toy, &writes, &backoff, 1, creates).await;
    assert_eq!(result.expect("created"), None);
    assert_eq!(problems.scale, None);
    assert_eq!(created_pods(&writes), ["toy-n0"]);
    assert_eq!(
        writes.calls()[0],
        Write::CreateClaim("data-toy-n0".into()),
        "its claim first"
    );
}

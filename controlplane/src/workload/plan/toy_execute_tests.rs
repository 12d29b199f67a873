//! The toy workload end to end: its plans carried out by the shared executor against the
//! recording `PodWrites` (whose condition writes stand in for the pod's agent), with its
//! pods built through its adapter.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::toy_tests::{Toy, V1, V2, revisions, running_pod, sync, template, toy};
use crate::api::common::PodUpdatePolicy;
use crate::controller::create_backoff::CreateBackoff;
use crate::controller::expectations::{EXPECTATION_TIMEOUT, Expectations};
use crate::workload::actions::{Create, Plan};
use crate::workload::adapter::{PodSetWorkload as _, new_pod_and_claims};
use crate::workload::budget::NoBudgets;
use crate::workload::execute::recording::{RecordingWrites, Write};
use crate::workload::execute::{Executor, NewPod, NewPods, Problems, WorkloadEvent};
use crate::workload::inplace::INPLACE_UPDATE_READY;

/// The toy's pods for the executor, built by its adapter.
struct ToyPods<'a> {
    toy: &'a Toy,
    revisions: &'a BTreeMap<String, PodTemplateSpec>,
}

impl NewPods for ToyPods<'_> {
    fn selector(&self) -> &LabelSelector {
        self.toy.selector()
    }

    fn fresh_instance_id(&self, taken: &BTreeSet<String>) -> String {
        (0..)
            .map(|n: u32| n.to_string())
            .find(|id| !taken.contains(id))
            .expect("an unused id")
    }

    fn new_pod(&self, create: &Create) -> Option<NewPod> {
        let (pod, claims) = new_pod_and_claims(self.toy, self.revisions, create)?;
        Some(NewPod { pod, claims })
    }
}

/// Plans one sync of `toy` over `pods` and carries it out; the writes made.
async fn sync_and_execute(toy: &Toy, pods: &[Pod], v2: PodTemplateSpec) -> RecordingWrites {
    let revisions = revisions(v2);
    let plan: Plan = sync(toy, pods, &revisions);
    let writes = RecordingWrites {
        nodes: (0..3).map(|n| format!("node-{n}")).collect(),
        ..RecordingWrites::default()
    };
    let new_pods = ToyPods {
        toy,
        revisions: &revisions,
    };
    let expectations = Expectations::new(EXPECTATION_TIMEOUT);
    let backoff = CreateBackoff::default();
    let executor = Executor {
        key: &"default/toy",
        generation: 1,
        writes: &writes,
        new_pods: &new_pods,
        budgets: &NoBudgets,
        expectations: &expectations,
        create_backoff: &backoff,
    };
    let mut problems = Problems::default();
    let result = executor.execute(&plan, &mut problems).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(problems, Problems::default());
    writes
}

#[tokio::test(start_paused = true)]
async fn toy_creates_its_missing_pods_through_the_executor() {
    let toy = toy(3, PodUpdatePolicy::InPlaceIfPossible);
    let existing = [running_pod(&toy, 0, V2, "toy:v2")];
    let writes = sync_and_execute(&toy, &existing, template("toy:v2", None)).await;
    assert_eq!(
        writes.calls(),
        [
            Write::CreatePod("toy-new-0".to_owned()),
            Write::CreatePod("toy-new-1".to_owned()),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn toy_scale_down_deletes_with_the_uid_precondition() {
    let toy = toy(1, PodUpdatePolicy::InPlaceIfPossible);
    let pods = [
        running_pod(&toy, 0, V2, "toy:v2"),
        running_pod(&toy, 1, V2, "toy:v2"),
    ];
    let writes = sync_and_execute(&toy, &pods, template("toy:v2", None)).await;
    assert_eq!(
        writes.calls(),
        [Write::DeletePod {
            name: "toy-1".to_owned(),
            uid: "uid-1".to_owned(),
        }]
    );
}

#[tokio::test(start_paused = true)]
async fn toy_in_place_update_sets_the_gate_through_the_agent_then_patches_once() {
    let toy = toy(1, PodUpdatePolicy::InPlaceIfPossible);
    let pods = [running_pod(&toy, 0, V1, "toy:v1")];
    let writes = sync_and_execute(&toy, &pods, template("toy:v2", None)).await;
    let calls = writes.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        calls[0],
        Write::SetCondition {
            node: "node-0".to_owned(),
            pod: "toy-0".to_owned(),
            condition: INPLACE_UPDATE_READY.to_owned(),
            status: false,
        }
    );
    let Write::PatchPod { name, body } = &calls[1] else {
        panic!("a pod patch after the condition: {calls:?}");
    };
    assert_eq!(name, "toy-0");
    assert_eq!(body["spec"]["containers"][0]["image"], "toy:v2");
    assert_eq!(
        writes.events(),
        [WorkloadEvent::normal(
            "SuccessfulUpdatePodInPlace",
            "Update",
            "updating pod toy-0 in place".to_owned()
        )]
    );
}

#[tokio::test(start_paused = true)]
async fn toy_recreate_deletes_the_pod_and_says_what_changed() {
    let toy = toy(1, PodUpdatePolicy::InPlaceIfPossible);
    let pods = [running_pod(&toy, 0, V1, "toy:v1")];
    let writes = sync_and_execute(&toy, &pods, template("toy:v2", Some("fast"))).await;
    assert_eq!(
        writes.calls(),
        [Write::DeletePod {
            name: "toy-0".to_owned(),
            uid: "uid-0".to_owned(),
        }]
    );
    let notes: Vec<String> = writes.events().into_iter().map(|e| e.note).collect();
    assert_eq!(
        notes,
        ["deleted pod toy-0 (recreate update; changed: spec.containers[app].env)"]
    );
}

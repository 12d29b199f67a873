//! The shared executor against the recording double: which calls a plan turns into, in
//! what order, with which preconditions, events and expectations.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::recording::{RecordingWrites, ToyPods, Write, toy_selector};
use super::*;
use crate::controller::expectations::EXPECTATION_TIMEOUT;
use crate::workload::actions::{
    ChangeReason, ConditionChange, Create, Delete, DeleteReason, Plan, PodChange,
};
use crate::workload::budget::ScriptedBudgets;

const KEY: &str = "default/toy";

pub(super) struct Fixture {
    pub(super) writes: RecordingWrites,
    pub(super) budgets: ScriptedBudgets,
    toy: ToyPods,
    expectations: Expectations<&'static str>,
    backoff: CreateBackoff<&'static str>,
}

impl Fixture {
    pub(super) fn new(writes: RecordingWrites) -> Self {
        Self {
            writes,
            budgets: ScriptedBudgets::default(),
            toy: ToyPods {
                set: "toy",
                revisions: BTreeSet::from(["toy-1"]),
                claims: false,
                selector: toy_selector("toy"),
                taken: BTreeSet::new(),
            },
            expectations: Expectations::new(EXPECTATION_TIMEOUT),
            backoff: CreateBackoff::default(),
        }
    }

    pub(super) async fn run(
        &self,
        plan: &Plan,
    ) -> (Result<Option<Duration>, ExecuteError>, Problems) {
        self.run_seeded(plan, Problems::default()).await
    }

    /// Runs `plan` with `problems` as the sync found them before it.
    pub(super) async fn run_seeded(
        &self,
        plan: &Plan,
        mut problems: Problems,
    ) -> (Result<Option<Duration>, ExecuteError>, Problems) {
        let executor = self.executor();
        let result = executor.execute(plan, &mut problems).await;
        (result, problems)
    }

    pub(super) fn executor(
        &self,
    ) -> Executor<'_, &'static str, RecordingWrites, ToyPods, ScriptedBudgets> {
        Executor {
            key: &KEY,
            generation: 1,
            writes: &self.writes,
            new_pods: &self.toy,
            budgets: &self.budgets,
            expectations: &self.expectations,
            create_backoff: &self.backoff,
        }
    }

    pub(super) fn expected(&self) -> Vec<Expectation> {
        self.expectations.pending(&KEY)
    }
}

fn creates(n: usize) -> Vec<Create> {
    (0..n)
        .map(|_| Create {
            instance_id: String::new(),
            revision: "toy-1".into(),
        })
        .collect()
}

fn failing(names: &[(&str, u16)]) -> RecordingWrites {
    RecordingWrites {
        failures: names.iter().map(|(n, c)| ((*n).to_owned(), *c)).collect(),
        ..RecordingWrites::default()
    }
}

fn created_pods(writes: &RecordingWrites) -> Vec<String> {
    writes
        .calls()
        .into_iter()
        .filter_map(|w| match w {
            Write::CreatePod(name) => Some(name),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn slow_start_stops_after_the_first_batch_with_a_failure() {
    // Batches of 1, 2, 4: the second pod fails, so its batch (pods 2 and 3) still runs
    // and nothing after it does.
    let fx = Fixture::new(failing(&[("toy-n1", 422)]));
    let plan = Plan {
        creates: creates(10),
        ..Plan::default()
    };
    let (result, problems) = fx.run(&plan).await;
    assert_eq!(created_pods(&fx.writes), ["toy-n0", "toy-n1", "toy-n2"]);
    let retry = result.expect("a failed create is not a sync error");
    assert_eq!(retry, Some(Duration::from_secs(1)), "the first backoff");
    let message = problems.scale.expect("the failure reaches FailedScale");
    assert_eq!(
        message,
        "creating pods: creating pod toy-n1: toy-n1 refused with 422 \
         (2 created, 7 skipped by slow start)"
    );
    assert_eq!(
        fx.writes.events(),
        [
            created_event("toy-n0"),
            created_event("toy-n2"),
            WorkloadEvent::warning("FailedCreate", "Create", message)
        ],
        "each pod created before the failure has its event"
    );
    let names: Vec<Expectation> = ["toy-n0", "toy-n2"]
        .map(|name| Expectation::Create {
            kind: "Pod",
            name: name.into(),
        })
        .into();
    assert_eq!(fx.expected(), names, "only what was created is expected");

    // The next sync backs off instead of trying again.
    let (result, problems) = fx.run(&plan).await;
    assert_eq!(created_pods(&fx.writes).len(), 3, "no new attempt");
    assert!(result.expect("backing off").is_some());
    assert!(problems.scale.is_some());
}

#[tokio::test(start_paused = true)]
async fn creates_claims_before_the_pod_and_reuses_cached_ones() {
    let mut fx = Fixture::new(RecordingWrites {
        cached_claims: BTreeMap::from([("data-toy-a".into(), "uid-a".into())]),
        ..RecordingWrites::default()
    });
    fx.toy.claims = true;
    fx.toy.taken = BTreeSet::from(["n0".to_owned()]);
    let plan = Plan {
        creates: vec![
            Create {
                instance_id: "a".into(),
                revision: "toy-1".into(),
            },
            Create {
                instance_id: String::new(),
                revision: "toy-1".into(),
            },
        ],
        ..Plan::default()
    };
    let (result, problems) = fx.run(&plan).await;
    assert_eq!(result.expect("created"), None);
    assert_eq!(problems, Problems::default());
    let mut calls = fx.writes.calls();
    calls.sort_by_key(|w| format!("{w:?}"));
    assert_eq!(
        calls,
        [
            Write::CreateClaim("data-toy-n1".into()),
            Write::CreatePod("toy-a".into()),
            Write::CreatePod("toy-n1".into()),
        ],
        "a taken id is skipped; a cached claim is reused"
    );
    assert_eq!(
        fx.writes.events(),
        [created_event("toy-a"), created_event("toy-n1")],
        "one event per pod, in the order they were created"
    );
    assert_eq!(fx.expected().len(), 3, "one expectation per create");
}

#[tokio::test(start_paused = true)]
async fn makes_again_only_the_missing_claims_of_live_pods_and_no_pod() {
    let mut fx = Fixture::new(RecordingWrites {
        cached_claims: BTreeMap::from([("data-toy-a".into(), "uid-a".into())]),
        failures: BTreeMap::from([("data-toy-c".into(), 500)]),
        ..RecordingWrites::default()
    });
    fx.toy.claims = true;
    let lost = |id: &str| Create {
        instance_id: id.into(),
        revision: "toy-1".into(),
    };
    let plan = Plan {
        missing_claims: vec![lost("a"), lost("b"), lost("c"), lost("d")],
        ..Plan::default()
    };
    let (result, _) = fx.run(&plan).await;
    let err = result.expect_err("the failed claim is the sync's error");
    assert!(err.to_string().contains("data-toy-c"), "{err}");
    assert_eq!(
        fx.writes.calls(),
        [
            Write::CreateClaim("data-toy-b".into()),
            Write::CreateClaim("data-toy-c".into()),
            Write::CreateClaim("data-toy-d".into()),
        ],
        "the cached claim is kept, a failure stops no other pod's claim, no pod is created"
    );
    let made_again = |claim: &str, pod: &str| {
        let note = format!("created claim {claim} again for pod {pod}");
        WorkloadEvent::normal("SuccessfulCreate", "Create", note).about_pod(pod)
    };
    assert_eq!(
        fx.writes.events(),
        [
            made_again("data-toy-b", "toy-b"),
            made_again("data-toy-d", "toy-d")
        ]
    );
    assert_eq!(fx.expected().len(), 2, "one expectation per claim made");
}

#[tokio::test(start_paused = true)]
async fn an_unknown_revision_fails_the_create_without_a_call() {
    let fx = Fixture::new(RecordingWrites::default());
    let plan = Plan {
        creates: vec![Create {
            instance_id: "a".into(),
            revision: "toy-9".into(),
        }],
        ..Plan::default()
    };
    let (_, problems) = fx.run(&plan).await;
    assert!(fx.writes.calls().is_empty());
    assert_eq!(
        problems.scale.as_deref(),
        Some(
            "creating pods: creating pods: revision toy-9 is not known \
             (0 created, 0 skipped by slow start)"
        )
    );
}

pub(super) fn delete(
    pod: &str,
    uid: &str,
    pvcs: &[&str],
    reason: DeleteReason,
    detail: &str,
) -> Delete {
    Delete {
        pod: pod.into(),
        uid: uid.into(),
        pvcs: pvcs.iter().map(|p| (*p).to_owned()).collect(),
        reason,
        detail: detail.into(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_delete_carries_the_uid_precondition_and_takes_its_claims() {
    let fx = Fixture::new(RecordingWrites {
        cached_claims: BTreeMap::from([("data-toy-a".into(), "claim-uid".into())]),
        ..RecordingWrites::default()
    });
    let plan = Plan {
        deletes: vec![delete(
            "toy-a",
            "pod-uid",
            &["data-toy-a", "data-gone"],
            DeleteReason::RecreateUpdate,
            "changed: env",
        )],
        ..Plan::default()
    };
    let (result, _) = fx.run(&plan).await;
    result.expect("deleted");
    assert_eq!(
        fx.writes.calls(),
        [
            Write::DeletePod {
                name: "toy-a".into(),
                uid: "pod-uid".into()
            },
            Write::DeleteClaim {
                name: "data-toy-a".into(),
                uid: "claim-uid".into()
            },
        ],
        "a claim the cache does not show is not deleted"
    );
    assert_eq!(
        fx.writes.events(),
        [WorkloadEvent::normal(
            "SuccessfulDelete",
            "Delete",
            "deleted pod toy-a (recreate update; changed: env)".into()
        )
        .about_pod("toy-a")]
    );
    assert_eq!(
        fx.expected(),
        [
            Expectation::Delete {
                kind: "Pod",
                name: "toy-a".into(),
                uid: "pod-uid".into()
            },
            Expectation::Delete {
                kind: "PersistentVolumeClaim",
                name: "data-toy-a".into(),
                uid: "claim-uid".into()
            },
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_replaced_under_its_name_is_left_alone_and_other_failures_are_returned() {
    let fx = Fixture::new(failing(&[("toy-a", 409), ("toy-b", 500), ("toy-c", 404)]));
    let plan = Plan {
        deletes: vec![
            delete("toy-a", "1", &[], DeleteReason::ScaleDown, ""),
            delete("toy-b", "2", &[], DeleteReason::ScaleDown, ""),
            delete("toy-c", "3", &[], DeleteReason::Specified, ""),
        ],
        ..Plan::default()
    };
    let (result, _) = fx.run(&plan).await;
    let err = result.expect_err("the 500 is a sync error");
    assert_eq!(
        err.to_string(),
        "deleting pod toy-b: toy-b refused with 500"
    );
    assert_eq!(
        fx.writes.calls().len(),
        3,
        "the error did not stop the rest"
    );
    assert_eq!(
        fx.writes.events(),
        [WorkloadEvent::normal(
            "SuccessfulDelete",
            "Delete",
            "deleted pod toy-c (specified for deletion)".into()
        )
        .about_pod("toy-c")],
        "a pod already gone counts as deleted; a 409 does not"
    );
}

#[tokio::test(start_paused = true)]
async fn unused_claims_are_deleted_with_their_cached_uid() {
    let fx = Fixture::new(RecordingWrites {
        cached_claims: BTreeMap::from([("data-toy-x".into(), "uid-x".into())]),
        ..RecordingWrites::default()
    });
    let executor = fx.executor();
    let names = ["data-toy-x".to_owned(), "data-toy-gone".to_owned()];
    executor
        .delete_unused_claims(&names)
        .await
        .expect("deleted");
    assert_eq!(
        fx.writes.calls(),
        [Write::DeleteClaim {
            name: "data-toy-x".into(),
            uid: "uid-x".into()
        }]
    );
    assert_eq!(fx.expected().len(), 1);
}

pub(super) fn in_place_start(node: &str, conditions: bool) -> PodChange {
    let mut change = PodChange {
        pod: "toy-a".into(),
        uid: "uid-a".into(),
        node: Some(node.into()),
        conditions: Vec::new(),
        patch: None,
        resize: None,
        resource_version: Some("7".into()),
        agent_restarts: Vec::new(),
        failure: None,
        reason: ChangeReason::InPlaceStart,
    };
    if conditions {
        change.conditions.push(ConditionChange {
            condition_type: "InPlaceUpdateReady",
            status: false,
            reason: "StartInPlaceUpdate",
            message: String::new(),
        });
    }
    change.merge_patch(json!({ "spec": { "containers": [{ "name": "app", "image": "v2" }] } }));
    change
}

#[tokio::test(start_paused = true)]
async fn an_in_place_start_sets_its_condition_then_patches_once_with_its_event() {
    let fx = Fixture::new(RecordingWrites {
        nodes: BTreeSet::from(["n1".to_owned()]),
        ..RecordingWrites::default()
    });
    let plan = Plan {
        pod_changes: vec![in_place_start("n1", true)],
        ..Plan::default()
    };
    let (result, problems) = fx.run(&plan).await;
    result.expect("patched");
    assert_eq!(problems, Problems::default());
    assert_eq!(
        fx.writes.writes(),
        [
            Write::SetCondition {
                node: "n1".into(),
                pod: "toy-a".into(),
                condition: "InPlaceUpdateReady".into(),
                status: false
            },
            Write::PatchPod {
                name: "toy-a".into(),
                body: json!({ "spec": { "containers": [{ "name": "app", "image": "v2" }] } }),
            },
            Write::Event(WorkloadEvent::normal(
                "SuccessfulUpdatePodInPlace",
                "Update",
                "updating pod toy-a in place".into()
            )),
        ],
        "no resourceVersion precondition after a condition moved it"
    );
    assert_eq!(
        fx.expected(),
        [Expectation::Update {
            kind: "Pod",
            name: "toy-a".into(),
            resource_version: 42
        }]
    );
}

/// A wave of in-place starts is written at once, not pod after pod: the budgets are still
/// asked one pod at a time in plan order (each admission records a disruption), and each
/// pod still gets its condition before its patch.
#[tokio::test(start_paused = true)]
async fn a_wave_of_in_place_starts_is_written_at_once_after_the_budgets_are_asked_in_order() {
    let fx = Fixture::new(RecordingWrites {
        nodes: BTreeSet::from(["n1".to_owned()]),
        latency: Duration::from_millis(100),
        ..RecordingWrites::default()
    });
    let pods: Vec<String> = (0..10).map(|i| format!("toy-{i}")).collect();
    let changes = pods.iter().map(|pod| PodChange {
        pod: pod.clone(),
        uid: format!("uid-{pod}"),
        ..in_place_start("n1", true)
    });
    let plan = Plan {
        pod_changes: changes.collect(),
        ..Plan::default()
    };
    let started = tokio::time::Instant::now();
    let (result, problems) = fx.run(&plan).await;
    let took = started.elapsed();
    result.expect("patched");
    assert_eq!(problems, Problems::default());
    // Two writes of 100 ms per pod: 0.2 s at once, 2 s one pod after another.
    assert!(
        took < Duration::from_millis(400),
        "10 pods' writes took {took:?}, as if written one after another"
    );
    let asked: Vec<String> = fx.budgets.asked().into_iter().map(|(pod, _)| pod).collect();
    assert_eq!(asked, pods, "the budgets are asked in plan order");
    let writes = fx.writes.writes();
    for pod in &pods {
        let at = |wanted: fn(&Write, &str) -> bool| writes.iter().position(|w| wanted(w, pod));
        let condition = at(|w, p| matches!(w, Write::SetCondition { pod, .. } if pod == p));
        let patch = at(|w, p| matches!(w, Write::PatchPod { name, .. } if name == p));
        assert!(
            condition.is_some() && condition < patch,
            "{pod}: condition at {condition:?}, patch at {patch:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_patch_without_conditions_is_conditional_on_the_planned_resource_version() {
    let fx = Fixture::new(RecordingWrites::default());
    let mut done = in_place_start("n1", false);
    done.reason = ChangeReason::InPlaceDone;
    let plan = Plan {
        pod_changes: vec![done],
        ..Plan::default()
    };
    fx.run(&plan).await.0.expect("patched");
    assert_eq!(
        fx.writes.writes(),
        [Write::PatchPod {
            name: "toy-a".into(),
            body: json!({
                "metadata": { "resourceVersion": "7" },
                "spec": { "containers": [{ "name": "app", "image": "v2" }] }
            }),
        }],
        "only an in-place start publishes an event"
    );
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_agent_or_unknown_node_leaves_the_pod_unpatched() {
    let fx = Fixture::new(RecordingWrites {
        nodes: BTreeSet::from(["n1".to_owned()]),
        unreachable: BTreeSet::from(["n1".to_owned()]),
        ..RecordingWrites::default()
    });
    let plan = Plan {
        pod_changes: vec![in_place_start("n1", true)],
        ..Plan::default()
    };
    let (result, problems) = fx.run(&plan).await;
    result.expect("an agent problem is not a sync error");
    let message = "pod toy-a (in-place update: start): cannot set InPlaceUpdateReady \
                   through the agent on node n1: connection refused";
    assert_eq!(problems.update.as_deref(), Some(message));
    assert_eq!(
        fx.writes.events(),
        [WorkloadEvent::warning(
            "AgentUnreachable",
            "Update",
            message.into()
        )]
    );
    assert!(
        !fx.writes
            .calls()
            .iter()
            .any(|w| matches!(w, Write::PatchPod { .. })),
        "no patch"
    );

    let unknown = Fixture::new(RecordingWrites::default());
    let (_, problems) = unknown.run(&plan).await;
    assert_eq!(
        problems.update.as_deref(),
        Some("pod toy-a: node n1 is not known")
    );
    assert!(unknown.writes.writes().is_empty(), "no call, no event");
}

#[tokio::test(start_paused = true)]
async fn a_refusal_is_reported_and_published() {
    let fx = Fixture::new(RecordingWrites::default());
    let plan = Plan {
        refusal: Some("InPlaceOnly cannot change env".into()),
        ..Plan::default()
    };
    let (_, problems) = fx.run(&plan).await;
    assert_eq!(
        problems.update.as_deref(),
        Some("InPlaceOnly cannot change env")
    );
    assert_eq!(
        fx.writes.events(),
        [WorkloadEvent::warning(
            IN_PLACE_ONLY_REFUSED,
            "Update",
            "InPlaceOnly cannot change env".into()
        )]
    );
}

#[tokio::test(start_paused = true)]
async fn a_resize_goes_first_and_the_patch_builds_on_its_resource_version() {
    let resize = json!({ "spec": { "containers": [{ "name": "app", "resources": { "requests": { "cpu": "200m" } } }] } });
    let fx = Fixture::new(RecordingWrites::default());
    let mut change = in_place_start("n1", false);
    change.resize = Some(resize.clone());
    let plan = Plan {
        pod_changes: vec![change.clone()],
        ..Plan::default()
    };
    fx.run(&plan).await.0.expect("resized and patched");
    let mut conditional_resize = resize.clone();
    conditional_resize["metadata"] = json!({ "resourceVersion": "7" });
    assert_eq!(
        fx.writes.calls(),
        [
            Write::ResizePod {
                name: "toy-a".into(),
                body: conditional_resize,
            },
            Write::PatchPod {
                name: "toy-a".into(),
                body: json!({
                    "metadata": { "resourceVersion": "41" },
                    "spec": { "containers": [{ "name": "app", "image": "v2" }] }
                }),
            },
        ],
        "the resize under the planned resourceVersion, the patch under the resize's"
    );

    // A refused resize leaves the pod unpatched and fails the sync with the apiserver's words.
    let refused = Fixture::new(RecordingWrites {
        failures: BTreeMap::from([("toy-a/resize".to_owned(), 422)]),
        ..RecordingWrites::default()
    });
    let err = refused.run(&plan).await.0.expect_err("refused");
    assert!(err.to_string().contains("resizing pod toy-a"), "{err}");
    assert!(
        !refused
            .writes
            .calls()
            .iter()
            .any(|w| matches!(w, Write::PatchPod { .. })),
        "no patch after a refused resize"
    );
}

/// The event the executor records for the pod `name` it created.
fn created_event(name: &str) -> WorkloadEvent {
    WorkloadEvent::normal(
        "SuccessfulCreate",
        "Create",
        format!("succeed to create pod {name}"),
    )
    .about_pod(name)
}

//! The in-place steps the agent restarts and the priority batches add to a pod change:
//! restart before the patch that records it, and a batch failure published once patched.

use std::collections::BTreeSet;

use serde_json::json;

use super::recording::{RecordingWrites, Write};
use super::tests::{Fixture, in_place_start};
use super::*;
use crate::workload::actions::{ChangeReason, Plan, PodChange};

fn restart_change() -> PodChange {
    let mut change = in_place_start("n1", false);
    change.reason = ChangeReason::InPlaceRestart;
    change.resource_version = None;
    change.agent_restarts = vec!["app".into()];
    change.patch = Some(json!({ "metadata": { "annotations": { "state": "recorded" } } }));
    change
}

fn on_n1(unreachable: bool) -> RecordingWrites {
    let n1 = BTreeSet::from(["n1".to_owned()]);
    RecordingWrites {
        nodes: n1.clone(),
        unreachable: if unreachable { n1 } else { BTreeSet::new() },
        ..RecordingWrites::default()
    }
}

#[tokio::test(start_paused = true)]
async fn the_agent_restarts_the_containers_before_the_patch_records_it() {
    let fx = Fixture::new(on_n1(false));
    let plan = Plan {
        pod_changes: vec![restart_change()],
        ..Plan::default()
    };
    let (result, problems) = fx.run(&plan).await;
    result.expect("done");
    assert_eq!(problems, Problems::default());
    assert_eq!(
        fx.writes.writes(),
        [
            Write::RestartContainers {
                node: "n1".into(),
                pod: "toy-a".into(),
                containers: vec!["app".into()],
            },
            Write::PatchPod {
                name: "toy-a".into(),
                body: json!({ "metadata": { "annotations": { "state": "recorded" } } }),
            },
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_agent_leaves_the_restart_unrecorded_for_the_next_sync() {
    let fx = Fixture::new(on_n1(true));
    let plan = Plan {
        pod_changes: vec![restart_change()],
        ..Plan::default()
    };
    let (result, problems) = fx.run(&plan).await;
    result.expect("an agent problem is not a sync error");
    let message = "pod toy-a (in-place update: restart containers whose env reads changed \
                   metadata): the agent on node n1 cannot restart app: connection refused";
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
        "not recorded, so asked again"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_batch_is_published_as_failed_update_once_recorded() {
    let fx = Fixture::new(on_n1(false));
    let mut change = in_place_start("n1", false);
    change.reason = ChangeReason::InPlaceBatchFailed;
    change.failure = Some("container sidecar failed its in-place update (ErrImagePull)".into());
    let plan = Plan {
        pod_changes: vec![change],
        ..Plan::default()
    };
    fx.run(&plan).await.0.expect("done");
    assert_eq!(
        fx.writes.events(),
        [WorkloadEvent::warning(
            "FailedUpdate",
            "Update",
            "pod toy-a: container sidecar failed its in-place update (ErrImagePull)".into()
        )]
    );
}

//! The part of a kubelet that kwok leaves out: making a pod Ready again after its node
//! comes back.
//!
//! When a node turns NotReady, kube-controller-manager's node lifecycle controller sets
//! the Ready condition of every pod on it to False (ContainersReady stays True). A real
//! kubelet's status manager sets Ready back to True once the node reports again, since
//! Ready is ContainersReady and every readiness gate. kwok's pod stages fire once, when a
//! pod starts, so on a simulated node those pods stay unready for good and any rollout
//! held by `maxUnavailable` stops: the chaos run of seed 22 ended with a CloneSet and a
//! StatefulSet stuck that way. This stand-in recomputes Ready as the kubelet would, for
//! the run's pods on its Ready nodes, so a NodeNotReady fault costs what it costs on a
//! real cluster and no more.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::TestContext;

/// How often the stand-in looks; a kubelet's status manager resyncs every 10 s.
const EVERY: Duration = Duration::from_secs(3);

fn condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

fn is_true(pod: &Pod, kind: &str) -> bool {
    condition(pod, kind).is_some_and(|c| c.status == "True")
}

/// Whether a kubelet would set this pod's Ready condition back to True: it runs on a
/// Ready node, is not being deleted, is Ready=False while its containers are ready, and
/// every readiness gate (the in-place update protocol's InPlaceUpdateReady among them)
/// is True.
pub fn ready_again(pod: &Pod, ready_nodes: &BTreeSet<String>) -> bool {
    let on_ready_node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_some_and(|n| ready_nodes.contains(n));
    let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let gates_true = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_none_or(|gates| gates.iter().all(|g| is_true(pod, &g.condition_type)));
    on_ready_node
        && running
        && pod.metadata.deletion_timestamp.is_none()
        && condition(pod, "Ready").is_some_and(|c| c.status == "False")
        && is_true(pod, "ContainersReady")
        && gates_true
}

fn node_is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn ready_nodes(ctx: &TestContext, nodes: &[String]) -> BTreeSet<String> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    let mut ready = BTreeSet::new();
    for name in nodes {
        if let Ok(Some(node)) = api.get_opt(name).await
            && node_is_ready(&node)
        {
            ready.insert(name.clone());
        }
    }
    ready
}

async fn mark_ready(pods: &Api<Pod>, name: &str) {
    let now = Timestamp::now().to_string();
    let patch = json!({ "status": { "conditions": [{
        "type": "Ready", "status": "True", "lastTransitionTime": now,
    }] } });
    // A pod deleted or changed meanwhile is simply looked at again next time.
    let _ = pods
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await;
}

/// One look: the run's pods that a kubelet would make Ready again, made Ready.
async fn once(ctx: &TestContext, nodes: &[String]) {
    let ready = ready_nodes(ctx, nodes).await;
    if ready.is_empty() {
        return;
    }
    let pods = ctx.api::<Pod>();
    let Ok(list) = pods.list(&ListParams::default()).await else {
        return;
    };
    for pod in list.items.iter().filter(|p| ready_again(p, &ready)) {
        mark_ready(&pods, &pod.name_any()).await;
    }
}

/// Runs the stand-in for the given simulated nodes until `stop`.
pub async fn stand_in(ctx: TestContext, nodes: Vec<String>, stop: CancellationToken) {
    loop {
        once(&ctx, &nodes).await;
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(EVERY) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn pod(node: &str, phase: &str, conditions: &[(&str, &str)], gates: &[&str]) -> Pod {
        let conditions: Vec<Value> = conditions
            .iter()
            .map(|(t, s)| json!({ "type": t, "status": s }))
            .collect();
        let gates: Vec<Value> = gates
            .iter()
            .map(|g| json!({ "conditionType": g }))
            .collect();
        serde_json::from_value(json!({
            "metadata": { "name": "p" },
            "spec": { "nodeName": node, "containers": [], "readinessGates": gates },
            "status": { "phase": phase, "conditions": conditions },
        }))
        .unwrap()
    }

    #[test]
    fn ready_comes_back_only_where_a_kubelet_would_set_it() {
        let ready: BTreeSet<String> = ["n1".to_owned()].into();
        let unready = [("Ready", "False"), ("ContainersReady", "True")];
        let gate_false = [
            ("Ready", "False"),
            ("ContainersReady", "True"),
            ("InPlaceUpdateReady", "False"),
        ];
        let gate_true = [
            ("Ready", "False"),
            ("ContainersReady", "True"),
            ("InPlaceUpdateReady", "True"),
        ];
        let containers_unready = [("Ready", "False"), ("ContainersReady", "False")];
        let cases = [
            (
                "marked unready by the node controller",
                pod("n1", "Running", &unready, &[]),
                true,
            ),
            (
                "node still NotReady",
                pod("n2", "Running", &unready, &[]),
                false,
            ),
            (
                "already Ready",
                pod(
                    "n1",
                    "Running",
                    &[("Ready", "True"), ("ContainersReady", "True")],
                    &[],
                ),
                false,
            ),
            (
                "containers not ready",
                pod("n1", "Running", &containers_unready, &[]),
                false,
            ),
            (
                "an in-place update in flight",
                pod("n1", "Running", &gate_false, &["InPlaceUpdateReady"]),
                false,
            ),
            (
                "gate True again",
                pod("n1", "Running", &gate_true, &["InPlaceUpdateReady"]),
                true,
            ),
            (
                "gate condition missing",
                pod("n1", "Running", &unready, &["InPlaceUpdateReady"]),
                false,
            ),
            ("finished", pod("n1", "Succeeded", &unready, &[]), false),
        ];
        for (case, pod, want) in cases {
            assert_eq!(ready_again(&pod, &ready), want, "{case}");
        }
    }

    #[test]
    fn a_pod_being_deleted_is_left_alone() {
        let ready: BTreeSet<String> = ["n1".to_owned()].into();
        let mut p = pod(
            "n1",
            "Running",
            &[("Ready", "False"), ("ContainersReady", "True")],
            &[],
        );
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Timestamp::now(),
        ));
        assert!(!ready_again(&p, &ready));
    }
}

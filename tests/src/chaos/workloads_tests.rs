use serde_json::json;

use super::invariants::SetKind;
use super::pool::Placement;
use super::workloads::{IN_PLACE, REAL, STATEFUL, manifest, rolled_out, workloads};

#[test]
fn a_rollout_is_done_when_the_status_of_this_generation_says_every_pod_is_updated_and_ready() {
    let clone = |observed, replicas, updated, updated_ready| {
        json!({ "status": { "observedGeneration": observed, "replicas": replicas,
            "updatedReplicas": updated, "updatedReadyReplicas": updated_ready } })
    };
    let sts = |observed, replicas, updated, ready| {
        json!({ "status": { "observedGeneration": observed, "replicas": replicas,
            "updatedReplicas": updated, "readyReplicas": ready } })
    };
    let ds = |observed, desired, current, updated, ready| {
        json!({ "status": { "observedGeneration": observed, "desiredNumberScheduled": desired,
            "currentNumberScheduled": current, "updatedNumberScheduled": updated,
            "numberReady": ready } })
    };
    let cases = [
        (SetKind::CloneSet, clone(2, 3, 3, 3), true),
        (SetKind::CloneSet, clone(1, 3, 3, 3), false), // an older generation's status
        (SetKind::CloneSet, clone(2, 4, 3, 3), false), // a surplus pod
        (SetKind::CloneSet, clone(2, 3, 3, 2), false), // one updated pod not ready
        (SetKind::StatefulSet, sts(2, 3, 3, 3), true),
        (SetKind::StatefulSet, sts(2, 3, 2, 3), false),
        (SetKind::DaemonSet, ds(2, 3, 3, 3, 3), true),
        (SetKind::DaemonSet, ds(2, 3, 3, 3, 2), false),
        (SetKind::DaemonSet, json!({}), false), // no status yet
    ];
    for (kind, data, done) in cases {
        assert_eq!(rolled_out(kind, 3, 2, &data), done, "{kind:?} {data}");
    }
}

#[test]
fn every_workload_is_pinned_to_the_runs_nodes_and_updated_as_its_checks_expect() {
    let placement = Placement {
        prefix: "chaos-7".into(),
    };
    for workload in workloads(3) {
        let object = manifest("ns", &placement, &workload, "web:v1");
        let spec = &object["spec"];
        let pod = &spec["template"]["spec"];
        if workload.name() == REAL {
            // Real containers for the ContainerRecreateRequests: the real nodes only.
            assert!(workload.on_real_nodes && workload.in_place);
            let term = &pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchExpressions"][0];
            assert_eq!(
                term,
                &json!({ "key": "type", "operator": "NotIn", "values": ["kwok"] })
            );
            assert!(
                pod["nodeSelector"].is_null() && pod["tolerations"].is_null(),
                "{object}"
            );
            continue;
        }
        assert_eq!(
            pod["nodeSelector"]["stevedore.dev/simulated"], "chaos-7",
            "{object}"
        );
        let tolerated = pod["tolerations"].as_array().expect("tolerations");
        assert!(
            tolerated.iter().any(|t| t["value"] == "chaos-7"),
            "{object}"
        );
        let strategy = &spec["updateStrategy"];
        let max = workload.rule.max_unavailable;
        match workload.name() {
            IN_PLACE => {
                assert_eq!(strategy["type"], "InPlaceIfPossible");
                assert_eq!(strategy["maxUnavailable"], max);
            }
            "clone" => assert_eq!(strategy["type"], "ReCreate"),
            STATEFUL => {
                assert_eq!(spec["volumeClaimTemplates"][0]["metadata"]["name"], "data");
                assert_eq!(strategy["rollingUpdate"]["maxUnavailable"], max);
            }
            _ => assert_eq!(strategy["rollingUpdate"]["maxUnavailable"], max),
        }
    }
}

#[test]
fn the_budget_is_tighter_than_the_in_place_sets_own_max_unavailable() {
    let budget = super::workloads::budget();
    let in_place = workloads(3)
        .into_iter()
        .find(|w| w.name() == IN_PLACE)
        .expect("the in-place set");
    assert!(in_place.in_place);
    assert_eq!(budget.app, IN_PLACE);
    assert!(budget.max_unavailable < in_place.rule.max_unavailable);
}

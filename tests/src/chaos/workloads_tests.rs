use serde_json::json;

use super::invariants::SetKind;
use super::workloads::rolled_out;

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

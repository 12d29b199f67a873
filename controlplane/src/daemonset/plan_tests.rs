//! The DaemonSet's sync as tables: which nodes get a pod, which pods go, failed pods
//! backing off per node, burstReplicas, and the update (Standard within maxUnavailable,
//! partition, paused, OnDelete, the node selector canary, in place, surging).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{
    Container, Node, NodeSpec, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use super::{DaemonSetPlan, Snapshot, plan};
use crate::api::DaemonSet;
use crate::api::daemonset::{
    DaemonSetSpec, DaemonSetUpdateStrategy, DaemonSetUpdateStrategyType, RollingUpdateDaemonSet,
    RollingUpdateType,
};
use crate::daemonset::adapter::DaemonSetWorkload;
use crate::workload::actions::{ChangeReason, Create, DeleteReason};
use crate::workload::adapter::PodSetWorkload as _;
use crate::workload::node_pin::pinned_node;
use crate::workload::node_resources::NodeUsage;

const V1: &str = "agent-v1";
const V2: &str = "agent-v2";

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).expect("a valid timestamp")
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn template(image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(&[("app", "agent")])),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            node_selector: Some(labels(&[("role", "edge")])),
            containers: vec![Container {
                name: "main".to_owned(),
                image: Some(image.to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    }
}

fn daemonset(rolling: RollingUpdateDaemonSet) -> DaemonSet {
    let mut ds = DaemonSet::new(
        "agent",
        DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "agent")])),
                ..LabelSelector::default()
            },
            template: template("agent:2"),
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: None,
                rolling_update: Some(rolling),
            }),
            ..DaemonSetSpec::default()
        },
    );
    ds.metadata.namespace = Some("ops".to_owned());
    ds.metadata.uid = Some("ds-uid".to_owned());
    ds
}

fn standard() -> DaemonSet {
    daemonset(RollingUpdateDaemonSet::default())
}

fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels(&[("role", "edge")])),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

fn tainted(mut node: Node, effect: &str) -> Node {
    node.spec.get_or_insert_with(NodeSpec::default).taints = Some(vec![Taint {
        key: "dedicated".to_owned(),
        effect: effect.to_owned(),
        ..Taint::default()
    }]);
    node
}

fn cordoned(mut node: Node) -> Node {
    node.spec
        .get_or_insert_with(NodeSpec::default)
        .unschedulable = Some(true);
    node
}

fn unlabelled(mut node: Node) -> Node {
    node.metadata.labels = None;
    node
}

/// A Running, Ready pod of `revision` on `node`, created at `ts(created)`.
fn pod(ds: &DaemonSet, node: &str, revision: &str, created: i64) -> Pod {
    let workload = DaemonSetWorkload {
        ds,
        desired: 0,
        held_back: BTreeSet::new(),
    };
    let image = if revision == V1 { "agent:1" } else { "agent:2" };
    let create = Create {
        instance_id: node.to_owned(),
        revision: revision.to_owned(),
    };
    let mut pod = workload.new_pod(&create, &template(image));
    let name = format!("agent-{node}-{created}");
    pod.metadata.name = Some(name.clone());
    pod.metadata.uid = Some(format!("uid-{name}"));
    pod.metadata.creation_timestamp = Some(Time(ts(created)));
    pod.metadata.labels.get_or_insert_default().insert(
        crate::workload::lifecycle::STATE_LABEL.to_owned(),
        "Normal".to_owned(),
    );
    let mut conditions = vec![PodCondition {
        type_: "Ready".to_owned(),
        status: "True".to_owned(),
        last_transition_time: Some(Time(ts(created))),
        ..PodCondition::default()
    }];
    conditions.extend(
        workload
            .readiness_gates()
            .into_iter()
            .map(|gate| PodCondition {
                type_: gate.to_owned(),
                status: "True".to_owned(),
                ..PodCondition::default()
            }),
    );
    pod.spec.get_or_insert_default().node_name = Some(node.to_owned());
    pod.status = Some(PodStatus {
        phase: Some("Running".to_owned()),
        conditions: Some(conditions),
        ..PodStatus::default()
    });
    pod
}

fn unready(mut pod: Pod) -> Pod {
    let status = pod.status.get_or_insert_default();
    status.conditions = None;
    pod
}

fn failed(mut pod: Pod) -> Pod {
    pod.status.get_or_insert_default().phase = Some("Failed".to_owned());
    pod
}

fn sync_with(ds: &DaemonSet, nodes: &[Node], pods: &[Pod], backoff: &[&str]) -> DaemonSetPlan {
    sync_with_usage(ds, nodes, pods, backoff, &HashMap::new())
}

fn sync_with_usage(
    ds: &DaemonSet,
    nodes: &[Node],
    pods: &[Pod],
    backoff: &[&str],
    usage: &HashMap<String, NodeUsage>,
) -> DaemonSetPlan {
    let revisions = BTreeMap::from([
        (V1.to_owned(), template("agent:1")),
        (V2.to_owned(), template("agent:2")),
    ]);
    let backoff: BTreeSet<String> = backoff.iter().map(|n| (*n).to_owned()).collect();
    let snap = Snapshot {
        ds,
        nodes: nodes.iter().collect(),
        pods: pods.iter().collect(),
        update_revision: V2,
        current_revision: V1,
        revisions: &revisions,
        failed_backoff: &backoff,
        usage,
        now: ts(1000),
    };
    plan(&snap).expect("a plan")
}

fn sync(ds: &DaemonSet, nodes: &[Node], pods: &[Pod]) -> DaemonSetPlan {
    sync_with(ds, nodes, pods, &[])
}

fn created_on(out: &DaemonSetPlan) -> Vec<&str> {
    out.plan
        .creates
        .iter()
        .map(|c| c.instance_id.as_str())
        .collect()
}

fn deleted(out: &DaemonSetPlan) -> Vec<(&str, DeleteReason)> {
    out.plan
        .deletes
        .iter()
        .map(|d| (d.pod.as_str(), d.reason))
        .collect()
}

#[test]
fn a_pod_is_created_on_each_node_that_fits_and_nowhere_else() {
    let ds = standard();
    let cases: Vec<(&str, Node, bool)> = vec![
        ("a matching node", node("n"), true),
        (
            "a node without the selector's label",
            unlabelled(node("n")),
            false,
        ),
        (
            "a NoSchedule taint not tolerated",
            tainted(node("n"), "NoSchedule"),
            false,
        ),
        (
            "a NoExecute taint not tolerated",
            tainted(node("n"), "NoExecute"),
            false,
        ),
        (
            "a cordoned node (daemon pods tolerate it)",
            cordoned(node("n")),
            true,
        ),
    ];
    for (case, node, create) in cases {
        let out = sync(&ds, &[node], &[]);
        let want: Vec<&str> = if create { vec!["n"] } else { vec![] };
        assert_eq!(created_on(&out), want, "{case}");
        assert!(out.plan.creates.iter().all(|c| c.revision == V2), "{case}");
    }
}

/// A node with room for `pods` pods and 1 CPU.
fn sized(mut node: Node, pods: &str) -> Node {
    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let allocatable =
        [("pods", pods), ("cpu", "1")].map(|(k, v)| (k.to_owned(), Quantity(v.to_owned())));
    node.status = Some(NodeStatus {
        allocatable: Some(allocatable.into_iter().collect()),
        ..NodeStatus::default()
    });
    node
}

#[test]
fn a_node_without_room_gets_no_pod_until_room_frees_up_and_keeps_the_one_it_runs() {
    let ds = standard();
    let nodes = [
        sized(node("full"), "1"),
        sized(node("roomy"), "2"),
        sized(node("kept"), "1"),
    ];
    let usage = HashMap::from(["full", "roomy", "kept"].map(|n| {
        let used = NodeUsage {
            pods: 1,
            ..NodeUsage::default()
        };
        (n.to_owned(), used)
    }));
    let running = [pod(&ds, "kept", V2, 1)];
    let out = sync_with_usage(&ds, &nodes, &running, &[], &usage);
    assert_eq!(created_on(&out), ["roomy"]);
    assert!(
        out.plan.deletes.is_empty(),
        "a running pod is not evicted for room"
    );
    let freed = HashMap::new();
    let out = sync_with_usage(&ds, &nodes, &running, &[], &freed);
    assert_eq!(created_on(&out), ["full", "roomy"]);
}

#[test]
fn the_pod_created_is_pinned_by_affinity_with_daemon_tolerations() {
    let ds = standard();
    let pod = pod(&ds, "n7", V2, 0);
    assert_eq!(
        pinned_node(&Pod {
            spec: pod.spec.clone().map(|mut s| {
                s.node_name = None;
                s
            }),
            ..pod.clone()
        })
        .as_deref(),
        Some("n7")
    );
    let tolerations = pod.spec.and_then(|s| s.tolerations).unwrap_or_default();
    assert!(
        tolerations
            .iter()
            .any(|t| t.key.as_deref() == Some("node.kubernetes.io/not-ready"))
    );
    let labels = pod.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("controller-revision-hash").map(String::as_str),
        Some("v2")
    );
}

#[test]
fn pods_go_from_nodes_that_no_longer_fit_but_a_no_schedule_taint_lets_them_stay() {
    let ds = standard();
    let cases: Vec<(&str, Vec<Node>, bool)> = vec![
        ("still fits", vec![node("n")], false),
        (
            "NoSchedule taint",
            vec![tainted(node("n"), "NoSchedule")],
            false,
        ),
        (
            "NoExecute taint",
            vec![tainted(node("n"), "NoExecute")],
            true,
        ),
        ("label removed", vec![unlabelled(node("n"))], true),
        ("node gone", vec![], true),
    ];
    for (case, nodes, gone) in cases {
        let pods = [pod(&ds, "n", V2, 0)];
        let out = sync(&ds, &nodes, &pods);
        let want = if gone {
            vec![("agent-n-0", DeleteReason::ScaleDown)]
        } else {
            vec![]
        };
        assert_eq!(deleted(&out), want, "{case}");
        assert!(out.plan.creates.is_empty(), "{case}");
    }
}

#[test]
fn a_pre_delete_hook_holds_pods_in_preparing_delete_until_released() {
    use crate::api::common::{Lifecycle, LifecycleHook};
    use crate::workload::lifecycle::STATE_LABEL;
    let mut ds = standard();
    ds.spec.lifecycle = Some(Lifecycle {
        pre_delete: Some(LifecycleHook {
            labels_handler: BTreeMap::from([("hold".to_owned(), "true".to_owned())]),
            ..LifecycleHook::default()
        }),
        ..Lifecycle::default()
    });
    let mut held = pod(&ds, "n", V2, 0);
    let labels = held.metadata.labels.get_or_insert_default();
    labels.insert("hold".to_owned(), "true".to_owned());
    // The node no longer fits: the pod must go, but the hook holds it.
    let nodes = [unlabelled(node("n"))];
    let out = sync(&ds, &nodes, std::slice::from_ref(&held));
    assert!(out.plan.deletes.is_empty(), "{:?}", out.plan.deletes);
    let preparing: Vec<(&str, ChangeReason)> = (out.plan.pod_changes.iter())
        .map(|c| (c.pod.as_str(), c.reason))
        .collect();
    assert_eq!(preparing, [("agent-n-0", ChangeReason::PreparingDelete)]);
    // In PreparingDelete and still held: it waits; released: it goes.
    let labels = held.metadata.labels.get_or_insert_default();
    labels.insert(STATE_LABEL.to_owned(), "PreparingDelete".to_owned());
    let out = sync(&ds, &nodes, std::slice::from_ref(&held));
    assert!(out.plan.deletes.is_empty(), "still held");
    held.metadata.labels.get_or_insert_default().remove("hold");
    let out = sync(&ds, &nodes, &[held]);
    assert_eq!(deleted(&out), [("agent-n-0", DeleteReason::ScaleDown)]);
}

#[test]
fn a_pod_released_from_preparing_delete_in_a_recreate_rollout_is_deleted() {
    use crate::api::common::{Lifecycle, LifecycleHook};
    use crate::workload::lifecycle::STATE_LABEL;
    let mut ds = standard();
    ds.spec.lifecycle = Some(Lifecycle {
        pre_delete: Some(LifecycleHook {
            labels_handler: BTreeMap::from([("hold".to_owned(), "true".to_owned())]),
            ..LifecycleHook::default()
        }),
        ..Lifecycle::default()
    });
    // A recreate rollout to V2 moved the old pod to PreparingDelete; the node still fits.
    let preparing = |hooked: bool| {
        let mut pod = pod(&ds, "n", V1, 0);
        let labels = pod.metadata.labels.get_or_insert_default();
        labels.insert(STATE_LABEL.to_owned(), "PreparingDelete".to_owned());
        if hooked {
            labels.insert("hold".to_owned(), "true".to_owned());
        }
        pod
    };
    // (case, hook still on, deleted)
    let cases = [
        ("still hooked: it waits", true, vec![]),
        (
            "released: it goes at this sync",
            false,
            vec![("agent-n-0", DeleteReason::RecreateUpdate)],
        ),
    ];
    for (case, hooked, want) in cases {
        let out = sync(&ds, &[node("n")], &[preparing(hooked)]);
        assert_eq!(deleted(&out), want, "{case}");
        assert!(
            out.plan.creates.is_empty(),
            "{case}: no second pod beside it"
        );
    }
}

#[test]
fn of_several_pods_on_a_node_the_oldest_stays() {
    let ds = standard();
    let pods = [
        pod(&ds, "n", V2, 30),
        pod(&ds, "n", V2, 10),
        pod(&ds, "n", V2, 20),
    ];
    let out = sync(&ds, &[node("n")], &pods);
    assert_eq!(
        deleted(&out),
        [
            ("agent-n-20", DeleteReason::ScaleDown),
            ("agent-n-30", DeleteReason::ScaleDown)
        ]
    );
}

#[test]
fn a_terminating_pod_holds_its_node_until_it_is_gone() {
    let ds = standard();
    let mut leaving = pod(&ds, "n", V1, 0);
    leaving.metadata.deletion_timestamp = Some(Time(ts(999)));
    let out = sync(&ds, &[node("n")], &[leaving]);
    assert!(out.plan.creates.is_empty());
    assert!(out.plan.deletes.is_empty());
}

#[test]
fn failed_pods_are_deleted_with_a_backoff_per_node() {
    let ds = standard();
    let nodes = [node("a"), node("b")];
    let pods = [failed(pod(&ds, "a", V2, 0)), failed(pod(&ds, "b", V2, 0))];
    let out = sync_with(&ds, &nodes, &pods, &["b"]);
    assert_eq!(deleted(&out), [("agent-a-0", DeleteReason::Failed)]);
    let deleted_on: Vec<&str> = out
        .failed_deleted_on
        .iter()
        .map(|f| f.node.as_str())
        .collect();
    assert_eq!(deleted_on, ["a"]);
    assert_eq!(out.failed_deleted_on[0].pod, "agent-a-0");
    assert_eq!(out.failed_waiting_on, ["b"]);
    // The replacement comes with the next sync, once the failed pod is gone.
    assert!(out.plan.creates.is_empty());
}

#[test]
fn burst_replicas_caps_the_creates_of_one_sync() {
    let cases: [(Option<IntOrString>, usize); 3] = [
        (None, 5),
        (Some(IntOrString::Int(2)), 2),
        (Some(IntOrString::String("50%".to_owned())), 3),
    ];
    let nodes: Vec<Node> = (0..5).map(|i| node(&format!("n{i}"))).collect();
    for (burst, want) in cases {
        let mut ds = standard();
        ds.spec.burst_replicas = burst.clone();
        let out = sync(&ds, &nodes, &[]);
        assert_eq!(out.plan.creates.len(), want, "{burst:?}");
    }
}

fn three_nodes() -> Vec<Node> {
    vec![node("a"), node("b"), node("c")]
}

fn old_pods(ds: &DaemonSet) -> Vec<Pod> {
    ["a", "b", "c"].iter().map(|n| pod(ds, n, V1, 0)).collect()
}

#[test]
fn standard_replaces_within_max_unavailable_unavailable_pods_first() {
    let ds = standard();
    let out = sync(&ds, &three_nodes(), &old_pods(&ds));
    assert_eq!(deleted(&out), [("agent-a-0", DeleteReason::RecreateUpdate)]);

    let mut pods = old_pods(&ds);
    pods[2] = unready(pods[2].clone());
    let out = sync(&ds, &three_nodes(), &pods);
    assert_eq!(
        deleted(&out),
        [("agent-c-0", DeleteReason::RecreateUpdate)],
        "the unavailable pod goes first, and uses up maxUnavailable 1"
    );

    let two = daemonset(RollingUpdateDaemonSet {
        max_unavailable: Some(IntOrString::String("50%".to_owned())),
        ..RollingUpdateDaemonSet::default()
    });
    let out = sync(&two, &three_nodes(), &old_pods(&two));
    assert_eq!(out.plan.deletes.len(), 2, "50% of 3 rounds up to 2");
}

#[test]
fn partition_paused_and_on_delete_hold_pods_back() {
    let rolling = |partition: i32, paused: bool| RollingUpdateDaemonSet {
        partition: Some(partition),
        paused: Some(paused),
        max_unavailable: Some(IntOrString::Int(3)),
        ..RollingUpdateDaemonSet::default()
    };
    // (case, strategy, pods deleted for the update, the hold's reason)
    let cases = [
        ("partition 0", rolling(0, false), 3, None),
        ("partition 2", rolling(2, false), 1, Some("Partition")),
        ("partition 3", rolling(3, false), 0, Some("Partition")),
        ("paused", rolling(0, true), 0, Some("Paused")),
    ];
    for (case, rolling, want, reason) in cases {
        let ds = daemonset(rolling);
        let out = sync(&ds, &three_nodes(), &old_pods(&ds));
        assert_eq!(out.plan.deletes.len(), want, "{case}");
        assert_eq!(hold_reason(&out), reason, "{case}");
    }
    let mut on_delete = standard();
    on_delete.spec.update_strategy = Some(DaemonSetUpdateStrategy {
        type_: Some(DaemonSetUpdateStrategyType::OnDelete),
        rolling_update: None,
    });
    let out = sync(&on_delete, &three_nodes(), &old_pods(&on_delete));
    assert!(
        out.plan.deletes.is_empty() && out.plan.creates.is_empty(),
        "OnDelete"
    );
    assert_eq!(hold_reason(&out), Some("OnDelete"));
}

/// The reason of the update step's hold; `None` when it found nothing held.
fn hold_reason(out: &DaemonSetPlan) -> Option<&'static str> {
    use crate::workload::update_hold::UpdateHoldSeen;
    match &out.plan.update_hold {
        UpdateHoldSeen::Held(hold) => Some(hold.reason()),
        UpdateHoldSeen::Clear => None,
        UpdateHoldSeen::NotEvaluated => Some("not evaluated"),
    }
}

#[test]
fn the_rolling_update_selector_updates_canary_nodes_only() {
    let ds = daemonset(RollingUpdateDaemonSet {
        selector: Some(LabelSelector {
            match_labels: Some(labels(&[("canary", "true")])),
            ..LabelSelector::default()
        }),
        max_unavailable: Some(IntOrString::Int(3)),
        ..RollingUpdateDaemonSet::default()
    });
    let mut nodes = three_nodes();
    nodes[1]
        .metadata
        .labels
        .get_or_insert_default()
        .insert("canary".to_owned(), "true".to_owned());
    let out = sync(&ds, &nodes, &old_pods(&ds));
    assert_eq!(deleted(&out), [("agent-b-0", DeleteReason::RecreateUpdate)]);
}

#[test]
fn in_place_if_possible_changes_the_image_without_deleting() {
    let ds = daemonset(RollingUpdateDaemonSet {
        rolling_update_type: Some(RollingUpdateType::InPlaceIfPossible),
        ..RollingUpdateDaemonSet::default()
    });
    let out = sync(&ds, &three_nodes(), &old_pods(&ds));
    assert!(out.plan.deletes.is_empty());
    let started: Vec<(&str, ChangeReason)> = out
        .plan
        .pod_changes
        .iter()
        .filter(|c| c.reason == ChangeReason::InPlaceStart)
        .map(|c| (c.pod.as_str(), c.reason))
        .collect();
    assert_eq!(started, [("agent-a-0", ChangeReason::InPlaceStart)]);
}

fn surging(max_surge: i32, partition: i32) -> DaemonSet {
    daemonset(RollingUpdateDaemonSet {
        rolling_update_type: Some(RollingUpdateType::Surging),
        max_surge: Some(IntOrString::Int(max_surge)),
        max_unavailable: Some(IntOrString::Int(0)),
        partition: Some(partition),
        ..RollingUpdateDaemonSet::default()
    })
}

#[test]
fn surge_creates_the_new_pod_beside_the_old_and_deletes_the_old_once_it_is_available() {
    let ds = surging(1, 0);
    // Nothing surged yet: one new pod beside an old one, nothing deleted.
    let out = sync(&ds, &three_nodes(), &old_pods(&ds));
    assert_eq!(created_on(&out), ["a"]);
    assert!(out.plan.deletes.is_empty());

    // The new pod is not available yet: the old one stays and the surge budget is used.
    let mut pods = old_pods(&ds);
    pods.push(unready(pod(&ds, "a", V2, 5)));
    let out = sync(&ds, &three_nodes(), &pods);
    assert!(
        out.plan.deletes.is_empty(),
        "no old pod deleted before its replacement is available (#627)"
    );
    assert!(out.plan.creates.is_empty());

    // Available: the old one goes (#1012), and the next node surges.
    let mut pods = old_pods(&ds);
    pods.push(pod(&ds, "a", V2, 5));
    let out = sync(&ds, &three_nodes(), &pods);
    assert_eq!(deleted(&out), [("agent-a-0", DeleteReason::RecreateUpdate)]);
    assert_eq!(created_on(&out), ["b"]);
}

#[test]
fn a_surged_pod_waiting_for_min_ready_seconds_is_looked_at_again_when_it_is_available() {
    let mut ds = surging(1, 0);
    ds.spec.min_ready_seconds = 10;
    // Ready since 995, now 1000: available at 1005. Its node still counts as available
    // (the old pod is), so only this requeue brings the sync back to move on.
    let mut pods = old_pods(&ds);
    pods.push(pod(&ds, "a", V2, 995));
    let out = sync(&ds, &three_nodes(), &pods);
    assert!(out.plan.deletes.is_empty() && out.plan.creates.is_empty());
    assert_eq!(
        out.plan.requeue_after,
        Some(std::time::Duration::from_secs(5))
    );

    // Not ready yet: its readiness is an event of its own, no requeue needed.
    let mut pods = old_pods(&ds);
    pods.push(unready(pod(&ds, "a", V2, 995)));
    assert_eq!(sync(&ds, &three_nodes(), &pods).plan.requeue_after, None);
}

#[test]
fn surge_replaces_unavailable_old_pods_at_once_and_keeps_the_partition() {
    let ds = surging(1, 0);
    let mut pods = old_pods(&ds);
    pods[2] = unready(pods[2].clone());
    let out = sync(&ds, &three_nodes(), &pods);
    assert_eq!(
        created_on(&out),
        ["c", "a"],
        "the unavailable node costs no surge"
    );

    let held = surging(3, 2);
    let out = sync(&held, &three_nodes(), &old_pods(&held));
    assert_eq!(
        out.plan.creates.len(),
        1,
        "partition 2 of 3 leaves one node to move"
    );
}

#[test]
fn burst_replicas_never_plans_more_than_one_sync_of_creates() {
    use crate::workload::plan::MAX_CREATES_PER_SYNC as CAP;
    let nodes: Vec<Node> = (0..700).map(|i| node(&format!("n{i:03}"))).collect();
    // (case, burstReplicas, creates)
    let cases = [
        ("100% of 700 nodes", IntOrString::String("100%".into()), CAP),
        ("int32 max", IntOrString::Int(i32::MAX), CAP),
        ("the default 250", IntOrString::Int(250), 250),
        ("0 still creates one", IntOrString::Int(0), 1),
    ];
    for (name, burst, want) in cases {
        let mut ds = standard();
        ds.spec.burst_replicas = Some(burst);
        let out = sync(&ds, &nodes, &[]);
        assert_eq!(created_on(&out).len(), want, "{name}");
        assert_eq!(created_on(&out).first().copied(), Some("n000"), "{name}");
    }
}

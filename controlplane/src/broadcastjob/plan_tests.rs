use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, NodeSpec, NodeStatus, PodSpec, PodStatus, PodTemplateSpec,
    ResourceRequirements, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;
use crate::api::BroadcastJob;
use crate::api::broadcastjob::FailurePolicy;
use crate::api::common::CompletionPolicy;
use crate::broadcastjob::pods::new_pod;

const NOW: i64 = 1_000_000;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).expect("a valid time")
}

fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

fn nodes(count: usize) -> Vec<Node> {
    (0..count).map(|i| node(&format!("n{i}"))).collect()
}

fn tainted(name: &str) -> Node {
    let mut node = node(name);
    node.spec = Some(NodeSpec {
        taints: Some(vec![Taint {
            key: "maintenance".to_owned(),
            effect: "NoSchedule".to_owned(),
            ..Taint::default()
        }]),
        ..NodeSpec::default()
    });
    node
}

fn spec() -> BroadcastJobSpec {
    BroadcastJobSpec {
        template: PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                restart_policy: Some("OnFailure".to_owned()),
                ..PodSpec::default()
            }),
        },
        ..BroadcastJobSpec::default()
    }
}

fn with_parallelism(value: IntOrString) -> BroadcastJobSpec {
    BroadcastJobSpec {
        parallelism: Some(value),
        ..spec()
    }
}

fn with_failure(type_: FailurePolicyType, restart_limit: i32) -> BroadcastJobSpec {
    BroadcastJobSpec {
        failure_policy: FailurePolicy {
            type_: Some(type_),
            restart_limit,
        },
        ..spec()
    }
}

fn with_completion(policy: CompletionPolicy) -> BroadcastJobSpec {
    BroadcastJobSpec {
        completion_policy: policy,
        ..spec()
    }
}

fn never() -> BroadcastJobSpec {
    with_completion(CompletionPolicy {
        type_: Some(CompletionPolicyType::Never),
        ..CompletionPolicy::default()
    })
}

/// The job's pod on `node` in `phase` (None: not yet started), with `restarts`.
fn pod(node: &str, phase: Option<&str>, restarts: i32) -> Pod {
    let mut job = BroadcastJob::new("job", spec());
    job.metadata.uid = Some("job-uid".to_owned());
    let mut pod = new_pod(&job, node).expect("a pod");
    pod.metadata.name = Some(format!("job-{node}"));
    pod.metadata.uid = Some(format!("uid-{node}"));
    pod.status = Some(PodStatus {
        phase: phase.map(str::to_owned),
        container_statuses: Some(vec![ContainerStatus {
            restart_count: restarts,
            ..ContainerStatus::default()
        }]),
        ..PodStatus::default()
    });
    pod
}

fn started(secs_ago: i64) -> BroadcastJobStatus {
    BroadcastJobStatus {
        start_time: Some(Time(at(NOW - secs_ago))),
        ..BroadcastJobStatus::default()
    }
}

fn run(spec: &BroadcastJobSpec, status: &BroadcastJobStatus, nodes: &[Node], pods: &[Pod]) -> Plan {
    plan(&Snapshot {
        spec,
        status,
        nodes,
        pods,
        backing_off: &BTreeSet::new(),
        now: at(NOW),
    })
}

fn names(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_owned()).collect()
}

/// (case, spec, nodes, pods, nodes created on, desired, active)
type ParallelismCase = (
    &'static str,
    BroadcastJobSpec,
    Vec<Node>,
    Vec<Pod>,
    Vec<String>,
    i32,
    i32,
);

#[test]
fn parallelism_bounds_the_active_pods() {
    let none = BroadcastJobStatus::default();
    let cases: Vec<ParallelismCase> = vec![
        (
            "unset: no limit",
            spec(),
            nodes(3),
            vec![],
            names(&["n0", "n1", "n2"]),
            3,
            3,
        ),
        (
            "an integer",
            with_parallelism(IntOrString::Int(2)),
            nodes(5),
            vec![],
            names(&["n0", "n1"]),
            5,
            2,
        ),
        (
            "a percentage of the desired pods, rounded up",
            with_parallelism(IntOrString::String("25%".to_owned())),
            nodes(10),
            vec![],
            names(&["n0", "n1", "n2"]),
            10,
            3,
        ),
        (
            "running pods hold their slots",
            with_parallelism(IntOrString::Int(2)),
            nodes(5),
            vec![pod("n0", Some("Running"), 0), pod("n1", None, 0)],
            vec![],
            5,
            2,
        ),
        (
            "a finished pod frees its slot",
            with_parallelism(IntOrString::Int(2)),
            nodes(4),
            vec![
                pod("n0", Some("Succeeded"), 0),
                pod("n1", Some("Running"), 0),
            ],
            names(&["n2"]),
            4,
            2,
        ),
        (
            "zero creates nothing",
            with_parallelism(IntOrString::Int(0)),
            nodes(2),
            vec![],
            vec![],
            2,
            0,
        ),
    ];
    for (case, spec, nodes, pods, created, desired, active) in cases {
        let plan = run(&spec, &none, &nodes, &pods);
        assert_eq!(plan.create_on, created, "{case}");
        assert_eq!(plan.status.desired, desired, "{case}: desired");
        assert_eq!(plan.status.active, active, "{case}: active");
        assert_eq!(plan.status.phase, BroadcastJobPhase::Running, "{case}");
    }
}

#[test]
fn completion_always_completes_once_every_node_finished_never_keeps_running() {
    let pods = vec![
        pod("n0", Some("Succeeded"), 0),
        pod("n1", Some("Succeeded"), 0),
    ];
    let always = run(&spec(), &started(10), &nodes(2), &pods);
    assert_eq!(always.status.phase, BroadcastJobPhase::Completed);
    assert_eq!(always.status.completion_time, Some(Time(at(NOW))));
    let complete = find(&always.status.conditions, CONDITION_COMPLETE).expect("Complete");
    assert_eq!(complete.status, "True");
    assert_eq!(
        always.events.iter().map(|e| e.reason).collect::<Vec<_>>(),
        ["Completed"]
    );

    let never = run(&never(), &started(10), &nodes(2), &pods);
    assert_eq!(never.status.phase, BroadcastJobPhase::Running);
    assert_eq!(never.status.completion_time, None);
    assert!(never.status.conditions.is_empty());
    assert_eq!(never.status.succeeded, 2);

    let not_yet = run(&spec(), &started(10), &nodes(3), &pods);
    assert_eq!(not_yet.create_on, names(&["n2"]));
    assert_eq!(not_yet.status.phase, BroadcastJobPhase::Running);
}

#[test]
fn a_finished_job_does_nothing_but_its_ttl() {
    let finished = |secs_ago: i64| BroadcastJobStatus {
        completion_time: Some(Time(at(NOW - secs_ago))),
        phase: BroadcastJobPhase::Completed,
        ..started(100)
    };
    let ttl = |seconds: i32| {
        with_completion(CompletionPolicy {
            ttl_seconds_after_finished: Some(seconds),
            ..CompletionPolicy::default()
        })
    };
    let waiting = run(&ttl(60), &finished(20), &nodes(3), &[]);
    assert!(
        waiting.create_on.is_empty(),
        "a new node after completion gets nothing"
    );
    assert!(!waiting.delete_job);
    assert_eq!(waiting.requeue_after, Some(Duration::from_secs(40)));

    let expired = run(&ttl(60), &finished(60), &nodes(3), &[]);
    assert!(expired.delete_job);
    assert_eq!(expired.events[0].reason, "Deleting");

    let no_ttl = run(&spec(), &finished(1_000), &nodes(3), &[]);
    assert!(!no_ttl.delete_job);
    assert_eq!(no_ttl.requeue_after, None);

    let at_once = run(
        &ttl(0),
        &started(5),
        &nodes(1),
        &[pod("n0", Some("Succeeded"), 0)],
    );
    assert_eq!(at_once.status.phase, BroadcastJobPhase::Completed);
    assert!(at_once.delete_job, "ttl 0 deletes as the job completes");
}

#[test]
fn the_deadline_fails_the_job_and_stops_its_pods() {
    let deadline = with_completion(CompletionPolicy {
        active_deadline_seconds: Some(60),
        ..CompletionPolicy::default()
    });
    let pods = vec![
        pod("n0", Some("Running"), 0),
        pod("n1", Some("Succeeded"), 0),
    ];

    let early = run(&deadline, &started(45), &nodes(3), &pods);
    assert_eq!(early.status.phase, BroadcastJobPhase::Running);
    assert_eq!(
        early.requeue_after,
        Some(Duration::from_secs(15)),
        "looks again at the deadline"
    );

    let late = run(&deadline, &started(60), &nodes(3), &pods);
    assert_eq!(late.status.phase, BroadcastJobPhase::Failed);
    let failed = find(&late.status.conditions, CONDITION_FAILED).expect("Failed");
    assert_eq!(failed.reason, "DeadlineExceeded");
    assert!(late.create_on.is_empty());
    assert_eq!(
        late.delete
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>(),
        ["job-n0"]
    );
    assert_eq!(late.delete[0].uid, "uid-n0");
    assert_eq!(late.status.completion_time, Some(Time(at(NOW))));
}

#[test]
fn failure_policies() {
    let pods = vec![pod("n0", Some("Failed"), 0), pod("n1", Some("Running"), 0)];
    let status = started(10);

    let fail_fast = run(
        &with_failure(FailurePolicyType::FailFast, 0),
        &status,
        &nodes(3),
        &pods,
    );
    assert_eq!(fail_fast.status.phase, BroadcastJobPhase::Failed);
    let failed = find(&fail_fast.status.conditions, CONDITION_FAILED).expect("Failed");
    assert_eq!(failed.reason, "BackoffLimitExceeded");
    assert_eq!(
        fail_fast
            .delete
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>(),
        ["job-n1"]
    );
    assert!(fail_fast.create_on.is_empty());

    let proceed = run(
        &with_failure(FailurePolicyType::Continue, 0),
        &status,
        &nodes(3),
        &pods,
    );
    assert_eq!(proceed.status.phase, BroadcastJobPhase::Running);
    assert_eq!(
        proceed.create_on,
        names(&["n2"]),
        "the failed node gets no second pod"
    );
    assert_eq!(proceed.status.failed, 1);

    let pause = run(
        &with_failure(FailurePolicyType::Pause, 0),
        &status,
        &nodes(3),
        &pods,
    );
    assert!(pause.pause);
    assert!(pause.create_on.is_empty());
    assert_eq!(pause.status.phase, BroadcastJobPhase::Paused);
    assert_eq!(pause.events[0].reason, "Paused");

    // The person lifted the pause: the same failed pod does not pause the job again.
    let lifted_status = BroadcastJobStatus {
        failed: 1,
        ..status.clone()
    };
    let lifted = run(
        &with_failure(FailurePolicyType::Pause, 0),
        &lifted_status,
        &nodes(3),
        &pods,
    );
    assert!(!lifted.pause);
    assert_eq!(lifted.create_on, names(&["n2"]));
}

#[test]
fn a_job_with_failed_pods_under_continue_completes_when_every_node_finished() {
    let pods = vec![
        pod("n0", Some("Failed"), 0),
        pod("n1", Some("Succeeded"), 0),
    ];
    let plan = run(
        &with_failure(FailurePolicyType::Continue, 0),
        &started(5),
        &nodes(2),
        &pods,
    );
    assert_eq!(plan.status.phase, BroadcastJobPhase::Completed);
    assert_eq!((plan.status.succeeded, plan.status.failed), (1, 1));
}

#[test]
fn restarts_past_the_limit_count_as_failed() {
    // (case, restart limit, restarts of the running pod, failed, phase)
    let cases = [
        ("under the limit", 5, 3, 0, BroadcastJobPhase::Running),
        ("at the limit", 3, 3, 0, BroadcastJobPhase::Running),
        ("over the limit", 2, 3, 1, BroadcastJobPhase::Failed),
        (
            "limit 0: the first restart",
            0,
            1,
            1,
            BroadcastJobPhase::Failed,
        ),
    ];
    for (case, limit, restarts, failed, phase) in cases {
        let pods = vec![pod("n0", Some("Running"), restarts)];
        let plan = run(
            &with_failure(FailurePolicyType::FailFast, limit),
            &started(5),
            &nodes(2),
            &pods,
        );
        assert_eq!(plan.status.failed, failed, "{case}");
        assert_eq!(plan.status.phase, phase, "{case}");
        if failed == 1 {
            let condition = find(&plan.status.conditions, CONDITION_FAILED).expect("Failed");
            assert_eq!(condition.reason, "RestartLimitExceeded", "{case}");
            assert_eq!(
                plan.delete.len(),
                1,
                "{case}: the restarting pod is stopped"
            );
        }
    }
    // restartPolicy Never: restarts do not happen, the phase decides.
    let mut never_restarts = pod("n0", Some("Running"), 4);
    if let Some(spec) = never_restarts.spec.as_mut() {
        spec.restart_policy = Some("Never".to_owned());
    }
    let plan = run(
        &with_failure(FailurePolicyType::FailFast, 0),
        &started(5),
        &nodes(1),
        &[never_restarts],
    );
    assert_eq!(plan.status.failed, 0);
}

#[test]
fn nodes_added_later_and_nodes_whose_taint_is_removed_get_their_pod() {
    let done = vec![pod("n0", Some("Succeeded"), 0)];
    let grown = run(&never(), &started(5), &nodes(2), &done);
    assert_eq!(grown.create_on, names(&["n1"]), "a node added later");

    let blocked = run(&never(), &started(5), &[node("n0"), tainted("n1")], &done);
    assert!(
        blocked.create_on.is_empty(),
        "a NoSchedule taint keeps the pod off"
    );
    assert_eq!(blocked.status.desired, 1);

    let cleared = run(&never(), &started(5), &[node("n0"), node("n1")], &done);
    assert_eq!(cleared.create_on, names(&["n1"]), "the taint was removed");
    assert_eq!(cleared.status.desired, 2);
}

/// A node of `cpu` allocatable CPU and room for `pods` pods.
fn sized(name: &str, cpu: &str, pods: &str) -> Node {
    let mut node = node(name);
    node.status = Some(NodeStatus {
        allocatable: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("pods".to_owned(), Quantity(pods.to_owned())),
        ])),
        ..NodeStatus::default()
    });
    node
}

fn requesting_cpu(cpu: &str) -> BroadcastJobSpec {
    let mut spec = spec();
    let pod = spec.template.spec.as_mut().expect("a pod spec");
    pod.containers = vec![Container {
        name: "task".to_owned(),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([(
                "cpu".to_owned(),
                Quantity(cpu.to_owned()),
            )])),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    }];
    spec
}

#[test]
fn a_node_whose_allocatable_cannot_hold_the_pod_is_not_desired() {
    // OpenKruise judges the pod's requests against allocatable alone: pods already on a
    // node never make it undesired (the planner is not even given them); the scheduler
    // waits for room. (case, node, desired and given a pod)
    let cases = [
        ("requests within allocatable", sized("n0", "2", "110"), true),
        (
            "requests equal to allocatable",
            sized("n0", "500m", "110"),
            true,
        ),
        (
            "more cpu than the node has",
            sized("n0", "250m", "110"),
            false,
        ),
        ("a node that runs no pods", sized("n0", "4", "0"), false),
        ("a node reporting nothing yet", node("n0"), true),
    ];
    for (case, node, fits) in cases {
        let plan = run(
            &requesting_cpu("500m"),
            &started(5),
            std::slice::from_ref(&node),
            &[],
        );
        let expected = if fits { names(&["n0"]) } else { vec![] };
        assert_eq!(plan.create_on, expected, "{case}: created on");
        assert_eq!(plan.status.desired, i32::from(fits), "{case}: desired");
    }
}

#[test]
fn paused_creates_nothing() {
    let paused = BroadcastJobSpec {
        paused: true,
        ..spec()
    };
    let plan = run(
        &paused,
        &started(5),
        &nodes(2),
        &[pod("n0", Some("Running"), 0)],
    );
    assert!(plan.create_on.is_empty());
    assert_eq!(plan.status.phase, BroadcastJobPhase::Paused);
    assert_eq!(plan.status.active, 1);
}

#[test]
fn the_start_time_is_set_once() {
    let first = run(&spec(), &BroadcastJobStatus::default(), &nodes(1), &[]);
    assert_eq!(first.status.start_time, Some(Time(at(NOW))));
    let later = run(&spec(), &started(30), &nodes(1), &[]);
    assert_eq!(later.status.start_time, Some(Time(at(NOW - 30))));
}

#[test]
fn a_node_whose_create_backs_off_gets_no_pod_and_keeps_the_job_open() {
    let backing_off = BTreeSet::from(["n1".to_owned()]);
    let plan = plan(&Snapshot {
        spec: &spec(),
        status: &started(5),
        nodes: &nodes(2),
        pods: &[pod("n0", Some("Succeeded"), 0)],
        backing_off: &backing_off,
        now: at(NOW),
    });
    assert!(plan.create_on.is_empty());
    assert_eq!(plan.status.desired, 2);
    assert_eq!(plan.status.phase, BroadcastJobPhase::Running);
}

#[test]
fn one_sync_creates_no_more_than_the_pod_set_executor_would() {
    use crate::workload::plan::MAX_CREATES_PER_SYNC as CAP;
    let none = BroadcastJobStatus::default();
    // (case, parallelism, creates)
    let cases = [
        ("unset", spec(), CAP),
        (
            "int32 max",
            with_parallelism(IntOrString::Int(i32::MAX)),
            CAP,
        ),
        (
            "100%",
            with_parallelism(IntOrString::String("100%".into())),
            CAP,
        ),
        ("below the cap", with_parallelism(IntOrString::Int(40)), 40),
    ];
    let many = nodes(700);
    for (name, spec, want) in cases {
        let plan = run(&spec, &none, &many, &[]);
        assert_eq!(plan.create_on.len(), want, "{name}");
        assert_eq!(plan.status.desired, 700, "{name}");
        assert_eq!(
            plan.status.active,
            i32::try_from(want).unwrap_or(i32::MAX),
            "{name}"
        );
    }
}

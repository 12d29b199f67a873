use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use super::plan::{
    MESSAGE_COMPLETED, MESSAGE_DEADLINE, NodeImage, Plan, REPULL_INTERVAL, Snapshot, entry_for,
    parallelism, plan,
};
use crate::api::common::{CompletionPolicy, CompletionPolicyType};
use crate::api::imagelist::{ImageListEntry, ImagePullPhase, ImageStatus, PullSecretReference};
use crate::api::imagepulljob::{
    ImagePullJob, ImagePullJobNodeSelector, ImagePullJobSpec, ImagePullJobStatus, ImagePullPolicy,
    PullPolicy,
};

const IMAGE: &str = "registry.local:5000/app:v1";

fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).expect("valid")
}

fn node(name: &str, labels: &[(&str, &str)], ready: bool) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        }),
        ..Node::default()
    }
}

fn nodes(n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| node(&format!("node-{i}"), &[], true))
        .collect()
}

fn job(spec: ImagePullJobSpec) -> ImagePullJob {
    let mut job = ImagePullJob::new("warm", spec);
    job.metadata.namespace = Some("ns".into());
    job
}

fn spec() -> ImagePullJobSpec {
    ImagePullJobSpec {
        image: IMAGE.into(),
        ..ImagePullJobSpec::default()
    }
}

fn started(mut job: ImagePullJob, at: i64) -> ImagePullJob {
    let status = job.status.get_or_insert_with(ImagePullJobStatus::default);
    status.start_time = Some(Time(t(at)));
    job
}

/// The job's entry on a node, with the image in `phase` (None: no status yet).
fn owned(job: &ImagePullJob, phase: Option<ImagePullPhase>) -> NodeImage {
    NodeImage {
        owned: Some(entry_for(job, false)),
        status: phase.map(|phase| ImageStatus {
            phase,
            last_pull_time: Some(Time(t(5))),
            message: "boom".into(),
            ..ImageStatus::default()
        }),
    }
}

fn bare() -> NodeImage {
    NodeImage::default()
}

fn run(job: &ImagePullJob, nodes: &[Node], lists: Vec<(&str, NodeImage)>, now: i64) -> Plan {
    run_with_pods(job, nodes, &[], lists, now)
}

fn run_with_pods(
    job: &ImagePullJob,
    nodes: &[Node],
    pods: &[Pod],
    lists: Vec<(&str, NodeImage)>,
    now: i64,
) -> Plan {
    plan(&Snapshot {
        job,
        nodes: nodes.iter().collect(),
        pods: pods.iter().collect(),
        lists: lists
            .into_iter()
            .map(|(n, image)| (n.to_owned(), image))
            .collect(),
        now: t(now),
    })
}

fn applied(plan: &Plan) -> Vec<&str> {
    plan.apply.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn parallelism_resolves_integers_and_rounds_percentages_up() {
    let table = [
        (IntOrString::Int(1), 3, 1),
        (IntOrString::Int(0), 3, 0),
        (IntOrString::Int(5), 3, 5),
        (IntOrString::Int(-1), 3, 0),
        (IntOrString::String("50%".into()), 3, 2),
        (IntOrString::String("10%".into()), 3, 1),
        (IntOrString::String("100%".into()), 4, 4),
        (IntOrString::String("0%".into()), 4, 0),
        (IntOrString::String("30%".into()), 0, 0),
    ];
    for (value, desired, want) in table {
        assert_eq!(parallelism(&value, desired), want, "{value:?} of {desired}");
    }
}

#[test]
fn parallelism_one_over_three_nodes_starts_one_at_a_time() {
    let nodes = nodes(3);
    let j = job(spec());
    // (lists, want applied, want active, want succeeded)
    let all_bare = || vec![("node-0", bare()), ("node-1", bare()), ("node-2", bare())];
    let p = run(&j, &nodes, all_bare(), 0);
    assert_eq!(applied(&p), ["node-0"]);
    assert_eq!((p.status.desired, p.status.active), (3, 1));
    assert_eq!(p.status.start_time, Some(Time(t(0))));

    let j = started(j, 0);
    type Case<'a> = (Vec<(&'a str, NodeImage)>, Vec<&'a str>, i32, i32);
    let table: [Case<'_>; 4] = [
        // node-0 still pulling: nothing else starts.
        (
            vec![
                ("node-0", owned(&j, Some(ImagePullPhase::Pulling))),
                ("node-1", bare()),
                ("node-2", bare()),
            ],
            vec![],
            1,
            0,
        ),
        // Our entry with no status yet counts as active too.
        (
            vec![
                ("node-0", owned(&j, None)),
                ("node-1", bare()),
                ("node-2", bare()),
            ],
            vec![],
            1,
            0,
        ),
        // node-0 done: its slot goes to node-1.
        (
            vec![
                ("node-0", owned(&j, Some(ImagePullPhase::Succeeded))),
                ("node-1", bare()),
                ("node-2", bare()),
            ],
            vec!["node-1"],
            1,
            1,
        ),
        // A failed node holds no slot either.
        (
            vec![
                ("node-0", owned(&j, Some(ImagePullPhase::Succeeded))),
                ("node-1", owned(&j, Some(ImagePullPhase::Failed))),
                ("node-2", bare()),
            ],
            vec!["node-2"],
            1,
            1,
        ),
    ];
    for (lists, want, active, succeeded) in table {
        let p = run(&j, &nodes, lists, 10);
        assert_eq!(applied(&p), want);
        assert_eq!((p.status.active, p.status.succeeded), (active, succeeded));
        assert!(p.release.is_empty());
        assert_eq!(p.status.completion_time, None);
    }
}

#[test]
fn percent_parallelism_is_a_share_of_the_desired_nodes() {
    let nodes = nodes(5);
    let j = job(ImagePullJobSpec {
        parallelism: Some(IntOrString::String("40%".into())),
        ..spec()
    });
    let lists = (0..5)
        .map(|i| {
            (
                ["node-0", "node-1", "node-2", "node-3", "node-4"][i],
                bare(),
            )
        })
        .collect();
    let p = run(&j, &nodes, lists, 0);
    assert_eq!(applied(&p), ["node-0", "node-1"]);
    assert_eq!(p.status.active, 2);

    let paused = job(ImagePullJobSpec {
        parallelism: Some(IntOrString::Int(0)),
        ..spec()
    });
    let p = run(&paused, &nodes, vec![("node-0", bare())], 0);
    assert!(p.apply.is_empty());
    assert!(p.status.message.contains("paused"), "{}", p.status.message);
}

#[test]
fn always_completes_when_every_node_finished_and_removes_its_entries() {
    let nodes = nodes(3);
    let j = started(job(spec()), 0);
    let p = run(
        &j,
        &nodes,
        vec![
            ("node-0", owned(&j, Some(ImagePullPhase::Succeeded))),
            ("node-1", owned(&j, Some(ImagePullPhase::Failed))),
            ("node-2", owned(&j, Some(ImagePullPhase::Succeeded))),
        ],
        30,
    );
    assert_eq!(p.status.completion_time, Some(Time(t(30))));
    assert_eq!(p.status.message, MESSAGE_COMPLETED);
    assert_eq!(
        (
            p.status.desired,
            p.status.active,
            p.status.succeeded,
            p.status.failed
        ),
        (3, 0, 2, 1)
    );
    assert_eq!(p.status.failed_nodes, ["node-1"]);
    assert_eq!(p.release, ["node-0", "node-1", "node-2"]);
    assert!(p.apply.is_empty());
    assert!(!p.delete_job, "no ttl: kept");
    let reasons: Vec<_> = p.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, ["PullFailed", "Completed"]);

    // Completed before: status kept, any entry left is released, nothing restarts.
    let mut done = j.clone();
    done.status = Some(p.status.clone());
    let p2 = run(
        &done,
        &nodes,
        vec![("node-0", owned(&j, None)), ("node-1", bare())],
        40,
    );
    assert_eq!(p2.status, p.status);
    assert_eq!(p2.release, ["node-0"]);
    assert!(p2.apply.is_empty());
}

#[test]
fn nodes_without_an_imagelist_wait_and_keep_the_job_running() {
    let nodes = nodes(2);
    let j = started(job(spec()), 0);
    let p = run(
        &j,
        &nodes,
        vec![("node-0", owned(&j, Some(ImagePullPhase::Succeeded)))],
        5,
    );
    assert_eq!(p.status.completion_time, None);
    assert_eq!(p.status.desired, 2);
    assert!(p.status.message.contains("waiting for the ImageList of 1"));
    assert_eq!(p.requeue_after, Some(Duration::from_secs(10)));
}

#[test]
fn the_deadline_fails_the_nodes_that_have_not_finished() {
    let nodes = nodes(3);
    let j = started(
        job(ImagePullJobSpec {
            completion_policy: CompletionPolicy {
                active_deadline_seconds: Some(600),
                ..CompletionPolicy::default()
            },
            ..spec()
        }),
        0,
    );
    let lists = || {
        vec![
            ("node-0", owned(&j, Some(ImagePullPhase::Succeeded))),
            ("node-1", owned(&j, Some(ImagePullPhase::Pulling))),
            ("node-2", bare()),
        ]
    };
    let before = run(&j, &nodes, lists(), 100);
    assert_eq!(before.status.completion_time, None);
    assert_eq!(before.requeue_after, Some(Duration::from_secs(500)));

    let p = run(&j, &nodes, lists(), 600);
    assert_eq!(p.status.completion_time, Some(Time(t(600))));
    assert_eq!(p.status.message, MESSAGE_DEADLINE);
    assert_eq!(p.status.failed_nodes, ["node-1", "node-2"]);
    assert_eq!(
        (p.status.succeeded, p.status.failed, p.status.active),
        (1, 2, 0)
    );
    assert_eq!(p.release, ["node-0", "node-1"]);
    assert!(p.apply.is_empty());
    assert!(
        p.events
            .iter()
            .any(|e| e.reason == "DeadlineExceeded" && e.warning)
    );
}

#[test]
fn ttl_deletes_the_job_after_it_finished() {
    let nodes = nodes(1);
    let ttl_job = |ttl: i32| {
        let mut j = started(
            job(ImagePullJobSpec {
                completion_policy: CompletionPolicy {
                    ttl_seconds_after_finished: Some(ttl),
                    ..CompletionPolicy::default()
                },
                ..spec()
            }),
            0,
        );
        j.status.as_mut().expect("status").completion_time = Some(Time(t(10)));
        j
    };
    // (ttl, now, delete, requeue)
    let table = [
        (30, 20, false, Some(Duration::from_secs(20))),
        (30, 40, true, None),
        (0, 10, true, None),
    ];
    for (ttl, now, delete, requeue) in table {
        let p = run(&ttl_job(ttl), &nodes, vec![("node-0", bare())], now);
        assert_eq!(
            (p.delete_job, p.requeue_after),
            (delete, requeue),
            "{ttl} {now}"
        );
    }
    // ttl 0 deletes in the same reconcile that completes the job.
    let mut j = ttl_job(0);
    j.status.as_mut().expect("status").completion_time = None;
    let p = run(
        &j,
        &nodes,
        vec![("node-0", owned(&j, Some(ImagePullPhase::Succeeded)))],
        10,
    );
    assert!(p.status.completion_time.is_some() && p.delete_job);
}

#[test]
fn never_pulls_on_nodes_added_later_and_repulls_daily_where_done() {
    let never = |spec: ImagePullJobSpec| {
        started(
            job(ImagePullJobSpec {
                completion_policy: CompletionPolicy {
                    type_: Some(CompletionPolicyType::Never),
                    ..CompletionPolicy::default()
                },
                parallelism: Some(IntOrString::Int(2)),
                ..spec
            }),
            0,
        )
    };
    let j = never(spec());
    let mut nodes = nodes(2);
    let p = run(
        &j,
        &nodes,
        vec![
            ("node-0", owned(&j, Some(ImagePullPhase::Succeeded))),
            ("node-1", owned(&j, Some(ImagePullPhase::Succeeded))),
        ],
        10,
    );
    assert_eq!(p.status.completion_time, None, "Never never completes");
    let repull = ImageListEntry {
        always_pull: true,
        pull_interval: Some(REPULL_INTERVAL.into()),
        ..ImageListEntry::default()
    };
    assert_eq!(
        p.apply,
        [
            ("node-0".to_owned(), repull.clone()),
            ("node-1".to_owned(), repull.clone())
        ]
    );

    nodes.push(node("node-2", &[], true));
    let done = NodeImage {
        owned: Some(repull),
        status: owned(&j, Some(ImagePullPhase::Succeeded)).status,
    };
    let p = run(
        &j,
        &nodes,
        vec![
            ("node-0", done.clone()),
            ("node-1", done),
            ("node-2", bare()),
        ],
        20,
    );
    assert_eq!(
        applied(&p),
        ["node-2"],
        "the new node pulls; the others are up to date"
    );
    assert_eq!(p.apply[0].1, entry_for(&j, false));
    assert_eq!(
        (p.status.desired, p.status.succeeded, p.status.active),
        (3, 2, 1)
    );
    assert_eq!(p.status.completion_time, None);

    // The switch to the re-pull entry changed the spec; until the agent reports on it the
    // node stays done, and the entry is not flipped back.
    let switched = NodeImage {
        owned: Some(entry_for(&j, true)),
        status: None,
    };
    let p = run(&j, &nodes[..1], vec![("node-0", switched)], 30);
    assert!(p.apply.is_empty(), "{:?}", p.apply);
    assert_eq!((p.status.succeeded, p.status.active), (1, 0));
}

#[test]
fn nodes_are_chosen_by_name_or_by_labels_and_must_be_ready() {
    let nodes = vec![
        node("a", &[("pool", "gpu")], true),
        node("b", &[("pool", "cpu")], true),
        node("c", &[("pool", "gpu")], false),
        node("d", &[("pool", "gpu")], true),
    ];
    let labels = |pool: &str| ImagePullJobNodeSelector {
        match_labels: Some(BTreeMap::from([("pool".to_owned(), pool.to_owned())])),
        ..ImagePullJobNodeSelector::default()
    };
    let names = |names: &[&str]| ImagePullJobNodeSelector {
        names: Some(names.iter().map(|n| (*n).to_owned()).collect()),
        ..ImagePullJobNodeSelector::default()
    };
    // (selector, desired)
    let table: [(Option<ImagePullJobNodeSelector>, i32); 5] = [
        (None, 3),
        (Some(labels("gpu")), 2),
        (Some(labels("none")), 0),
        (Some(names(&["b", "c", "zz"])), 1),
        (Some(names(&["a", "d"])), 2),
    ];
    let all = || ["a", "b", "c", "d"].map(|n| (n, bare())).to_vec();
    for (selector, desired) in table {
        let j = job(ImagePullJobSpec {
            selector: selector.clone(),
            parallelism: Some(IntOrString::String("100%".into())),
            ..spec()
        });
        let p = run(&j, &nodes, all(), 0);
        assert_eq!(p.status.desired, desired, "{selector:?}");
        assert_eq!(p.apply.len(), usize::try_from(desired).expect("small"));
    }
    // A not-ready node the job already pulls on stays.
    let j = job(ImagePullJobSpec {
        selector: Some(labels("gpu")),
        ..spec()
    });
    let p = run(&j, &nodes, vec![("c", owned(&j, None)), ("a", bare())], 0);
    assert_eq!(p.status.desired, 3);
    assert_eq!(p.status.active, 1);
    // A node that no longer matches loses the entry.
    let p = run(&j, &nodes, vec![("b", owned(&j, None)), ("a", bare())], 0);
    assert_eq!(p.release, ["b"]);
    assert_eq!(applied(&p), ["a"]);
}

fn pod(name: &str, namespace: &str, app: &str, node: Option<&str>, phase: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([("app".to_owned(), app.to_owned())])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(str::to_owned),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            ..PodStatus::default()
        }),
    }
}

#[test]
fn pod_selector_picks_the_nodes_of_running_matching_pods_in_the_namespace() {
    let nodes = nodes(5);
    let pods = [
        pod("web-0", "ns", "web", Some("node-1"), "Running"),
        pod("web-1", "ns", "web", Some("node-3"), "Pending"),
        pod("web-2", "ns", "web", None, "Pending"),
        pod("web-3", "ns", "web", Some("node-4"), "Succeeded"),
        pod("web-4", "other", "web", Some("node-0"), "Running"),
        pod("db-0", "ns", "db", Some("node-2"), "Running"),
    ];
    let j = job(ImagePullJobSpec {
        pod_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
            ..LabelSelector::default()
        }),
        parallelism: Some(IntOrString::Int(10)),
        ..spec()
    });
    let lists = (0..5)
        .map(|i| {
            (
                ["node-0", "node-1", "node-2", "node-3", "node-4"][i],
                bare(),
            )
        })
        .collect();
    let p = run_with_pods(&j, &nodes, &pods, lists, 0);
    assert_eq!(applied(&p), ["node-1", "node-3"]);
    assert_eq!(p.status.desired, 2);
}

#[test]
fn failed_nodes_are_listed_and_reported_once() {
    let nodes = nodes(3);
    let j = started(
        job(ImagePullJobSpec {
            parallelism: Some(IntOrString::Int(3)),
            ..spec()
        }),
        0,
    );
    let lists = || {
        vec![
            ("node-0", owned(&j, Some(ImagePullPhase::Failed))),
            ("node-1", owned(&j, Some(ImagePullPhase::Pulling))),
            ("node-2", owned(&j, Some(ImagePullPhase::Failed))),
        ]
    };
    let p = run(&j, &nodes, lists(), 10);
    assert_eq!(p.status.failed_nodes, ["node-0", "node-2"]);
    assert_eq!((p.status.failed, p.status.active), (2, 1));
    let failed_events: Vec<_> = p
        .events
        .iter()
        .filter(|e| e.reason == "PullFailed")
        .collect();
    assert_eq!(failed_events.len(), 2);
    assert!(failed_events[0].note.contains("node-0") && failed_events[0].note.contains("boom"));

    let mut again = j.clone();
    again.status = Some(p.status.clone());
    let p = run(&again, &nodes, lists(), 20);
    assert!(
        p.events.iter().all(|e| e.reason != "PullFailed"),
        "{:?}",
        p.events
    );
}

#[test]
fn a_failed_node_whose_retry_succeeds_counts_as_succeeded() {
    // The agent retries a Failed image with backoff while the entry stays; while another
    // node still pulls, a retry that succeeds moves the node from failed to succeeded.
    let nodes = nodes(2);
    let j = started(
        job(ImagePullJobSpec {
            parallelism: Some(IntOrString::Int(2)),
            ..spec()
        }),
        0,
    );
    let p = run(
        &j,
        &nodes,
        vec![
            ("node-0", owned(&j, Some(ImagePullPhase::Failed))),
            ("node-1", owned(&j, Some(ImagePullPhase::Pulling))),
        ],
        10,
    );
    assert_eq!(p.status.failed_nodes, ["node-0"]);
    let mut again = j.clone();
    again.status = Some(p.status.clone());
    let p = run(
        &again,
        &nodes,
        vec![
            ("node-0", owned(&j, Some(ImagePullPhase::Succeeded))),
            ("node-1", owned(&j, Some(ImagePullPhase::Pulling))),
        ],
        20,
    );
    assert_eq!(
        (p.status.succeeded, p.status.failed, p.status.active),
        (1, 0, 1)
    );
    assert!(p.status.failed_nodes.is_empty(), "{:?}", p.status);
    assert!(p.release.is_empty() && p.apply.is_empty(), "{p:?}");
    assert_eq!(p.status.completion_time, None);
}

#[test]
fn the_entry_carries_pull_policy_secrets_and_always_pull() {
    let j = job(ImagePullJobSpec {
        pull_secrets: vec!["regcred".into()],
        pull_policy: Some(PullPolicy {
            timeout_seconds: Some(120),
            backoff_limit: Some(1),
        }),
        image_pull_policy: Some(ImagePullPolicy::Always),
        ..spec()
    });
    assert_eq!(
        entry_for(&j, false),
        ImageListEntry {
            always_pull: true,
            pull_interval: None,
            next_pull: None,
            pull_secrets: vec![PullSecretReference {
                namespace: "ns".into(),
                name: "regcred".into(),
            }],
            timeout_seconds: Some(120),
            backoff_limit: Some(1),
        }
    );
    assert!(!entry_for(&job(spec()), false).always_pull);
}

#[test]
fn with_image_pull_policy_always_an_earlier_pull_does_not_count() {
    let nodes = nodes(1);
    let j = started(
        job(ImagePullJobSpec {
            image_pull_policy: Some(ImagePullPolicy::Always),
            ..spec()
        }),
        0,
    );
    let pulled_at = |at: i64| NodeImage {
        owned: Some(entry_for(&j, false)),
        status: Some(ImageStatus {
            phase: ImagePullPhase::Succeeded,
            last_pull_time: Some(Time(t(at))),
            ..ImageStatus::default()
        }),
    };
    let p = run(&j, &nodes, vec![("node-0", pulled_at(-100))], 10);
    assert_eq!((p.status.active, p.status.succeeded), (1, 0));
    let p = run(&j, &nodes, vec![("node-0", pulled_at(5))], 10);
    assert_eq!(p.status.succeeded, 1);
    assert!(p.status.completion_time.is_some());
}

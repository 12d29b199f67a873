//! kruise #2208: `parallelism` honoured exactly. A job runs to completion against
//! simulated agents (one step per reconcile: a new entry is first seen without status, then
//! pulling with bytes, then finished); after every reconcile exactly
//! `min(parallelism, nodes not finished)` nodes hold an unfinished pull — never more (the
//! bug), never fewer (a stalled job) — and the progress never goes back.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use super::plan::{NodeImage, Snapshot, parallelism, plan};
use crate::api::imagelist::{ImagePullPhase, ImageStatus};
use crate::api::imagepulljob::{ImagePullJob, ImagePullJobSpec};

fn ready_node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        }),
        ..Node::default()
    }
}

/// One simulated agent's view of the job's image: steps since its entry was written.
fn advance(image: &mut NodeImage, fails: bool, now: Timestamp) {
    if image.owned.is_none() {
        return;
    }
    let next = match image.status.as_ref().map(|s| s.phase) {
        // The agent has not reported on the new entry yet: now it pulls.
        None => ImageStatus {
            phase: ImagePullPhase::Pulling,
            bytes_done: 30,
            bytes_total: 100,
            ..ImageStatus::default()
        },
        Some(ImagePullPhase::Pulling) => ImageStatus {
            phase: if fails {
                ImagePullPhase::Failed
            } else {
                ImagePullPhase::Succeeded
            },
            bytes_done: 100,
            bytes_total: 100,
            last_pull_time: Some(Time(now)),
            ..ImageStatus::default()
        },
        Some(_) => return,
    };
    image.status = Some(next);
}

fn unfinished_pulls(lists: &BTreeMap<String, NodeImage>) -> usize {
    lists
        .values()
        .filter(|i| i.owned.is_some())
        .filter(|i| {
            !matches!(
                i.status.as_ref().map(|s| s.phase),
                Some(ImagePullPhase::Succeeded | ImagePullPhase::Failed)
            )
        })
        .count()
}

/// Runs the job over `count` nodes, failing the nodes in `failing`; checks the bound
/// after each reconcile and returns the number of reconciles it took.
fn run_job(count: usize, value: IntOrString, failing: &[usize]) -> usize {
    let nodes: Vec<Node> = (0..count)
        .map(|i| ready_node(&format!("node-{i:02}")))
        .collect();
    let mut lists: BTreeMap<String, NodeImage> = (0..count)
        .map(|i| (format!("node-{i:02}"), NodeImage::default()))
        .collect();
    let mut job = ImagePullJob::new(
        "warm",
        ImagePullJobSpec {
            image: "registry.local/app:v1".into(),
            parallelism: Some(value.clone()),
            ..ImagePullJobSpec::default()
        },
    );
    job.metadata.namespace = Some("ns".into());
    let limit = parallelism(&value, count);
    let mut last_percent = 0;
    for round in 1..=4 * count + 4 {
        let now = Timestamp::from_second(1_800_000_000 + i64::try_from(round).unwrap_or(0))
            .expect("valid");
        let planned = plan(&Snapshot {
            job: &job,
            nodes: nodes.iter().collect(),
            pods: Vec::new(),
            lists: lists.clone(),
            now,
        });
        for (node, entry) in &planned.apply {
            let image = lists.get_mut(node).expect("a known node");
            if image.owned.is_none() {
                image.status = None;
            }
            image.owned = Some(entry.clone());
        }
        let finished = lists
            .values()
            .filter(|i| {
                matches!(
                    i.status.as_ref().map(|s| s.phase),
                    Some(ImagePullPhase::Succeeded | ImagePullPhase::Failed)
                )
            })
            .count();
        let status = planned.status.clone();
        if status.completion_time.is_some() {
            assert_eq!(finished, count, "completed with nodes unfinished");
            assert_eq!(status.progress.map(|p| p.percent), Some(100));
            return round;
        }
        let pulling = unfinished_pulls(&lists);
        assert_eq!(
            pulling,
            limit.min(count - finished),
            "round {round}: {pulling} nodes pulling at parallelism {value:?} ({limit}) with {finished} of {count} finished"
        );
        assert_eq!(usize::try_from(status.active).ok(), Some(pulling));
        let percent = status.progress.as_ref().map_or(0, |p| p.percent);
        assert!(
            percent >= last_percent,
            "progress went from {last_percent} to {percent}"
        );
        last_percent = percent;
        job.status = Some(status);
        for (i, image) in lists.values_mut().enumerate() {
            advance(image, failing.contains(&i), now);
        }
    }
    panic!("the job did not complete");
}

#[test]
fn exactly_parallelism_nodes_pull_at_once() {
    let cases: [(usize, IntOrString, &[usize]); 6] = [
        (5, IntOrString::Int(1), &[]),
        (5, IntOrString::Int(2), &[1]),
        (7, IntOrString::Int(3), &[0, 4]),
        (4, IntOrString::Int(10), &[]),
        (10, IntOrString::String("30%".into()), &[2]),
        (6, IntOrString::String("100%".into()), &[5]),
    ];
    for (count, value, failing) in cases {
        run_job(count, value, failing);
    }
}

#[test]
fn parallelism_one_takes_one_node_at_a_time() {
    // Each node takes two reconciles (seen, then finished) and the next starts in the
    // reconcile that sees the previous one finish.
    let rounds = run_job(4, IntOrString::Int(1), &[]);
    assert_eq!(rounds, 9);
}

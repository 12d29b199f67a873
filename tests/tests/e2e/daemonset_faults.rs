//! The Advanced DaemonSet of the deployed (in-cluster) control plane under faults, on kwok
//! nodes the test creates: the leader killed in the middle of a Surging rollout (no node
//! ever runs two pods of one revision, no more nodes than maxSurge run two pods, and the
//! rollout completes under the new leader); and a node flapping Ready / NotReady, which
//! must not delete or replace a pod (the DaemonSet's pods tolerate not-ready, as the
//! native controller's do).
//!
//! Runs alone: it kills the control plane's leader, which every other suite needs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{Result, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt as _;
use serde_json::json;
use stevedore_api::DaemonSet;
use stevedore_controlplane::workload::deletion::REVISION_LABEL;
use stevedore_controlplane::workload::node_pin::pinned_node;
use stevedore_tests::controlplane::{kill_leader, leader, new_leader, wait_control_plane_ready};
use stevedore_tests::{poll_until, run_in_namespace, test_nodes};

use crate::cloneset_support;
use crate::daemonset_support;
use cloneset_support::{Recorder, Seen};
use daemonset_support::{
    WAIT, create, image_of, manifest, patch_spec, pods_by_node, ready, with_nodes,
};

/// Seconds a new pod must be ready to be available (the test's `minReadySeconds`).
const MIN_READY: i64 = 3;

/// Whether `pod` was ready for `MIN_READY` seconds at `at` (to the second the Ready
/// condition's time has; a second of slack either way counts as available).
fn available_at(pod: &Pod, at: Timestamp) -> bool {
    let since = (pod.status.as_ref().and_then(|s| s.conditions.as_ref()))
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0.as_second());
    since.is_some_and(|since| since + MIN_READY - 1 <= at.as_second())
}

/// Replays a pod history (terminating pods do not count): the most nodes that surged at
/// once — ran an old pod beside a new one not yet available, which is what maxSurge
/// bounds (a node whose new pod is available is only waiting for its old one to go) —
/// and the first node seen running two live pods of one revision.
fn surged_nodes(history: &[Seen<Pod>], new_image: &str) -> (usize, Option<String>) {
    // The watch's instants on the wall clock.
    let (wall_now, instant_now) = (Timestamp::now(), Instant::now());
    let wall = |at: Instant| {
        let ago = SignedDuration::try_from(instant_now.duration_since(at)).unwrap_or_default();
        wall_now - ago
    };
    let mut live: BTreeMap<String, Pod> = BTreeMap::new();
    let (mut most_surged, mut same_revision) = (0, None);
    for seen in history {
        let uid = seen.object.uid().unwrap_or_default();
        if seen.deleted || seen.object.metadata.deletion_timestamp.is_some() {
            live.remove(&uid);
        } else {
            live.insert(uid, seen.object.clone());
        }
        let mut per_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
        for pod in live.values() {
            (per_node.entry(pinned_node(pod).unwrap_or_default()))
                .or_default()
                .push(pod);
        }
        let at = wall(seen.at);
        let surged = (per_node.values())
            .filter(|pods| {
                let new_waiting = pods
                    .iter()
                    .any(|p| image_of(p) == new_image && !available_at(p, at));
                pods.len() > 1 && new_waiting
            })
            .count();
        most_surged = most_surged.max(surged);
        for (node, pods) in &per_node {
            let revisions: Vec<&str> = (pods.iter())
                .map(|p| p.labels().get(REVISION_LABEL).map_or("", String::as_str))
                .collect();
            let distinct: BTreeSet<&str> = revisions.iter().copied().collect();
            if distinct.len() < revisions.len() && same_revision.is_none() {
                same_revision = Some(format!("{node}: {revisions:?}"));
            }
        }
    }
    (most_surged, same_revision)
}

#[tokio::test]
async fn a_surging_rollout_survives_a_leader_kill() -> Result<()> {
    run_in_namespace("ds-leader-kill", |ctx| async move {
        with_nodes(ctx, 4, |ctx, n| async move {
            wait_control_plane_ready(&ctx.client).await?;
            let rolling =
                json!({ "rollingUpdateType": "Surging", "maxSurge": 1, "maxUnavailable": 0 });
            let mut object = manifest(&ctx, "proxy", "web:v1", rolling);
            // Each node waits for its new pod to be available: a rollout of several
            // seconds, so the kill lands in the middle of it.
            object["spec"]["minReadySeconds"] = json!(MIN_READY);
            create(&ctx, object).await?;
            // Available, not only ready: a node whose old pod is unavailable gets its new
            // pod at once, outside the surge budget (as the native controller does).
            poll_until("an available pod on every node", WAIT, || async {
                let by_node = pods_by_node(&ctx, "proxy").await?;
                let ready = by_node.values().flatten().filter(|p| ready(p)).count();
                let ds = ctx.api::<DaemonSet>().get("proxy").await?;
                let available = ds.status.map(|s| s.number_available).unwrap_or_default();
                let all = ready == n.len() && by_node.len() == n.len() && available == 4;
                Ok(all.then_some(()))
            })
            .await?;
            let pod_log = Recorder::<Pod>::start(&ctx).await?;
            let old_leader = leader(&ctx.client).await?;
            let v2 = ctx.cluster.image("web:v2");
            let template = json!({ "spec": { "containers": [{ "name": "main", "image": v2 }] } });
            patch_spec(&ctx, "proxy", json!({ "template": template })).await?;
            let updated_at_kill = poll_until("the first new pod", WAIT, || async {
                let by_node = pods_by_node(&ctx, "proxy").await?;
                let new = by_node
                    .values()
                    .flatten()
                    .filter(|p| image_of(p) == v2)
                    .count();
                Ok((new >= 1).then_some(new))
            })
            .await?;
            let how = kill_leader(&ctx.client, &old_leader).await?;
            let taken_by = new_leader(&ctx.client, &old_leader).await?;
            eprintln!(
                "killed {old_leader} ({how}) with {updated_at_kill} new pods; {taken_by} leads"
            );

            poll_until("every node on the new pod alone", WAIT, || async {
                let by_node = pods_by_node(&ctx, "proxy").await?;
                let done = by_node.len() == n.len()
                    && by_node
                        .values()
                        .all(|pods| pods.len() == 1 && image_of(&pods[0]) == v2 && ready(&pods[0]));
                if done {
                    return Ok(Some(()));
                }
                let state: Vec<String> = (by_node.iter())
                    .map(|(node, pods)| {
                        let pods: Vec<_> = (pods.iter())
                            .map(|p| (p.name_any(), image_of(p), ready(p)))
                            .collect();
                        format!("{node}: {pods:?}")
                    })
                    .collect();
                bail!("pods by node {state:#?}")
            })
            .await?;
            // The status follows the pods by one sync: the last pod's readiness reaches
            // the controller after the test saw it.
            poll_until("the status counting every node updated", WAIT, || async {
                let ds = ctx.api::<DaemonSet>().get("proxy").await?;
                let status = ds.status.unwrap_or_default();
                if status.updated_number_scheduled == 4 && status.number_available == 4 {
                    return Ok(Some(()));
                }
                bail!("status {status:?}")
            })
            .await?;
            let (most_surged, same_revision) = surged_nodes(&pod_log.history(), &v2);
            ensure!(
                most_surged <= 1,
                "{most_surged} nodes surged at once (maxSurge 1)"
            );
            if let Some(node) = same_revision {
                bail!("a node ran two pods of one revision: {node}");
            }
            ensure!(
                updated_at_kill < n.len(),
                "the rollout had finished before the kill"
            );
            wait_control_plane_ready(&ctx.client).await?;
            Ok(())
        })
        .await
    })
    .await
}

#[tokio::test]
async fn a_node_flapping_ready_and_not_ready_keeps_its_pod() -> Result<()> {
    run_in_namespace("ds-flapping", |ctx| async move {
        with_nodes(ctx, 2, |ctx, n| async move {
            create(&ctx, manifest(&ctx, "agent", "web:v1", json!({}))).await?;
            let before = poll_until("a ready pod on both nodes", WAIT, || async {
                let by_node = pods_by_node(&ctx, "agent").await?;
                let all_ready = by_node.len() == 2
                    && by_node
                        .values()
                        .all(|pods| pods.len() == 1 && ready(&pods[0]));
                Ok(all_ready.then_some(by_node))
            })
            .await?;
            let uids = |by_node: &BTreeMap<String, Vec<Pod>>| -> BTreeMap<String, Vec<String>> {
                by_node
                    .iter()
                    .map(|(node, pods)| {
                        (
                            node.clone(),
                            pods.iter().map(|p| p.uid().unwrap_or_default()).collect(),
                        )
                    })
                    .collect()
            };
            let pod_log = Recorder::<Pod>::start(&ctx).await?;
            for not_ready in ["False", "Unknown", "False"] {
                test_nodes::set_ready(&ctx, &n[0], not_ready).await?;
                tokio::time::sleep(Duration::from_secs(4)).await;
                test_nodes::set_ready(&ctx, &n[0], "True").await?;
                tokio::time::sleep(Duration::from_secs(4)).await;
            }
            // Long enough for a controller that reacts to the flaps to have acted.
            tokio::time::sleep(Duration::from_secs(10)).await;
            let after = pods_by_node(&ctx, "agent").await?;
            ensure!(
                uids(&after) == uids(&before),
                "pods changed: {:?} then {:?}",
                uids(&before),
                uids(&after)
            );
            let churn: Vec<String> = (pod_log.history().iter())
                .filter(|s| s.deleted || s.object.metadata.deletion_timestamp.is_some())
                .map(|s| s.object.name_any())
                .collect();
            ensure!(
                churn.is_empty(),
                "pods deleted while the node flapped: {churn:?}"
            );
            Ok(())
        })
        .await
    })
    .await
}

//! The in-cluster control plane loses its leader in the middle of a CloneSet rollout: the
//! leader's process is killed (SIGKILL, so it cannot release its Lease), the standby takes
//! the Lease over and finishes the rollout without creating or deleting a pod twice, never
//! runs more than `replicas` pods, and loses no claim except those the design deletes with
//! their pods (a recreate update deletes the old pod's claims).
//!
//! Runs alone: it kills the control plane's leader, which every other suite needs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::{Resource, ResourceExt as _};
use serde_json::json;
use stevedore_tests::controlplane::{kill_leader, leader, new_leader, wait_control_plane_ready};
use stevedore_tests::{poll_until, run_in_namespace};

use crate::cloneset_support;
use cloneset_support::{
    INSTANCE_ID_LABEL, Nodes, ROLLOUT, Recorder, Seen, apply, events_of, pods_of, uid,
    wait_rolled_out, web_cloneset,
};

const REPLICAS: i32 = 8;

fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// Replays a pod history: the most pods existing at once, and how many of them active.
fn peak_pods(history: &[Seen<Pod>]) -> (usize, usize) {
    let mut live: BTreeMap<String, Pod> = BTreeMap::new();
    let (mut most, mut most_active) = (0, 0);
    for seen in history {
        if seen.deleted {
            live.remove(&uid(&seen.object));
        } else {
            live.insert(uid(&seen.object), seen.object.clone());
        }
        most = most.max(live.len());
        most_active = most_active.max(live.values().filter(|p| is_active(p)).count());
    }
    (most, most_active)
}

/// UID → (name, instance id, deleted) of every object a history saw.
fn ever_seen<K: Resource>(history: &[Seen<K>]) -> BTreeMap<String, (String, String, bool)> {
    let mut seen: BTreeMap<String, (String, String, bool)> = BTreeMap::new();
    for s in history {
        let entry = seen.entry(uid(&s.object)).or_insert_with(|| {
            let id = s
                .object
                .meta()
                .labels
                .as_ref()
                .and_then(|l| l.get(INSTANCE_ID_LABEL))
                .cloned()
                .unwrap_or_default();
            (s.object.meta().name.clone().unwrap_or_default(), id, false)
        });
        entry.2 |= s.deleted;
    }
    seen
}

#[tokio::test]
async fn rollout_survives_a_leader_kill() -> Result<()> {
    run_in_namespace("cloneset-leader-kill", |ctx| async move {
        let name = "web";
        // Not while another replica set of the control plane is rolling out.
        wait_control_plane_ready(&ctx.client).await?;
        let pod_log = Recorder::<Pod>::start(&ctx).await?;
        let pvc_log = Recorder::<PersistentVolumeClaim>::start(&ctx).await?;
        let mut object = web_cloneset(&ctx, name, REPLICAS, "ReCreate", Nodes::Kwok);
        object["spec"]["updateStrategy"]["maxUnavailable"] = json!(2);
        // Each batch waits for its replacements to be available: a rollout of several
        // seconds, so the kill lands in the middle of it.
        object["spec"]["minReadySeconds"] = json!(3);
        apply(&ctx, &object).await?;
        wait_rolled_out(&ctx, name, ROLLOUT).await?;
        let initial: BTreeSet<String> = pods_of(&ctx, name).await?.iter().map(uid).collect();
        ensure!(initial.len() == 8, "{} initial pods", initial.len());

        let old_leader = leader(&ctx.client).await?;
        object["spec"]["template"]["spec"]["containers"][0]["image"] =
            json!(ctx.cluster.image("web:v2"));
        let changed = Instant::now();
        apply(&ctx, &object).await?;
        let replaced_at_kill = poll_until(
            "the first pods to be replaced",
            Duration::from_secs(60),
            || async {
                let pods = pods_of(&ctx, name).await?;
                let new = pods
                    .iter()
                    .filter(|p| !initial.contains(&uid(*p)) && is_active(p))
                    .count();
                Ok((new >= 1).then_some(new))
            },
        )
        .await?;
        let timeline: Vec<String> = pod_log
            .history()
            .iter()
            .filter(|s| s.at >= changed)
            .map(|s| {
                let state = if s.deleted {
                    "gone"
                } else if s.object.metadata.deletion_timestamp.is_some() {
                    "terminating"
                } else if stevedore_tests::pods::is_ready(&s.object) {
                    "ready"
                } else {
                    "not ready"
                };
                format!(
                    "{:?} {} {state}",
                    s.at.duration_since(changed),
                    s.object.name_any()
                )
            })
            .collect();
        let killed = Instant::now();
        let how = kill_leader(&ctx.client, &old_leader).await?;
        let new_leader = new_leader(&ctx.client, &old_leader).await?;
        eprintln!(
            "killed leader {old_leader} ({how}) with {replaced_at_kill}/8 pods replaced; \
             {new_leader} took over after {:?}",
            killed.elapsed()
        );
        ensure!(
            replaced_at_kill < 8,
            "the rollout had finished before the kill: {timeline:#?}"
        );

        let cs = wait_rolled_out(&ctx, name, ROLLOUT).await?;
        eprintln!("rollout finished {:?} after the kill", killed.elapsed());
        let status = cs.status.unwrap_or_default();
        ensure!(status.updated_ready_replicas == REPLICAS, "{status:?}");
        let final_pods = pods_of(&ctx, name).await?;
        let final_uids: BTreeSet<String> = final_pods.iter().map(uid).collect();
        ensure!(
            final_uids.is_disjoint(&initial),
            "some pods were not replaced"
        );

        // Pods: 8 initial + 8 replacements, every initial one deleted, never more than
        // 8 active at once.
        let pods_seen = ever_seen(&pod_log.history());
        ensure!(
            pods_seen.len() == 16,
            "{} distinct pods created, expected 8 + 8: {pods_seen:?}",
            pods_seen.len()
        );
        for uid in &initial {
            ensure!(
                pods_seen[uid].2,
                "initial pod {:?} not seen deleted",
                pods_seen[uid]
            );
        }
        let (most, most_active) = peak_pods(&pod_log.history());
        eprintln!("at most {most} pods at once, {most_active} of them active");
        ensure!(most_active <= 8, "{most_active} active pods at once");

        // The controller deleted each pod once.
        let events = events_of(&ctx, name).await?;
        let mut deletes: BTreeMap<String, usize> = BTreeMap::new();
        for e in events.iter().filter(|e| e.reason == "SuccessfulDelete") {
            let pod = e
                .message
                .split_whitespace()
                .nth(2)
                .unwrap_or_default()
                .to_owned();
            *deletes.entry(pod).or_default() += 1;
        }
        ensure!(
            deletes.values().all(|&n| n == 1) && deletes.len() <= 8,
            "delete events per pod: {deletes:?}"
        );

        // Claims: one per pod; a recreate update deletes the replaced pod's claim with it
        // (features.md), and nothing else is deleted.
        let pvcs_seen = ever_seen(&pvc_log.history());
        let initial_ids: BTreeSet<&str> = initial.iter().map(|u| pods_seen[u].1.as_str()).collect();
        let final_ids: BTreeSet<String> = final_pods
            .iter()
            .filter_map(|p| p.labels().get(INSTANCE_ID_LABEL).cloned())
            .collect();
        ensure!(
            pvcs_seen.len() == 16,
            "{} claims: {pvcs_seen:?}",
            pvcs_seen.len()
        );
        let claims_now: BTreeMap<String, PersistentVolumeClaim> =
            cloneset_support::pvcs(&ctx).await?;
        for (claim_uid, (claim, id, _)) in &pvcs_seen {
            let exists = claims_now.get(claim).is_some_and(|p| uid(p) == *claim_uid);
            if initial_ids.contains(id.as_str()) {
                // Deleted with its replaced pod; the kwok pods go fast, so wait a little.
                poll_until(
                    &format!("claim {claim} of a replaced pod to go"),
                    Duration::from_secs(60),
                    || async {
                        let now = cloneset_support::pvcs(&ctx).await?;
                        Ok(now
                            .get(claim)
                            .is_none_or(|p| uid(p) != *claim_uid)
                            .then_some(()))
                    },
                )
                .await?;
            } else {
                ensure!(
                    final_ids.contains(id) && exists,
                    "claim {claim} (instance {id}) lost; final instances {final_ids:?}"
                );
            }
        }
        for id in &final_ids {
            let claim = format!("data-{name}-{id}");
            let pvc = claims_now
                .get(&claim)
                .with_context(|| format!("no claim {claim}"))?;
            ensure!(cloneset_support::is_bound(pvc), "claim {claim} not bound");
        }

        wait_control_plane_ready(&ctx.client).await?;
        Ok(())
    })
    .await
}

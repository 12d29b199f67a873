//! `replicas: 2147483647` on a CloneSet and an Advanced StatefulSet (admitted, as OpenKruise
//! and the native kinds admit it) beside a normal CloneSet of 2, in a namespace whose
//! ResourceQuota allows 10 pods: the control plane plans one sync's batch at a time, so
//! its leader stays up and keeps its memory flat, the pods stay within the quota, and the
//! normal CloneSet is still served (issue 28, item 1).
//!
//! The leader's memory is read from /proc/<pid>/status, which needs the kubelet's node to
//! be this machine (the local cluster).
//!
//! Runs alone: it compares the leader's memory with its idle figure, which other suites'
//! load would move.

use crate::cloneset_component;

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use stevedore_api::StatefulSet;
use stevedore_tests::controlplane::{SYSTEM_NAMESPACE, control_plane_pid, leader};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use cloneset_component::{cloneset, create, patch, wait_converged};

/// The namespace's pod quota.
const QUOTA_PODS: usize = 10;
/// How long the huge objects are watched.
const WATCH: Duration = Duration::from_secs(30);
/// The leader's RSS may grow by 10 % of idle plus this: its caches now hold three more
/// workloads, up to ten pods, their revisions and the quota-denial events (a few hundred
/// KiB), and the allocator keeps freed pages of a busier minute. Before the fix the leader
/// grew by hundreds of MiB within two seconds and was OOM-killed.
const RSS_SLACK_KIB: u64 = 4 * 1024;

/// A field of /proc/<pid>/status in KiB (`VmRSS`, `VmHWM`).
fn proc_kib(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).with_context(|| {
        format!("the leader's process {pid} is gone (killed or restarted): /proc/{pid}/status")
    })?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().strip_suffix("kB")?.trim().parse().ok())
        .with_context(|| format!("/proc/{pid}/status has no {field}"))
}

/// The leader's pod: its name, UID and the control plane container's restart count.
async fn leader_pod(ctx: &TestContext) -> Result<(String, String, i32)> {
    let name = leader(&ctx.client).await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE);
    let pod = pods.get(&name).await?;
    let uid = pod
        .metadata
        .uid
        .clone()
        .context("the leader's pod has no UID")?;
    let restarts = pod
        .status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .map(|c| c.restart_count)
        .sum();
    Ok((name, uid, restarts))
}

/// Pods of the namespace that are not terminating.
async fn namespace_pods(ctx: &TestContext) -> Result<usize> {
    let pods = ctx.api::<Pod>().list(&ListParams::default()).await?;
    Ok(pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count())
}

async fn create_quota(ctx: &TestContext) -> Result<()> {
    let quotas = ctx.api::<ResourceQuota>();
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": { "name": "ten-pods" },
        "spec": { "hard": { "pods": QUOTA_PODS.to_string() } }
    }))?;
    quotas.create(&PostParams::default(), &quota).await?;
    // Admission only enforces a quota once the quota controller has filled its status.
    poll_until(
        "the quota to be tracked",
        Duration::from_secs(60),
        || async {
            let q = quotas.get("ten-pods").await?;
            Ok(q.status
                .and_then(|s| s.hard)
                .is_some_and(|h| h.contains_key("pods"))
                .then_some(()))
        },
    )
    .await
}

async fn create_huge_statefulset(ctx: &TestContext, name: &str) -> Result<()> {
    let set: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "StatefulSet",
        "metadata": { "name": name },
        "spec": {
            "replicas": i32::MAX,
            "podManagementPolicy": "Parallel",
            "serviceName": name,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "nodeSelector": { "type": "kwok" },
                    "tolerations": [{
                        "key": "kwok.x-k8s.io/node",
                        "operator": "Exists",
                        "effect": "NoSchedule"
                    }],
                    "containers": [{ "name": "web", "image": ctx.cluster.image("web:v1") }]
                }
            }
        }
    }))
    .context("a valid StatefulSet")?;
    ctx.api::<StatefulSet>()
        .create(&PostParams::default(), &set)
        .await?;
    Ok(())
}

#[tokio::test]
async fn huge_replicas_keep_the_leader_up_and_its_memory_flat() -> Result<()> {
    run_in_namespace("huge-replicas", |ctx| async move {
        create_quota(&ctx).await?;
        create(&ctx, cloneset(&ctx, "normal", 2, json!({}))).await?;
        wait_converged(&ctx, "normal", 2).await?;

        let (leader_name, leader_uid, restarts) = leader_pod(&ctx).await?;
        let pid = control_plane_pid(&leader_uid).with_context(|| {
            format!(
                "the process of the leader {leader_name} is not visible in /proc: this test runs on the local cluster's node"
            )
        })?;
        let idle_rss = proc_kib(pid, "VmRSS")?;
        let idle_hwm = proc_kib(pid, "VmHWM")?;
        let bound = idle_rss + idle_rss / 10 + RSS_SLACK_KIB;

        create(&ctx, cloneset(&ctx, "huge", i32::MAX, json!({}))).await?;
        create_huge_statefulset(&ctx, "huge-sts").await?;

        let start = Instant::now();
        let mut peak_rss = idle_rss;
        let mut most_pods = 0;
        while start.elapsed() < WATCH {
            peak_rss = peak_rss.max(proc_kib(pid, "VmRSS")?);
            let pods = namespace_pods(&ctx).await?;
            most_pods = most_pods.max(pods);
            ensure!(
                pods <= QUOTA_PODS,
                "{pods} pods in the namespace, above its quota of {QUOTA_PODS}"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let end_rss = proc_kib(pid, "VmRSS")?;
        let end_hwm = proc_kib(pid, "VmHWM")?;
        ensure!(
            peak_rss <= bound,
            "the leader's RSS went from {idle_rss} KiB idle to {peak_rss} KiB with replicas 2147483647 (bound {bound} KiB: 10 % + {RSS_SLACK_KIB} KiB)"
        );
        ensure!(
            end_hwm <= idle_hwm.max(bound),
            "the leader's peak RSS (VmHWM) rose from {idle_hwm} KiB to {end_hwm} KiB (bound {bound} KiB)"
        );
        ensure!(
            most_pods > 2,
            "the huge sets created no pod within the quota in {WATCH:?} (at most {most_pods} pods)"
        );

        let (now_leader, now_uid, now_restarts) = leader_pod(&ctx).await?;
        ensure!(
            (now_leader.as_str(), now_uid.as_str(), now_restarts)
                == (leader_name.as_str(), leader_uid.as_str(), restarts),
            "the leader changed or restarted: {leader_name} (uid {leader_uid}, {restarts} restarts) -> {now_leader} (uid {now_uid}, {now_restarts} restarts)"
        );

        // The normal CloneSet is still served: a scale-down needs no room in the quota.
        patch(&ctx, "normal", json!({ "spec": { "replicas": 1 } })).await?;
        wait_converged(&ctx, "normal", 1).await?;
        if proc_kib(pid, "VmRSS").is_err() {
            bail!("the leader's process {pid} exited while the huge sets existed");
        }
        println!(
            "leader {leader_name}: RSS idle {idle_rss} KiB, peak {peak_rss} KiB, end {end_rss} KiB; at most {most_pods} pods"
        );
        Ok(())
    })
    .await
}

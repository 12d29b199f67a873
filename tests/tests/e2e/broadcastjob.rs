//! The BroadcastJob controller of the running (in-cluster) control plane against the real
//! apiserver, on kwok nodes the test creates: one pod per labelled node, never more than
//! `parallelism` active at once, completion with status counts, a node whose blocking
//! taint is removed getting its pod under completion policy Never, and FailFast. kwok runs
//! the pods (Running); the test plays the kubelet by reporting them Succeeded or Failed,
//! since kwok completes only the pods of batch Jobs.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::BroadcastJob;
use stevedore_api::broadcastjob::BroadcastJobPhase;
use stevedore_controlplane::broadcastjob::pods::{JOB_NAME_LABEL, pinned_node};
use stevedore_tests::test_nodes::{self, KWOK_TAINT, TEST_NODE_TAINT, TestNode};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

fn node_name(ctx: &TestContext, i: usize) -> String {
    format!("{}-node-{i}", ctx.namespace)
}

/// A kwok Node of this test (its own taint, see `test_nodes`) with `extra_taints`, Ready.
async fn add_node(ctx: &TestContext, i: usize, extra_taints: &[Value]) -> Result<String> {
    let name = node_name(ctx, i);
    let spec = TestNode {
        extra_taints: extra_taints.to_vec(),
        ..TestNode::default()
    };
    test_nodes::create(ctx, &name, spec).await?;
    Ok(name)
}

/// Runs `body` with `count` test nodes (node 0 with `first_taints`), removing the
/// test's jobs and nodes after.
async fn with_nodes<F, Fut>(
    ctx: TestContext,
    count: usize,
    first_taints: &[Value],
    body: F,
) -> Result<()>
where
    F: FnOnce(TestContext, Vec<String>) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut nodes = Vec::new();
    let mut result = Ok(());
    for i in 0..count {
        let taints = if i == 0 { first_taints } else { &[] };
        match add_node(&ctx, i, taints).await {
            Ok(name) => nodes.push(name),
            Err(err) => {
                result = Err(err);
                break;
            }
        }
    }
    if result.is_ok() {
        // The first node's taints block the job's pods.
        let eligible = count - usize::from(!first_taints.is_empty());
        result = controller_sees_nodes(&ctx, eligible).await;
    }
    if result.is_ok() {
        result = body(ctx.clone(), nodes).await;
    }
    let _ = jobs(&ctx)
        .delete_collection(&DeleteParams::background(), &ListParams::default())
        .await;
    let all: Api<Node> = Api::all(ctx.client.clone());
    for i in 0..count {
        let _ = all
            .delete(&node_name(&ctx, i), &DeleteParams::default())
            .await;
    }
    result
}

/// Waits until the control plane's node cache holds the `count` nodes the test's jobs may
/// use: a probe job that never completes of itself (`completionPolicy: Never`, its pods
/// completed by kwok at once) counts them all as desired. A Ready node reaches the
/// controller's watch a moment after the test sees it, and a job created in between was
/// planned over fewer nodes (under load: "the job completed: 0 pods succeeded, 0 failed").
async fn controller_sees_nodes(ctx: &TestContext, count: usize) -> Result<()> {
    let probe = "sees-nodes";
    let mut spec = json!({ "completionPolicy": { "type": "Never" } });
    spec["template"]["metadata"]["annotations"] = json!({ "stevedore.dev/kwok-complete": "true" });
    create_job(ctx, probe, spec).await?;
    let want = i32::try_from(count)?;
    poll_until(
        "the controller to see the test's nodes",
        Duration::from_secs(60),
        || async {
            let job = jobs(ctx).get(probe).await?;
            let desired = job.status.map(|s| s.desired).unwrap_or_default();
            Ok((desired == want).then_some(()))
        },
    )
    .await?;
    jobs(ctx).delete(probe, &DeleteParams::background()).await?;
    Ok(())
}

fn jobs(ctx: &TestContext) -> Api<BroadcastJob> {
    ctx.api()
}

/// A job whose pods go to this test's nodes only (nodeSelector) and tolerate their taints.
async fn create_job(ctx: &TestContext, name: &str, mut spec: Value) -> Result<BroadcastJob> {
    let annotations = spec.pointer("/template/metadata/annotations").cloned();
    spec["template"] = json!({
        "metadata": { "labels": { "app": name } },
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": test_nodes::node_selector(ctx),
            "tolerations": test_nodes::tolerations(ctx),
            "containers": [{ "name": "task", "image": ctx.cluster.image("web:v1") }],
        },
    });
    if let Some(annotations) = annotations {
        spec["template"]["metadata"]["annotations"] = annotations;
    }
    let job: BroadcastJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "BroadcastJob",
        "metadata": { "name": name },
        "spec": spec,
    }))?;
    Ok(jobs(ctx).create(&PostParams::default(), &job).await?)
}

async fn job_pods(ctx: &TestContext, job: &str) -> Result<Vec<Pod>> {
    let params = ListParams::default().labels(&format!("{JOB_NAME_LABEL}={job}"));
    Ok(ctx.api::<Pod>().list(&params).await?.items)
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

fn active(pod: &Pod) -> bool {
    !matches!(phase(pod), Some("Succeeded" | "Failed"))
}

/// Plays the kubelet: reports `pod` finished in `phase`.
async fn finish(ctx: &TestContext, pod: &Pod, phase: &str) -> Result<()> {
    let patch = json!({ "status": { "phase": phase } });
    ctx.api::<Pod>()
        .patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await?;
    Ok(())
}

async fn wait_phase(
    ctx: &TestContext,
    name: &str,
    want: BroadcastJobPhase,
) -> Result<BroadcastJob> {
    poll_until(
        &format!("job {name} {want:?}"),
        Duration::from_secs(60),
        || async {
            let job = jobs(ctx).get(name).await?;
            let reached = job.status.as_ref().is_some_and(|s| s.phase == want);
            Ok(reached.then_some(job))
        },
    )
    .await
}

#[tokio::test]
async fn parallelism_three_over_ten_nodes_never_exceeds_three_active_and_completes() -> Result<()> {
    run_in_namespace("bcj-parallelism", |ctx| async move {
        with_nodes(ctx, 10, &[], |ctx, nodes| async move {
            create_job(&ctx, "upgrade", json!({ "parallelism": 3 })).await?;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
            let mut finished: BTreeSet<String> = BTreeSet::new();
            loop {
                let pods = job_pods(&ctx, "upgrade").await?;
                let running: Vec<&Pod> = pods.iter().filter(|p| active(p)).collect();
                ensure!(
                    running.len() <= 3,
                    "{} pods active at once (parallelism 3)",
                    running.len()
                );
                for pod in running.iter().filter(|p| phase(p) == Some("Running")) {
                    finish(&ctx, pod, "Succeeded").await?;
                    finished.insert(pinned_node(pod).unwrap_or_default());
                }
                let job = jobs(&ctx).get("upgrade").await?;
                if job
                    .status
                    .as_ref()
                    .is_some_and(|s| s.phase == BroadcastJobPhase::Completed)
                {
                    let status = job.status.unwrap_or_default();
                    ensure!(
                        status.desired == 10 && status.succeeded == 10,
                        "status {status:?}"
                    );
                    let on: BTreeSet<String> = pods.iter().filter_map(pinned_node).collect();
                    ensure!(
                        on == nodes.iter().cloned().collect(),
                        "one pod per node: {on:?}"
                    );
                    ensure!(pods.len() == 10, "{} pods for 10 nodes", pods.len());
                    return Ok(());
                }
                ensure!(
                    tokio::time::Instant::now() < deadline,
                    "not complete; finished on {finished:?}, status {:?}",
                    job.status
                );
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
        .await
    })
    .await
}

#[tokio::test]
async fn a_node_whose_blocking_taint_is_removed_gets_its_pod() -> Result<()> {
    let blocking = json!({ "key": "maintenance", "value": "on", "effect": "NoSchedule" });
    run_in_namespace("bcj-taint", |ctx| async move {
        with_nodes(ctx, 2, &[blocking], |ctx, nodes| async move {
            create_job(
                &ctx,
                "inspect",
                json!({ "completionPolicy": { "type": "Never" } }),
            )
            .await?;
            let on = |pods: &[Pod]| pods.iter().filter_map(pinned_node).collect::<BTreeSet<_>>();
            poll_until(
                "a pod on the untainted node",
                Duration::from_secs(60),
                || async {
                    let pods = job_pods(&ctx, "inspect").await?;
                    Ok((on(&pods) == BTreeSet::from([nodes[1].clone()])).then_some(()))
                },
            )
            .await?;
            let all: Api<Node> = Api::all(ctx.client.clone());
            let untainted = json!({ "spec": { "taints": [
                { "key": KWOK_TAINT, "value": "fake", "effect": "NoSchedule" },
                { "key": TEST_NODE_TAINT, "value": ctx.namespace, "effect": "NoSchedule" },
            ] } });
            all.patch(&nodes[0], &PatchParams::default(), &Patch::Merge(untainted))
                .await?;
            poll_until(
                "a pod on the node whose taint was removed",
                Duration::from_secs(60),
                || async {
                    let pods = job_pods(&ctx, "inspect").await?;
                    Ok((on(&pods).len() == 2).then_some(()))
                },
            )
            .await
        })
        .await
    })
    .await
}

#[tokio::test]
async fn fail_fast_fails_the_job_at_the_first_failed_pod() -> Result<()> {
    run_in_namespace("bcj-failfast", |ctx| async move {
        with_nodes(ctx, 3, &[], |ctx, _nodes| async move {
            create_job(&ctx, "check", json!({ "parallelism": 2 })).await?;
            let first = poll_until("a running pod", Duration::from_secs(60), || async {
                let pods = job_pods(&ctx, "check").await?;
                Ok(pods.into_iter().find(|p| phase(p) == Some("Running")))
            })
            .await?;
            finish(&ctx, &first, "Failed").await?;
            let job = wait_phase(&ctx, "check", BroadcastJobPhase::Failed).await?;
            let status = job.status.unwrap_or_default();
            let reason = status
                .conditions
                .iter()
                .find(|c| c.type_ == "Failed")
                .map(|c| c.reason.clone());
            ensure!(
                reason.as_deref() == Some("BackoffLimitExceeded"),
                "conditions {:?}",
                status.conditions
            );
            poll_until(
                "no pod of the failed job active",
                Duration::from_secs(60),
                || async {
                    let pods = job_pods(&ctx, "check").await?;
                    let alive = pods
                        .iter()
                        .filter(|p| active(p) && p.metadata.deletion_timestamp.is_none())
                        .count();
                    Ok((alive == 0).then_some(()))
                },
            )
            .await
        })
        .await
    })
    .await
}

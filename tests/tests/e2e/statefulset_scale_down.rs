//! The Advanced StatefulSet controller (running in the cluster) scaling down an
//! OrderedReady set whose pods are all unhealthy: nothing is deleted while a lower ordinal
//! than the pod next in line is unhealthy, as the native controller and OpenKruise's
//! `processCondemned` wait (issue 31, item 5).
//!
//! The pods run on the real kubelet node. Each pod's readiness probe reads the pod's own
//! labels through a downward-API volume (with busybox's grep: the image links only some
//! applets), so the test makes a pod unhealthy by relabelling it: kubelet refreshes the
//! volume on the pod's update and the probe fails. (Kwok's pods cannot be made unready:
//! kwok keeps their conditions Ready.)

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stevedore_controlplane::api::StatefulSet;
use stevedore_tests::pods::{is_ready, is_running_and_ready};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

/// The pod label the readiness probe reads: "yes" is healthy, anything else is not.
const HEALTHY_LABEL: &str = "stevedore.dev/healthy";
/// Pods starting on the real node, and kubelet's probe seeing a relabelled pod.
const WAIT: Duration = Duration::from_secs(120);

/// An OrderedReady StatefulSet of three pods whose readiness follows their
/// `stevedore.dev/healthy` label.
fn statefulset(name: &str, image: String) -> Result<StatefulSet> {
    let healthy_line = format!("{HEALTHY_LABEL}=\"yes\"");
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "StatefulSet",
        "metadata": { "name": name },
        "spec": {
            "replicas": 3,
            "serviceName": name,
            "podManagementPolicy": "OrderedReady",
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name, HEALTHY_LABEL: "yes" } },
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "volumes": [{ "name": "podinfo", "downwardAPI": { "items": [
                        { "path": "labels", "fieldRef": { "fieldPath": "metadata.labels" } },
                    ] } }],
                    "containers": [{
                        "name": "web",
                        "image": image,
                        "volumeMounts": [{ "name": "podinfo", "mountPath": "/etc/podinfo" }],
                        "readinessProbe": {
                            "exec": { "command": ["/bin/busybox", "grep", "-qF", healthy_line, "/etc/podinfo/labels"] },
                            "periodSeconds": 1,
                            "failureThreshold": 1,
                        },
                    }]
                }
            }
        }
    }))?)
}

async fn pods_of(ctx: &TestContext, name: &str) -> Result<Vec<Pod>> {
    let list = ctx
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await?;
    Ok(list.items)
}

fn describe(pods: &[Pod]) -> String {
    let line = |p: &Pod| {
        let gone = if p.metadata.deletion_timestamp.is_some() {
            " terminating"
        } else {
            ""
        };
        format!("{} ready={}{gone}", p.name_any(), is_ready(p))
    };
    pods.iter().map(line).collect::<Vec<_>>().join(", ")
}

async fn body(ctx: &TestContext) -> Result<()> {
    let name = "web";
    let api = ctx.api::<StatefulSet>();
    api.create(
        &PostParams::default(),
        &statefulset(name, ctx.cluster.image("web:v1"))?,
    )
    .await?;
    poll_until("web-0..2 running and ready", WAIT, || async {
        let pods = pods_of(ctx, name).await?;
        Ok((pods.len() == 3 && pods.iter().all(is_running_and_ready)).then_some(()))
    })
    .await?;

    // Every pod unhealthy: its probe reads the relabelled pod.
    let unhealthy = json!({ "metadata": { "labels": { HEALTHY_LABEL: "no" } } });
    for pod in pods_of(ctx, name).await? {
        ctx.api::<Pod>()
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&unhealthy),
            )
            .await?;
    }
    poll_until("every pod not Ready", WAIT, || async {
        let pods = pods_of(ctx, name).await?;
        Ok((pods.len() == 3 && pods.iter().all(|p| !is_ready(p))).then_some(()))
    })
    .await?;

    let scale = json!({ "spec": { "replicas": 0 } });
    let scaled = api
        .patch(name, &PatchParams::default(), &Patch::Merge(scale))
        .await?;
    let generation = scaled.metadata.generation.context("a generation")?;
    poll_until("the set to see the scale-down", WAIT, || async {
        let status = api.get(name).await?.status.unwrap_or_default();
        Ok((status.observed_generation == generation).then_some(()))
    })
    .await?;
    // More syncs follow (pod and status events); none may delete web-2 while web-0 and
    // web-1 below it are unhealthy.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let pods = pods_of(ctx, name).await?;
    ensure!(
        pods.len() == 3 && pods.iter().all(|p| p.metadata.deletion_timestamp.is_none()),
        "an OrderedReady scale-down deleted a pod while web-0 was unhealthy: {}",
        describe(&pods)
    );
    let status = api.get(name).await?.status.unwrap_or_default();
    let waiting = status
        .conditions
        .iter()
        .find(|c| c.type_ == "WaitingForPod" && c.status == "True");
    ensure!(
        waiting.is_some_and(|c| c.message.contains("web-0")),
        "the set says it waits for web-0: {:?}",
        status.conditions
    );
    Ok(())
}

#[tokio::test]
async fn ordered_ready_scale_down_waits_for_the_lowest_unhealthy_pod() -> Result<()> {
    run_in_namespace(
        "sts-scale-down-unhealthy",
        |ctx| async move { body(&ctx).await },
    )
    .await
}

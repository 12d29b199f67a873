//! In-place updates that restart containers the kubelet would not, or in an order, on the
//! real kubelet node: a template label that one container's env reads (downward API) is
//! changed in place and the node's agent restarts exactly that container, which then
//! reads the new value; two containers' images changed under a launch priority restart
//! one after the other, the second only once the first is ready.

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::LogParams;
use serde_json::{Value, json};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use crate::cloneset_support;
use cloneset_support::{ROLLOUT, apply, json_patch, pods_of, uid, wait_rolled_out};

/// A container of the web image serving on `port`, ready 3 s after it starts (so a
/// container started after it became ready starts at least 3 s later).
fn web_container(ctx: &TestContext, name: &str, port: u16, env: Value) -> Value {
    json!({
        "name": name,
        "image": ctx.cluster.image("web:v1"),
        // Prints what its env read at start, so the pod's log shows it.
        "command": ["/bin/sh", "-c",
            format!("echo TIER=$TIER; exec /bin/httpd -f -p {port} -h /www")],
        "env": env,
        "readinessProbe": {
            "httpGet": { "path": "/version", "port": port },
            "initialDelaySeconds": 3,
            "periodSeconds": 1,
        },
    })
}

/// A one-pod CloneSet on the kubelet node with containers `web` (its env reads the pod's
/// `tier` label) and `side`, updated InPlaceIfPossible.
fn two_container_cloneset(ctx: &TestContext, name: &str, side_env: Value) -> Value {
    let tier = json!([{ "name": "TIER",
        "valueFrom": { "fieldRef": { "fieldPath": "metadata.labels['tier']" } } }]);
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": { "name": name, "namespace": ctx.namespace },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "updateStrategy": { "type": "InPlaceIfPossible" },
            "template": {
                "metadata": { "labels": { "app": name, "tier": "front" } },
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "affinity": { "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": [
                            { "matchExpressions": [
                                { "key": "type", "operator": "NotIn", "values": ["kwok"] }] }
                        ] }
                    } },
                    "containers": [
                        web_container(ctx, "web", 8080, tier),
                        web_container(ctx, "side", 8081, side_env),
                    ],
                },
            },
        },
    })
}

fn status_of(pod: &Pod, name: &str) -> Result<ContainerStatus> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == name))
        .cloned()
        .with_context(|| format!("no status of container {name}"))
}

fn started_at(status: &ContainerStatus) -> Result<Timestamp> {
    stevedore_tests::pods::started_at(status)
        .with_context(|| format!("container {} is not running", status.name))
}

async fn only_pod(ctx: &TestContext, name: &str) -> Result<Pod> {
    let pods = pods_of(ctx, name).await?;
    ensure!(pods.len() == 1, "expected one pod, found {}", pods.len());
    pods.into_iter().next().context("one pod")
}

/// Applies the set, waits for it, changes it by `ops` and waits for the new revision to
/// roll out; the pod before and after.
async fn update(ctx: &TestContext, set: Value, ops: Value) -> Result<(Pod, Pod)> {
    let name = set["metadata"]["name"]
        .as_str()
        .context("a name")?
        .to_owned();
    apply(ctx, &set).await?;
    wait_rolled_out(ctx, &name, ROLLOUT).await?;
    let before = only_pod(ctx, &name).await?;
    json_patch(ctx, &name, ops).await?;
    // Rolled out also means the pod's in-place state records the update's end.
    poll_until("the in-place update to finish", ROLLOUT, || async {
        wait_rolled_out(ctx, &name, ROLLOUT).await?;
        let pod = only_pod(ctx, &name).await?;
        ensure!(
            !cloneset_support::in_place_update_pending(&pod),
            "still updating"
        );
        Ok(Some(pod))
    })
    .await
    .map(|after| (before, after))
}

#[tokio::test]
async fn a_label_read_by_env_restarts_only_the_container_reading_it() -> Result<()> {
    run_in_namespace("cloneset-inplace-env", |ctx| async move {
        let set = two_container_cloneset(&ctx, "env", json!([]));
        let ops = json!([{ "op": "replace",
            "path": "/spec/template/metadata/labels/tier", "value": "back" }]);
        let (before, after) = update(&ctx, set, ops).await?;
        ensure!(uid(&after) == uid(&before), "the pod was replaced");
        let label = after.metadata.labels.as_ref().and_then(|l| l.get("tier"));
        ensure!(label.map(String::as_str) == Some("back"), "label {label:?}");
        let (web_was, web_now) = (status_of(&before, "web")?, status_of(&after, "web")?);
        ensure!(
            web_now.restart_count == web_was.restart_count + 1
                && web_now.container_id != web_was.container_id,
            "web did not restart once: {} → {} restarts",
            web_was.restart_count,
            web_now.restart_count
        );
        let (side_was, side_now) = (status_of(&before, "side")?, status_of(&after, "side")?);
        ensure!(
            side_now.restart_count == side_was.restart_count
                && side_now.container_id == side_was.container_id,
            "side restarted: {:?} → {:?}",
            side_was.container_id,
            side_now.container_id
        );
        let params = LogParams {
            container: Some("web".into()),
            ..LogParams::default()
        };
        let pod_name = after.metadata.name.clone().unwrap_or_default();
        let log = ctx.api::<Pod>().logs(&pod_name, &params).await?;
        ensure!(log.contains("TIER=back"), "web's log: {log:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_higher_priority_container_restarts_first_and_the_next_after_it_is_ready() -> Result<()>
{
    run_in_namespace("cloneset-inplace-priority", |ctx| async move {
        let side_first = json!([{ "name": "KRUISE_CONTAINER_PRIORITY", "value": "10" }]);
        let set = two_container_cloneset(&ctx, "prio", side_first);
        let v2 = ctx.cluster.image("web:v2");
        let ops = json!([
            { "op": "replace", "path": "/spec/template/spec/containers/0/image", "value": v2 },
            { "op": "replace", "path": "/spec/template/spec/containers/1/image", "value": v2 },
        ]);
        let (before, after) = update(&ctx, set, ops).await?;
        ensure!(uid(&after) == uid(&before), "the pod was replaced");
        let (web, side) = (status_of(&after, "web")?, status_of(&after, "side")?);
        for (was, now) in [
            (status_of(&before, "web")?, &web),
            (status_of(&before, "side")?, &side),
        ] {
            ensure!(
                now.restart_count == was.restart_count + 1 && now.image_id != was.image_id,
                "container {} did not restart once on the new image",
                now.name
            );
        }
        let (web_started, side_started) = (started_at(&web)?, started_at(&side)?);
        // side is ready 3 s after it starts at the earliest; web starts only after that.
        let gap = web_started.duration_since(side_started);
        ensure!(
            gap >= SignedDuration::from_secs(3),
            "web started {gap} after side (side at {side_started}, web at {web_started})"
        );
        Ok(())
    })
    .await
}

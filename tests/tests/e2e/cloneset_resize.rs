//! In-place resource resize end to end on the real kubelet node: a CloneSet template change
//! of only a container's cpu request is applied through the pod's `resize` subresource —
//! the same pod, no container restart under `resizePolicy` NotRequired, the new request in
//! the container's status — and an image and a cpu change in one update restart the
//! container once, on the new image with the new request; with two containers of
//! different launch priorities each is resized with its own batch, not all with the first.

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::ResourceExt as _;
use serde_json::{Value, json};
use stevedore_api::CloneSet;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use crate::cloneset_support;
use cloneset_support::{
    Nodes, ROLLOUT, STATE_ANNOTATION, apply, json_patch, pods_of, uid, wait_rolled_out,
    web_cloneset,
};

/// The web CloneSet on the kubelet node with a 50m cpu request that resizes without a
/// restart.
fn resizable_cloneset(ctx: &TestContext, name: &str) -> Value {
    let mut cs = web_cloneset(ctx, name, 1, "InPlaceIfPossible", Nodes::Kubelet);
    let container = &mut cs["spec"]["template"]["spec"]["containers"][0];
    container["resources"] = json!({
        "requests": { "cpu": "50m", "memory": "32Mi" },
        "limits": { "memory": "64Mi" },
    });
    container["resizePolicy"] = json!([
        { "resourceName": "cpu", "restartPolicy": "NotRequired" },
        { "resourceName": "memory", "restartPolicy": "NotRequired" },
    ]);
    cs
}

fn web_status(pod: &Pod) -> Result<ContainerStatus> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == "web"))
        .cloned()
        .with_context(|| format!("pod {} has no status of container web", pod.name_any()))
}

fn cpu_request(resources: Option<&k8s_openapi::api::core::v1::ResourceRequirements>) -> String {
    resources
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("cpu"))
        .map(|q| q.0.clone())
        .unwrap_or_default()
}

async fn only_pod(ctx: &TestContext, name: &str) -> Result<Pod> {
    let pods = pods_of(ctx, name).await?;
    ensure!(pods.len() == 1, "expected one pod, found {}", pods.len());
    pods.into_iter().next().context("one pod")
}

/// Creates the set, changes the template by `ops`, waits for the new revision to roll
/// out; the pod before and after.
async fn update(ctx: &TestContext, name: &str, ops: Value) -> Result<(Pod, Pod)> {
    apply(ctx, &resizable_cloneset(ctx, name)).await?;
    let cs = wait_rolled_out(ctx, name, ROLLOUT).await?;
    let old_revision = cs.status.map(|s| s.update_revision).unwrap_or_default();
    let before = only_pod(ctx, name).await?;
    json_patch(ctx, name, ops).await?;
    let cs: CloneSet = wait_rolled_out(ctx, name, ROLLOUT).await?;
    let new_revision = cs.status.map(|s| s.update_revision).unwrap_or_default();
    ensure!(
        new_revision != old_revision,
        "updateRevision did not change"
    );
    Ok((before, only_pod(ctx, name).await?))
}

fn resize_conditions(pod: &Pod) -> Vec<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.type_.starts_with("PodResize") && c.status == "True")
        .map(|c| c.type_.clone())
        .collect()
}

#[tokio::test]
async fn a_cpu_request_change_resizes_the_pod_in_place_without_a_restart() -> Result<()> {
    run_in_namespace("cloneset-resize-cpu", |ctx| async move {
        let name = "web";
        let ops = json!([{ "op": "replace",
            "path": "/spec/template/spec/containers/0/resources/requests/cpu", "value": "100m" }]);
        let (before, after) = update(&ctx, name, ops).await?;
        let (was, now) = (web_status(&before)?, web_status(&after)?);
        ensure!(uid(&after) == uid(&before), "the pod was replaced");
        ensure!(
            now.restart_count == was.restart_count && now.container_id == was.container_id,
            "the container restarted: {:?} → {:?}",
            was.container_id,
            now.container_id
        );
        ensure!(cpu_request(was.resources.as_ref()) == "50m", "{was:?}");
        ensure!(
            cpu_request(now.resources.as_ref()) == "100m",
            "status resources {:?}",
            now.resources
        );
        let spec = after.spec.as_ref().and_then(|s| s.containers.first());
        ensure!(cpu_request(spec.and_then(|c| c.resources.as_ref())) == "100m");
        let left = resize_conditions(&after);
        ensure!(left.is_empty(), "resize conditions left: {left:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_image_and_cpu_change_update_in_one_restart() -> Result<()> {
    run_in_namespace("cloneset-resize-image", |ctx| async move {
        let name = "web";
        let v2 = ctx.cluster.image("web:v2");
        let ops = json!([
            { "op": "replace", "path": "/spec/template/spec/containers/0/image", "value": v2 },
            { "op": "replace",
              "path": "/spec/template/spec/containers/0/resources/requests/cpu", "value": "100m" },
        ]);
        let (before, after) = update(&ctx, name, ops).await?;
        let (was, now) = (web_status(&before)?, web_status(&after)?);
        ensure!(uid(&after) == uid(&before), "the pod was replaced");
        ensure!(
            now.restart_count == was.restart_count + 1,
            "restarts {} → {}",
            was.restart_count,
            now.restart_count
        );
        ensure!(
            now.image_id != was.image_id,
            "still image ID {}",
            was.image_id
        );
        ensure!(
            cpu_request(now.resources.as_ref()) == "100m",
            "status resources {:?}",
            now.resources
        );
        Ok(())
    })
    .await
}

/// The resizable set with a second container `sidecar` (a sleep of the same image) of
/// launch priority 10, so an in-place update gives it a batch before `web`'s.
fn two_priority_cloneset(ctx: &TestContext, name: &str) -> Result<Value> {
    let mut cs = resizable_cloneset(ctx, name);
    let web = cs["spec"]["template"]["spec"]["containers"][0].clone();
    let sidecar = json!({
        "name": "sidecar",
        "image": ctx.cluster.image("web:v1"),
        "command": ["/bin/sleep", "36000"],
        "env": [{ "name": "KRUISE_CONTAINER_PRIORITY", "value": "10" }],
        "resources": web["resources"],
        "resizePolicy": web["resizePolicy"],
    });
    (cs["spec"]["template"]["spec"]["containers"].as_array_mut())
        .context("the template's containers")?
        .push(sidecar);
    Ok(cs)
}

/// Container `name`'s image and cpu request in the pod's spec.
fn spec_of(pod: &Pod, name: &str) -> (String, String) {
    let container = (pod.spec.iter().flat_map(|s| &s.containers)).find(|c| c.name == name);
    let image = container.and_then(|c| c.image.clone()).unwrap_or_default();
    (
        image,
        cpu_request(container.and_then(|c| c.resources.as_ref())),
    )
}

#[tokio::test]
async fn each_container_is_resized_with_its_launch_priority_batch() -> Result<()> {
    // OpenKruise applies a container's new resources with its own batch. The sidecar's
    // new image cannot be pulled, so its batch never ends and web's batch never starts:
    // web must keep its image and its cpu request, and wait in the state annotation.
    run_in_namespace("cloneset-resize-priority", |ctx| async move {
        let name = "web";
        apply(&ctx, &two_priority_cloneset(&ctx, name)?).await?;
        wait_rolled_out(&ctx, name, ROLLOUT).await?;
        let v1 = ctx.cluster.image("web:v1");
        let ops = json!([
            { "op": "replace", "path": "/spec/template/spec/containers/0/image",
              "value": ctx.cluster.image("web:v2") },
            { "op": "replace",
              "path": "/spec/template/spec/containers/0/resources/requests/cpu", "value": "100m" },
            { "op": "replace", "path": "/spec/template/spec/containers/1/image",
              "value": ctx.cluster.image("web:no-such-tag") },
            { "op": "replace",
              "path": "/spec/template/spec/containers/1/resources/requests/cpu", "value": "80m" },
        ]);
        json_patch(&ctx, name, ops).await?;
        let pod = poll_until("the sidecar's batch failing to pull", ROLLOUT, || async {
            let pod = only_pod(&ctx, name).await?;
            let statuses = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref());
            let sidecar = statuses.into_iter().flatten().find(|c| c.name == "sidecar");
            let waiting = sidecar.and_then(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone());
            let failing = matches!(
                waiting.as_deref(),
                Some("ErrImagePull" | "ImagePullBackOff")
            );
            Ok(failing.then_some(pod))
        })
        .await?;
        let (_, sidecar_cpu) = spec_of(&pod, "sidecar");
        ensure!(
            sidecar_cpu == "80m",
            "the sidecar was not resized with its batch: {sidecar_cpu}"
        );
        let web = spec_of(&pod, "web");
        ensure!(
            web == (v1, "50m".to_owned()),
            "web changed before its batch: {web:?}"
        );
        let state = pod
            .annotations()
            .get(STATE_ANNOTATION)
            .context("no state annotation")?;
        let state: Value = serde_json::from_str(state)?;
        ensure!(
            state["nextContainerResources"]["web"]["requests"]["cpu"] == json!("100m"),
            "{state}"
        );
        let batches = &state["containerBatchesRecord"];
        ensure!(
            batches.as_array().map(Vec::len) == Some(1)
                && batches[0]["containers"] == json!(["sidecar"]),
            "{state}"
        );
        Ok(())
    })
    .await
}

//! Real storage that expands: claims on the local cluster's CSI host-path driver
//! (tests/csi-hostpath, with the kubernetes-csi provisioner and resizer, started by
//! `cluster.sh up`) bind, carry data across a pod's recreation on the real kubelet node,
//! grow when their class allows it (resizer → ControllerExpandVolume → the kubelet's
//! NodeExpandVolume), and are refused growth by the apiserver when it does not.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{DeleteParams, LogParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stevedore_tests::pods::is_running_and_ready;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

const DRIVER: &str = "hostpath.csi.stevedore.dev";
const EXPANDABLE: &str = "stevedore-expandable";
const FIXED: &str = "stevedore-fixed";
const POD_START: Duration = Duration::from_secs(180);
const BIND: Duration = Duration::from_secs(60);
/// The kubelet expands a volume in use at the pod's next sync: within a minute and a
/// half unless the pod changes (the test nudges it, see `nudge_kubelet`).
const EXPANSION: Duration = Duration::from_secs(150);

async fn create_claim(ctx: &TestContext, name: &str, class: &str, size: &str) -> Result<()> {
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "storageClassName": class,
            "accessModes": ["ReadWriteOnce"],
            "resources": { "requests": { "storage": size } }
        }
    }))?;
    ctx.api::<PersistentVolumeClaim>()
        .create(&PostParams::default(), &claim)
        .await?;
    Ok(())
}

/// The claim once Bound, with the PersistentVolume the provisioner made for it.
async fn bound_claim(
    ctx: &TestContext,
    name: &str,
) -> Result<(PersistentVolumeClaim, PersistentVolume)> {
    let claim = poll_until(&format!("claim {name} Bound"), BIND, || async {
        let claim = ctx.api::<PersistentVolumeClaim>().get(name).await?;
        let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
        Ok((phase == Some("Bound")).then_some(claim))
    })
    .await?;
    let volume_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .context("a Bound claim names its volume")?;
    let volume = Api::<PersistentVolume>::all(ctx.client.clone())
        .get(&volume_name)
        .await?;
    Ok((claim, volume))
}

fn claim_capacity(claim: &PersistentVolumeClaim) -> Option<String> {
    let capacity = claim.status.as_ref()?.capacity.as_ref()?;
    capacity.get("storage").map(|q| q.0.clone())
}

fn has_condition(claim: &PersistentVolumeClaim, type_: &str) -> bool {
    let conditions = claim.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|all| all.iter().any(|c| c.type_ == type_))
}

/// A pod on the kubelet node that mounts `claim` at /data and runs `script`.
async fn start_pod(ctx: &TestContext, name: &str, claim: &str, script: &str) -> Result<()> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "nodeSelector": { "kubernetes.io/hostname": ctx.cluster.node_name },
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app",
                "image": ctx.cluster.image("web:v1"),
                "command": ["/bin/sh", "-c", script],
                "volumeMounts": [{ "name": "data", "mountPath": "/data" }],
                "readinessProbe": {
                    "exec": { "command": ["/bin/cat", "/data/token"] },
                    "periodSeconds": 1
                }
            }],
            "volumes": [{ "name": "data", "persistentVolumeClaim": { "claimName": claim } }]
        }
    }))?;
    ctx.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await?;
    poll_until(
        &format!("pod {name} Ready with its volume"),
        POD_START,
        || async {
            let pod = ctx.api::<Pod>().get(name).await?;
            Ok(is_running_and_ready(&pod).then_some(()))
        },
    )
    .await
}

async fn delete_pod(ctx: &TestContext, name: &str) -> Result<()> {
    ctx.api::<Pod>()
        .delete(name, &DeleteParams::default())
        .await?;
    poll_until(
        &format!("pod {name} gone (its volume unpublished)"),
        POD_START,
        || async {
            let pod = ctx.api::<Pod>().get_opt(name).await?;
            Ok(pod.is_none().then_some(()))
        },
    )
    .await
}

#[tokio::test]
async fn a_claim_on_the_expandable_class_binds_and_keeps_a_file_across_pod_recreation() -> Result<()>
{
    run_in_namespace("csi-data-survives", |ctx| async move {
        create_claim(&ctx, "data", EXPANDABLE, "64Mi").await?;
        let (claim, volume) = bound_claim(&ctx, "data").await?;
        let csi = volume.spec.as_ref().and_then(|s| s.csi.as_ref());
        ensure!(
            csi.map(|c| c.driver.as_str()) == Some(DRIVER),
            "the volume is provisioned by {DRIVER}, got {csi:?}"
        );
        ensure!(
            claim_capacity(&claim).as_deref() == Some("64Mi"),
            "a new claim has what it asked for, got {:?}",
            claim_capacity(&claim)
        );

        // A token of this namespace: what the second pod reads can only come from the first.
        let token = ctx.namespace.clone();
        start_pod(
            &ctx,
            "writer",
            "data",
            &format!("echo {token} > /data/token && exec sleep 3600"),
        )
        .await?;
        delete_pod(&ctx, "writer").await?;
        start_pod(&ctx, "reader", "data", "cat /data/token && exec sleep 3600").await?;
        let logs = ctx
            .api::<Pod>()
            .logs("reader", &LogParams::default())
            .await?;
        ensure!(
            logs.trim() == token,
            "the second pod reads the first pod's file: got {logs:?}, want {token:?}"
        );
        // The data lives in the driver's volume directory on this host.
        let volume_name = volume.metadata.name.context("the volume has a name")?;
        let on_host = ctx
            .cluster
            .state_dir
            .join("csi-hostpath/volumes")
            .join(&volume_name)
            .join("token");
        let stored = std::fs::read_to_string(&on_host)
            .with_context(|| format!("reading {}", on_host.display()))?;
        ensure!(
            stored.trim() == token,
            "{} holds {stored:?}",
            on_host.display()
        );
        Ok(())
    })
    .await
}

/// The kubelet expands a volume in use when it next syncs the pod; any change to the pod
/// makes it sync now, rather than at its periodic sync up to ~90 s later.
async fn nudge_kubelet(ctx: &TestContext, pod: &str) -> Result<()> {
    let patch = json!({ "metadata": { "annotations": { "stevedore.dev/test-resync": "1" } } });
    ctx.api::<Pod>()
        .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

#[tokio::test]
async fn expanding_a_claim_in_use_on_the_expandable_class_raises_its_capacity() -> Result<()> {
    run_in_namespace("csi-expand", |ctx| async move {
        create_claim(&ctx, "data", EXPANDABLE, "64Mi").await?;
        let (_, volume) = bound_claim(&ctx, "data").await?;
        let token = ctx.namespace.clone();
        start_pod(
            &ctx,
            "app",
            "data",
            &format!("echo {token} > /data/token && exec sleep 3600"),
        )
        .await?;

        let patch = json!({ "spec": { "resources": { "requests": { "storage": "128Mi" } } } });
        ctx.api::<PersistentVolumeClaim>()
            .patch("data", &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        // The resizer's ControllerExpandVolume asks for node expansion: the claim waits
        // for the kubelet with FileSystemResizePending.
        poll_until(
            "the controller's part of the expansion done",
            EXPANSION,
            || async {
                let claim = ctx.api::<PersistentVolumeClaim>().get("data").await?;
                let waiting = has_condition(&claim, "FileSystemResizePending");
                let done = claim_capacity(&claim).as_deref() == Some("128Mi");
                Ok((waiting || done).then_some(()))
            },
        )
        .await?;
        nudge_kubelet(&ctx, "app").await?;
        let claim = poll_until("status.capacity 128Mi", EXPANSION, || async {
            let claim = ctx.api::<PersistentVolumeClaim>().get("data").await?;
            Ok((claim_capacity(&claim).as_deref() == Some("128Mi")).then_some(claim))
        })
        .await?;
        ensure!(
            !has_condition(&claim, "FileSystemResizePending") && !has_condition(&claim, "Resizing"),
            "no resize condition is left once the capacity is raised: {:?}",
            claim.status.and_then(|s| s.conditions)
        );
        let volume_name = volume.metadata.name.context("the volume has a name")?;
        let volume = Api::<PersistentVolume>::all(ctx.client.clone())
            .get(&volume_name)
            .await?;
        let volume_capacity = volume
            .spec
            .and_then(|s| s.capacity)
            .and_then(|c| c.get("storage").map(|q| q.0.clone()));
        ensure!(
            volume_capacity.as_deref() == Some("128Mi"),
            "the volume records the new size, got {volume_capacity:?}"
        );
        // The pod kept running on its volume, and its data, through the expansion.
        let pod = ctx.api::<Pod>().get("app").await?;
        ensure!(
            is_running_and_ready(&pod),
            "the pod using the claim still runs"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn expanding_a_claim_on_the_fixed_class_is_refused_by_the_apiserver() -> Result<()> {
    run_in_namespace("csi-fixed", |ctx| async move {
        create_claim(&ctx, "data", FIXED, "64Mi").await?;
        bound_claim(&ctx, "data").await?;
        let patch = json!({ "spec": { "resources": { "requests": { "storage": "128Mi" } } } });
        let refused = ctx
            .api::<PersistentVolumeClaim>()
            .patch("data", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .err()
            .context("growing a claim whose class does not allow expansion must be refused")?;
        let kube::Error::Api(status) = &refused else {
            anyhow::bail!("expected the apiserver's refusal, got: {refused}");
        };
        ensure!(status.code == 403, "refused as Forbidden, got {}: {}", status.code, status.message);
        let want = "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize";
        ensure!(
            status.message.contains(want),
            "the refusal says why: {:?}",
            status.message
        );
        let claim = ctx.api::<PersistentVolumeClaim>().get("data").await?;
        ensure!(
            claim_capacity(&claim).as_deref() == Some("64Mi"),
            "the claim keeps its size, got {:?}",
            claim_capacity(&claim)
        );
        Ok(())
    })
    .await
}

//! Smoke suite: proves the local cluster is a real one. Pods run on the kubelet node
//! through containerd + runc + CNI, garbage collection works, PVCs bind from the default
//! StorageClass, simulated nodes run pods, and a second `up` changes nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;
use stevedore_tests::pods::is_running_and_ready;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

const POD_START: Duration = Duration::from_secs(180);

fn labels(app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), app.to_owned())])
}

async fn pods_with_label(ctx: &TestContext, app: &str) -> Result<Vec<Pod>> {
    let lp = ListParams::default().labels(&format!("app={app}"));
    Ok(ctx.api::<Pod>().list(&lp).await?.items)
}

#[tokio::test]
async fn deployment_from_local_registry_runs_ready_on_the_kubelet_node_and_is_collected()
-> Result<()> {
    run_in_namespace("deployment-on-kubelet", |ctx| async move {
        let image = ctx.cluster.image("web:v1");
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": { "name": "web" },
            "spec": {
                "replicas": 2,
                "selector": { "matchLabels": labels("web") },
                "template": {
                    "metadata": { "labels": labels("web") },
                    "spec": {
                        "nodeSelector": { "kubernetes.io/hostname": ctx.cluster.node_name },
                        "containers": [{
                            "name": "web",
                            "image": image,
                            "readinessProbe": {
                                "httpGet": { "path": "/version", "port": 8080 },
                                "periodSeconds": 1
                            }
                        }]
                    }
                }
            }
        }))?;
        let deployments = ctx.api::<Deployment>();
        deployments
            .create(&PostParams::default(), &deployment)
            .await?;

        let pods = poll_until("2 web pods Running and Ready", POD_START, || async {
            let pods = pods_with_label(&ctx, "web").await?;
            let ready = pods.iter().filter(|p| is_running_and_ready(p)).count();
            Ok((ready == 2).then_some(pods))
        })
        .await?;
        for pod in &pods {
            let spec = pod.spec.as_ref().context("pod has a spec")?;
            ensure!(spec.node_name.as_deref() == Some(ctx.cluster.node_name.as_str()));
            let status = pod.status.as_ref().context("pod has a status")?;
            let ip = status.pod_ip.as_deref().unwrap_or_default();
            ensure!(
                ip.starts_with("198.18.128."),
                "pod IP {ip} is not from the CNI bridge"
            );
            let container = &status.container_statuses.as_ref().context("statuses")?[0];
            ensure!(
                container.image_id.contains("sha256:"),
                "kubelet reports a real image ID, got {:?}",
                container.image_id
            );
        }

        deployments
            .delete("web", &DeleteParams::background())
            .await?;
        poll_until("web pods garbage-collected", POD_START, || async {
            Ok(pods_with_label(&ctx, "web").await?.is_empty().then_some(()))
        })
        .await
    })
    .await
}

#[tokio::test]
async fn pod_with_pvc_from_default_storage_class_starts_with_volume_bound() -> Result<()> {
    run_in_namespace("pvc-default-class", |ctx| async move {
        let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": { "name": "data" },
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": { "requests": { "storage": "16Mi" } }
            }
        }))?;
        ctx.api::<PersistentVolumeClaim>()
            .create(&PostParams::default(), &pvc)
            .await?;
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": "writer", "labels": labels("writer") },
            "spec": {
                "nodeName": ctx.cluster.node_name,
                "containers": [{
                    "name": "writer",
                    "image": ctx.cluster.image("web:v1"),
                    "command": ["/bin/sh", "-c", "echo ok > /data/ok && exec sleep 3600"],
                    "volumeMounts": [{ "name": "data", "mountPath": "/data" }],
                    "readinessProbe": {
                        "exec": { "command": ["/bin/cat", "/data/ok"] },
                        "periodSeconds": 1
                    }
                }],
                "volumes": [{ "name": "data", "persistentVolumeClaim": { "claimName": "data" } }]
            }
        }))?;
        ctx.api::<Pod>()
            .create(&PostParams::default(), &pod)
            .await?;

        poll_until("writer pod Ready with its volume", POD_START, || async {
            let pod = ctx.api::<Pod>().get("writer").await?;
            Ok(is_running_and_ready(&pod).then_some(()))
        })
        .await?;
        let claim = ctx.api::<PersistentVolumeClaim>().get("data").await?;
        let phase = claim.status.and_then(|s| s.phase);
        ensure!(phase.as_deref() == Some("Bound"), "PVC phase {phase:?}");
        let class = claim.spec.and_then(|s| s.storage_class_name);
        ensure!(
            class.as_deref() == Some("standard"),
            "default class applied, got {class:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn pod_pinned_to_a_simulated_node_becomes_running() -> Result<()> {
    run_in_namespace("pod-on-kwok", |ctx| async move {
        let node = ctx.cluster.fake_node(0);
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": "simulated" },
            "spec": {
                "nodeName": node,
                "tolerations": [{ "key": "kwok.x-k8s.io/node", "operator": "Exists" }],
                "containers": [{ "name": "app", "image": ctx.cluster.image("web:v1") }]
            }
        }))?;
        ctx.api::<Pod>()
            .create(&PostParams::default(), &pod)
            .await?;
        poll_until("pod on the simulated node Running", POD_START, || async {
            let pod = ctx.api::<Pod>().get("simulated").await?;
            Ok(is_running_and_ready(&pod).then_some(()))
        })
        .await
    })
    .await
}

#[tokio::test]
async fn second_up_while_running_changes_nothing() -> Result<()> {
    let cluster = stevedore_tests::cluster().await?;
    let read_pids = || -> Result<BTreeMap<String, String>> {
        let mut pids = BTreeMap::new();
        for entry in std::fs::read_dir(cluster.pid_dir())? {
            let path = entry?.path();
            let name = path.file_stem().map(|s| s.to_string_lossy().into_owned());
            pids.insert(name.unwrap_or_default(), std::fs::read_to_string(&path)?);
        }
        Ok(pids)
    };
    let before = read_pids()?;
    let fake_nodes = stevedore_tests::cluster::FAKE_NODES.to_string();
    tokio::task::spawn_blocking(move || {
        stevedore_tests::cluster::run_cluster_script(&["up", "--fake-nodes", &fake_nodes])
    })
    .await??;
    let after = read_pids()?;
    ensure!(
        before.len() >= 10,
        "every component has a pid file: {before:?}"
    );
    ensure!(
        before == after,
        "a second up restarted something: {before:?} -> {after:?}"
    );
    Ok(())
}

//! Container launch priority on the real kubelet node: a pod annotated
//! `apps.kruise.io/container-launch-priority: Ordered` starts its three containers in spec
//! order, each only once the one before is ready; `KRUISE_CONTAINER_PRIORITY` envs order
//! them the same way, higher first, whatever the spec order; a pod asking for neither
//! gets no barrier env and no barrier ConfigMap; a priority that is not a number is
//! refused naming the container and the value; a pod with only `generateName` is named at
//! admission and its barrier names it.
//!
//! Every container runs `sh -c 'sleep 5; httpd -f -p <port>'` with a TCP readiness probe
//! on its port, so it cannot be ready before 5 s after it started: a container started
//! after the one before it was ready started at least 5 s after it. `startedAt` has
//! second precision, which cannot make a true gap of 5 s or more read as less.
//!
//! Run against a control plane with `containerlaunchpriority` and
//! `containerlaunchpriority-webhook` and its webhook installed
//! (`deploy/controlplane/webhook.yaml`, `stevedore-startup-priority`).

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt as _;
use kube::api::PostParams;
use serde_json::{Value, json};
use stevedore_tests::pods::{self, is_running_and_ready};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

const ANNOTATION: &str = "apps.kruise.io/container-launch-priority";
const PRIORITY_ENV: &str = "KRUISE_CONTAINER_PRIORITY";
const BARRIER_ENV: &str = "KRUISE_CONTAINER_BARRIER";
/// How long each container sleeps before it listens (and can be ready).
const SLEEP_SECONDS: i64 = 5;
/// Three containers in turn, each waiting for its key (the kubelet retries a container
/// whose ConfigMap key is missing about every 10 s).
const STARTED: Duration = Duration::from_secs(240);

/// A container sleeping, then serving HTTP on `port`, ready once it listens; with a
/// `KRUISE_CONTAINER_PRIORITY` when `priority` is given.
fn container(ctx: &TestContext, name: &str, port: u16, priority: Option<&str>) -> Value {
    let env: Vec<Value> = (priority.into_iter())
        .map(|p| json!({ "name": PRIORITY_ENV, "value": p }))
        .collect();
    json!({
        "name": name,
        "image": ctx.cluster.image("web:v1"),
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", format!("sleep {SLEEP_SECONDS}; httpd -f -p {port}")],
        "env": env,
        "readinessProbe": { "tcpSocket": { "port": port }, "periodSeconds": 1 },
    })
}

/// A pod on the kubelet node with `metadata` and `containers`.
fn pod(ctx: &TestContext, metadata: Value, containers: Vec<Value>) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": metadata,
        "spec": {
            "nodeName": ctx.cluster.node_name,
            "terminationGracePeriodSeconds": 1,
            "containers": containers,
        },
    }))?)
}

async fn create(ctx: &TestContext, pod: &Pod) -> Result<Pod> {
    (ctx.api::<Pod>().create(&PostParams::default(), pod).await).context("creating the pod")
}

/// Waits until every container of pod `name` is running and ready.
async fn wait_ready(ctx: &TestContext, name: &str) -> Result<Pod> {
    poll_until(
        &format!("pod {name} running and ready"),
        STARTED,
        || async {
            let pod = ctx.api::<Pod>().get(name).await?;
            Ok(is_running_and_ready(&pod).then_some(pod))
        },
    )
    .await
}

/// The key of the barrier env of `container`, if it has one.
fn barrier_key(pod: &Pod, container: &str) -> Result<Option<String>> {
    let spec = pod.spec.as_ref().context("the pod has no spec")?;
    let found = (spec.containers.iter())
        .find(|c| c.name == container)
        .with_context(|| format!("no container {container}"))?;
    let env = found.env.as_deref().unwrap_or_default();
    let barrier = env.iter().find(|e| e.name == BARRIER_ENV);
    Ok(barrier.map(|e| {
        let key = e
            .value_from
            .as_ref()
            .and_then(|v| v.config_map_key_ref.as_ref());
        key.map(|k| format!("{}/{}", k.name, k.key))
            .unwrap_or_default()
    }))
}

fn started_at(pod: &Pod, container: &str) -> Result<Timestamp> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    let status = (statuses.into_iter().flatten())
        .find(|s| s.name == container)
        .with_context(|| format!("no status of container {container}"))?;
    ensure!(status.restart_count == 0, "container {container} restarted");
    pods::started_at(status).with_context(|| format!("container {container} is not running"))
}

/// Each container of `order` started no sooner than the one before it could be ready.
fn ensure_started_in_order(pod: &Pod, order: &[&str]) -> Result<()> {
    for pair in order.windows(2) {
        let (before, after) = (started_at(pod, pair[0])?, started_at(pod, pair[1])?);
        let gap = after.duration_since(before);
        ensure!(
            gap >= SignedDuration::from_secs(SLEEP_SECONDS),
            "{} started {gap} after {} ({before} and {after}), before it could be ready",
            pair[1],
            pair[0]
        );
    }
    Ok(())
}

/// The barrier ConfigMap of `pod`: owned by it, with `keys`.
async fn ensure_barrier(ctx: &TestContext, pod: &Pod, keys: &[&str]) -> Result<()> {
    let name = format!("{}-barrier", pod.name_any());
    let barrier = ctx
        .api::<ConfigMap>()
        .get(&name)
        .await
        .context("the barrier ConfigMap")?;
    let owners = barrier.metadata.owner_references.unwrap_or_default();
    ensure!(
        owners
            .iter()
            .any(|o| o.kind == "Pod" && Some(&o.uid) == pod.metadata.uid.as_ref()),
        "{name} is not owned by its pod: {owners:?}"
    );
    let present: Vec<&str> = (barrier.data.iter().flatten())
        .map(|(k, _)| k.as_str())
        .collect();
    ensure!(
        present == keys,
        "{name} holds {present:?}, expected {keys:?}"
    );
    Ok(())
}

#[tokio::test]
async fn ordered_pod_starts_its_containers_in_spec_order() -> Result<()> {
    run_in_namespace("launch-ordered", |ctx| async move {
        let containers = vec![
            container(&ctx, "first", 8081, None),
            container(&ctx, "second", 8082, None),
            container(&ctx, "third", 8083, None),
        ];
        let metadata = json!({ "name": "ordered", "annotations": { ANNOTATION: "Ordered" } });
        let created = create(&ctx, &pod(&ctx, metadata, containers)?).await?;
        let keys = [
            barrier_key(&created, "first")?,
            barrier_key(&created, "second")?,
            barrier_key(&created, "third")?,
        ];
        let expected = [
            None,
            Some("ordered-barrier/p_-1".into()),
            Some("ordered-barrier/p_-2".into()),
        ];
        ensure!(
            keys == expected,
            "barrier envs {keys:?}, expected {expected:?}"
        );
        let ready = wait_ready(&ctx, "ordered").await?;
        ensure_started_in_order(&ready, &["first", "second", "third"])?;
        // Sorted as a ConfigMap keeps its keys.
        ensure_barrier(&ctx, &ready, &["p_-1", "p_-2"]).await
    })
    .await
}

#[tokio::test]
async fn env_priorities_start_higher_first_whatever_the_spec_order() -> Result<()> {
    run_in_namespace("launch-env", |ctx| async move {
        let containers = vec![
            container(&ctx, "low", 8081, Some("-5")),
            container(&ctx, "high", 8082, Some("10")),
            // No env: priority 0, between the two.
            container(&ctx, "middle", 8083, None),
        ];
        let created = create(&ctx, &pod(&ctx, json!({ "name": "by-env" }), containers)?).await?;
        ensure!(
            barrier_key(&created, "high")?.is_none(),
            "the highest priority waits on a barrier"
        );
        ensure!(
            barrier_key(&created, "middle")?.as_deref() == Some("by-env-barrier/p_0"),
            "middle waits on {:?}",
            barrier_key(&created, "middle")?
        );
        let ready = wait_ready(&ctx, "by-env").await?;
        ensure_started_in_order(&ready, &["high", "middle", "low"])?;
        ensure_barrier(&ctx, &ready, &["p_-5", "p_0"]).await
    })
    .await
}

#[tokio::test]
async fn a_pod_that_asks_for_no_order_gets_no_barrier() -> Result<()> {
    run_in_namespace("launch-none", |ctx| async move {
        let containers = vec![
            container(&ctx, "a", 8081, None),
            container(&ctx, "b", 8082, None),
        ];
        let created = create(&ctx, &pod(&ctx, json!({ "name": "plain" }), containers)?).await?;
        for name in ["a", "b"] {
            ensure!(
                barrier_key(&created, name)?.is_none(),
                "{name} got a barrier env"
            );
        }
        wait_ready(&ctx, "plain").await?;
        let barrier = ctx.api::<ConfigMap>().get_opt("plain-barrier").await?;
        ensure!(
            barrier.is_none(),
            "a barrier ConfigMap was made for a pod that asked for none"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_priority_that_is_no_number_is_refused_naming_container_and_value() -> Result<()> {
    run_in_namespace("launch-refused", |ctx| async move {
        let containers = vec![
            container(&ctx, "a", 8081, None),
            container(&ctx, "proxy", 8082, Some("high")),
        ];
        let refused = ctx
            .api::<Pod>()
            .create(
                &PostParams::default(),
                &pod(&ctx, json!({ "name": "bad" }), containers)?,
            )
            .await;
        let Err(kube::Error::Api(status)) = refused else {
            anyhow::bail!("the pod was not refused: {refused:?}");
        };
        ensure!(
            status.message.contains("proxy") && status.message.contains("\"high\""),
            "the refusal names not the container and the value: {}",
            status.message
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_pod_with_only_generate_name_is_named_at_admission() -> Result<()> {
    run_in_namespace("launch-generate", |ctx| async move {
        let containers = vec![
            container(&ctx, "a", 8081, None),
            container(&ctx, "b", 8082, None),
        ];
        let metadata = json!({ "generateName": "gen-", "annotations": { ANNOTATION: "Ordered" } });
        let created = create(&ctx, &pod(&ctx, metadata, containers)?).await?;
        let name = created.name_any();
        ensure!(
            name.starts_with("gen-") && name.len() == 9,
            "unexpected name {name}"
        );
        let key = barrier_key(&created, "b")?;
        ensure!(
            key.as_deref() == Some(format!("{name}-barrier/p_-1").as_str()),
            "b waits on {key:?}, not on its own pod's barrier"
        );
        let ready = wait_ready(&ctx, &name).await?;
        ensure_started_in_order(&ready, &["a", "b"])
    })
    .await
}

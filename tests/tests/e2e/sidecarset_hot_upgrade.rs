//! SidecarSet HotUpgrade end to end on the real kubelet node: a CloneSet's pod gets the
//! sidecar `proxy` as two containers, `proxy-1` working (`handoff:v1`, HTTP on 8081) and
//! `proxy-2` idle (the empty image); a change of the sidecar's image swaps them: the new
//! image starts in `proxy-2`, and only once it runs and is ready is `proxy-1` set to the
//! empty image, the working-slot annotation naming `proxy-2`. The pod keeps its UID and
//! its main container never restarts.
//!
//! Two things are asserted across the upgrade. The controller's guarantee, sampled every
//! 100 ms: at every sample one of the two containers runs the sidecar (not the empty
//! image) and is running and ready, so the old one is emptied only after the new one is
//! ready. And what that buys a client: a loop of HTTP requests fails none, and the
//! versions it is served go v1 then v2, never back. The two containers share the pod's
//! network, so they cannot both bind the port; the sidecar (`tests/images/handoff`) hands
//! its listening socket to its successor instead, as Envoy's hot restart does, through a
//! Unix socket in an emptyDir both containers mount: the old process stops accepting
//! before the new one starts, and both hold one accept queue, so a connection made in
//! between waits in it. Its readiness probe passes once it accepts on the socket (and in
//! the idle container, whose version is 0): without one, "ready" would mean "started",
//! and the old container could be emptied before the new one took the socket.
//!
//! Run against a control plane with the `sidecarset` controller and its webhook, as
//! `sidecarset.rs`; the test host must reach the kubelet node's pod IPs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, LogParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::SidecarSet;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::cloneset_support;
use cloneset_support::{Nodes, ROLLOUT, apply, pods_of, wait_rolled_out, web_cloneset};

const SIDECAR: &str = "proxy";
const FIRST: &str = "proxy-1";
const SECOND: &str = "proxy-2";
const PORT: u16 = 8081;
const EMPTY_IMAGE: &str = "large:v1";
const WORKING_SLOT: &str = "kruise.io/sidecarset-working-hotupgrade-container";
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// The client's pause between requests: many requests, so one in the moment of the
/// handoff is likely.
const REQUEST_EVERY: Duration = Duration::from_millis(10);
/// The directory, an emptyDir shared by both containers, holding the Unix socket the
/// listening socket passes through (the sidecar's default).
const HANDOFF_DIR: &str = "/run/handoff";

/// The readiness probe, run in both containers: the idle one (`SIDECARSET_VERSION` 0,
/// the empty image's shell) is ready at once; a working one once the sidecar accepts on
/// the listening socket (its ready file).
const READY_WHEN_ACCEPTING: &str = r#"[ "$SIDECARSET_VERSION" = 0 ] || [ -e /tmp/accepting ]"#;

fn sidecarset(ctx: &TestContext) -> Result<SidecarSet> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "SidecarSet",
        "metadata": { "name": format!("{}-mesh", ctx.namespace) },
        "spec": {
            "namespace": ctx.namespace,
            "selector": { "matchLabels": { "app": "web" } },
            "containers": [{
                "name": SIDECAR,
                "image": ctx.cluster.image("handoff:v1"),
                "imagePullPolicy": "IfNotPresent",
                "volumeMounts": [{ "name": "handoff", "mountPath": HANDOFF_DIR }],
                "readinessProbe": {
                    "exec": { "command": ["/bin/sh", "-c", READY_WHEN_ACCEPTING] },
                    "periodSeconds": 1,
                },
                "upgradeStrategy": {
                    "upgradeType": "HotUpgrade",
                    "hotUpgradeEmptyImage": ctx.cluster.image(EMPTY_IMAGE),
                },
            }],
            "volumes": [{ "name": "handoff", "emptyDir": {} }],
            "updateStrategy": { "maxUnavailable": 1 },
        },
    }))?)
}

fn status_of(pod: &Pod, name: &str) -> Option<ContainerStatus> {
    (pod.status.as_ref()?.container_statuses.as_ref()?)
        .iter()
        .find(|c| c.name == name)
        .cloned()
}

fn spec_image(pod: &Pod, name: &str) -> String {
    (pod.spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default())
    .iter()
    .find(|c| c.name == name)
    .and_then(|c| c.image.clone())
    .unwrap_or_default()
}

/// Whether container `name` of the pod runs the sidecar: neither its spec nor its status
/// names the empty image, and it is running and ready.
fn serves(pod: &Pod, name: &str) -> bool {
    let Some(status) = status_of(pod, name) else {
        return false;
    };
    let running = status.state.as_ref().is_some_and(|s| s.running.is_some());
    !spec_image(pod, name).ends_with(EMPTY_IMAGE)
        && !status.image.ends_with(EMPTY_IMAGE)
        && running
        && status.ready
}

fn working_slot(pod: &Pod) -> Option<String> {
    let map: Value = serde_json::from_str(pod.annotations().get(WORKING_SLOT)?).ok()?;
    map[SIDECAR].as_str().map(str::to_owned)
}

/// One HTTP GET of `/version` from the sidecar; the body on a 200.
async fn version(ip: &str) -> Result<String> {
    let exchange = async {
        let mut stream = TcpStream::connect((ip, PORT)).await?;
        stream
            .write_all(b"GET /version HTTP/1.0\r\nHost: sidecar\r\n\r\n")
            .await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        anyhow::Ok(response)
    };
    let response = tokio::time::timeout(Duration::from_secs(1), exchange).await??;
    ensure!(
        response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200"),
        "answered {response:?}"
    );
    Ok(response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .trim()
        .to_owned())
}

/// What the client loop saw: requests, failures (the first few errors), and the versions
/// in the order served, each run of one version once.
#[derive(Default, Debug)]
struct ClientLog {
    requests: u32,
    failures: u32,
    first_errors: Vec<String>,
    versions: Vec<String>,
}

async fn client_loop(ip: String, stop: Arc<AtomicBool>) -> ClientLog {
    let mut log = ClientLog::default();
    while !stop.load(Ordering::Relaxed) {
        log.requests += 1;
        match version(&ip).await {
            Ok(v) if log.versions.last() != Some(&v) => log.versions.push(v),
            Ok(_) => {}
            Err(error) => {
                log.failures += 1;
                if log.first_errors.len() < 5 {
                    log.first_errors.push(format!("{error:#}"));
                }
            }
        }
        tokio::time::sleep(REQUEST_EVERY).await;
    }
    log
}

/// Samples the pod every 100 ms until stopped: the number of samples and the first one
/// (if any) at which neither container served.
async fn pod_samples(pods: Api<Pod>, name: String, stop: Arc<AtomicBool>) -> (u32, Option<String>) {
    let (mut samples, mut gap) = (0, None);
    while !stop.load(Ordering::Relaxed) {
        if let Ok(pod) = pods.get(&name).await {
            samples += 1;
            if gap.is_none() && !serves(&pod, FIRST) && !serves(&pod, SECOND) {
                gap = Some(format!(
                    "neither container serves: {FIRST} {} ({:?}), {SECOND} {} ({:?})",
                    spec_image(&pod, FIRST),
                    status_of(&pod, FIRST),
                    spec_image(&pod, SECOND),
                    status_of(&pod, SECOND)
                ));
            }
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
    (samples, gap)
}

/// Waits until the pod's upgrade is over: `proxy-2` works and serves `handoff:v2`, `proxy-1`
/// runs the empty image, both ready, and the SidecarSet counts it updated and ready.
async fn wait_swapped(ctx: &TestContext, set: &str, pod: &str) -> Result<Pod> {
    let sets: Api<SidecarSet> = Api::all(ctx.client.clone());
    poll_until("the sidecar hot-upgraded to proxy-2", ROLLOUT, || async {
        let status = sets.get(set).await?.status.unwrap_or_default();
        let pod = ctx.api::<Pod>().get(pod).await?;
        let first = status_of(&pod, FIRST);
        let done = status.updated_ready_pods == 1
            && working_slot(&pod).as_deref() == Some(SECOND)
            && serves(&pod, SECOND)
            && status_of(&pod, SECOND).is_some_and(|s| s.image.ends_with("handoff:v2"))
            && first.is_some_and(|s| s.ready && s.image.ends_with(EMPTY_IMAGE));
        Ok(done.then_some(pod))
    })
    .await
}

#[tokio::test]
async fn a_hot_upgrade_fails_no_request_and_starts_the_new_sidecar_before_emptying_the_old()
-> Result<()> {
    run_in_namespace("sidecarset-hot", |ctx| async move {
        let sets: Api<SidecarSet> = Api::all(ctx.client.clone());
        let set = sets
            .create(&PostParams::default(), &sidecarset(&ctx)?)
            .await?
            .name_any();
        let checked = upgrade_and_watch(&ctx, &set).await;
        // Best effort: a leftover is limited to the deleted namespace and harms nothing.
        let _ = sets.delete(&set, &DeleteParams::default()).await;
        checked
    })
    .await
}

async fn upgrade_and_watch(ctx: &TestContext, set: &str) -> Result<()> {
    apply(
        ctx,
        &web_cloneset(ctx, "web", 1, "InPlaceIfPossible", Nodes::Kubelet),
    )
    .await?;
    wait_rolled_out(ctx, "web", ROLLOUT).await?;
    let before = pods_of(ctx, "web")
        .await?
        .into_iter()
        .next()
        .context("a pod")?;
    let name = before.name_any();
    ensure!(
        spec_image(&before, FIRST).ends_with("handoff:v1"),
        "{FIRST} runs {}",
        spec_image(&before, FIRST)
    );
    ensure!(
        spec_image(&before, SECOND).ends_with(EMPTY_IMAGE),
        "{SECOND} runs {}",
        spec_image(&before, SECOND)
    );
    ensure!(
        working_slot(&before).as_deref() == Some(FIRST),
        "working: {:?}",
        working_slot(&before)
    );
    let ip = (before.status.as_ref())
        .and_then(|s| s.pod_ip.clone())
        .context("a pod IP")?;
    poll_until("the sidecar answers v1", ROLLOUT, || async {
        Ok(version(&ip).await.ok().filter(|v| v == "v1"))
    })
    .await?;

    let stop = Arc::new(AtomicBool::new(false));
    let client = tokio::spawn(client_loop(ip.clone(), stop.clone()));
    let sampler = tokio::spawn(pod_samples(ctx.api::<Pod>(), name.clone(), stop.clone()));
    let patch = json!([{ "op": "replace", "path": "/spec/containers/0/image", "value": ctx.cluster.image("handoff:v2") }]);
    let upgraded = async {
        Api::<SidecarSet>::all(ctx.client.clone())
            .patch(
                set,
                &PatchParams::default(),
                &Patch::Json::<()>(serde_json::from_value(patch)?),
            )
            .await?;
        wait_swapped(ctx, set, &name).await
    }
    .await;
    // Keep watching a little after the swap: the old container's exit comes last.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let (log, (samples, gap)) = (client.await?, sampler.await?);
    let after = upgraded?;
    eprintln!(
        "hot upgrade: {} requests, {} failed {:?}, versions served {:?}; {samples} pod samples",
        log.requests, log.failures, log.first_errors, log.versions
    );
    ensure!(gap.is_none(), "{}", gap.unwrap_or_default());
    ensure!(samples >= 10, "only {samples} pod samples were taken");
    ensure!(after.uid() == before.uid(), "the pod was replaced");
    let web = status_of(&after, "web").context("the main container")?;
    ensure!(
        web.restart_count == 0,
        "the main container restarted {} times",
        web.restart_count
    );
    ensure!(
        log.failures == 0,
        "{} of {} requests failed across the hot upgrade, first: {:?}",
        log.failures,
        log.requests,
        log.first_errors
    );
    ensure!(
        log.versions == ["v1", "v2"],
        "the sidecar served {:?}, not v1 then v2 and never back",
        log.versions
    );
    took_the_socket_over(ctx, &name).await
}

/// The new container's sidecar says it took the listening socket from the old one (the
/// port stays bound by the old one until then, so it could not have bound it itself).
async fn took_the_socket_over(ctx: &TestContext, pod: &str) -> Result<()> {
    let params = LogParams {
        container: Some(SECOND.to_owned()),
        ..LogParams::default()
    };
    let log = ctx.api::<Pod>().logs(pod, &params).await?;
    ensure!(
        log.contains("took the listening socket over from the predecessor"),
        "{SECOND}'s log: {log:?}"
    );
    Ok(())
}

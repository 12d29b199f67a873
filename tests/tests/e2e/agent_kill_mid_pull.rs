//! E2E: the deployed agent killed (SIGKILL) in the middle of a pull, restarted by kubelet,
//! pulls the same image again to a complete, usable image. A test binary of its own, as it
//! takes the node's agent away for a while. Beside it, an agent process of the test's own
//! killed mid-layer, whose successor fetches only the rest of the layer.
//!
//! Runs alone: it kills the kubelet node's agent, which the suites on that node need.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;
use stevedore_tests::pods::is_ready;
use stevedore_tests::real_nodes::agent_process_of;
use stevedore_tests::{ClusterInfo, TestContext, poll_until, registry_log, run_in_namespace};

const SOCKET: &str = "unix:///run/stevedore/agent.sock";

fn grpcurl(cluster: &ClusterInfo, data: &str, method: &str) -> Command {
    let mut cmd = Command::new(&cluster.grpcurl);
    cmd.args(["-plaintext", "-max-time", "300", "-d", data, SOCKET, method]);
    cmd
}

/// `ctr -n k8s.io <args>` against the containerd under test.
fn ctr(cluster: &ClusterInfo, args: &[&str]) -> Result<String> {
    cluster.containerd.ctr(args)
}

/// (pod name, restart count) of the Ready agent on the kubelet node.
async fn ready_agent(ctx: &TestContext) -> Result<(String, i32)> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), "kube-system");
    let lp = ListParams::default()
        .labels("app.kubernetes.io/name=stevedore-agent")
        .fields(&format!("spec.nodeName={}", ctx.cluster.node_name));
    poll_until(
        "a Ready agent on the kubelet node",
        Duration::from_secs(180),
        || async {
            for pod in pods.list(&lp).await?.items {
                let ready = is_ready(&pod);
                let status = pod.status.clone().unwrap_or_default();
                let restarts = status
                    .container_statuses
                    .iter()
                    .flatten()
                    .map(|c| c.restart_count)
                    .sum();
                if ready {
                    return Ok(Some((pod.metadata.name.unwrap_or_default(), restarts)));
                }
            }
            Ok(None)
        },
    )
    .await
}

#[tokio::test]
async fn agent_killed_mid_pull_pulls_again_to_a_complete_image() -> Result<()> {
    // The deployed agent works on the containerd kubelet uses.
    if !stevedore_tests::cluster()
        .await?
        .containerd
        .runs_kubelets_pods("agent_killed_mid_pull_pulls_again_to_a_complete_image")
    {
        return Ok(());
    }
    run_in_namespace("agent-kill-mid-pull", |ctx| async move {
        let cluster = ctx.cluster;
        let image = cluster.image("large:v1");
        let (agent_before, _) = ready_agent(&ctx).await?;
        let request = json!({ "image": image }).to_string();
        let removed = grpcurl(
            cluster,
            &request,
            "stevedore.agent.v1.ImageService/RemoveImage",
        )
        .output()?;
        ensure!(
            removed.status.success(),
            "{}",
            String::from_utf8_lossy(&removed.stderr)
        );

        // Start a pull and kill the agent once bytes are flowing.
        let pull_request =
            json!({ "image": image, "pull_policy": "PULL_POLICY_ALWAYS" }).to_string();
        let mut pull = grpcurl(
            cluster,
            &pull_request,
            "stevedore.agent.v1.ImageService/PullImage",
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
        let stdout = pull.stdout.take().context("grpcurl stdout")?;
        let saw_bytes = tokio::task::spawn_blocking(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .any(|line| line.contains("\"bytesDone\"") && !line.contains("\"0\""))
        })
        .await?;
        ensure!(saw_bytes, "the pull never reported downloaded bytes");
        let pid = agent_process_of(&ctx.cluster.node_name)?.to_string();
        let killed = Command::new("kill").args(["-KILL", &pid]).status()?;
        ensure!(killed.success(), "could not kill agent process {pid}");
        let _ = pull.wait();

        // Replace the killed pod rather than wait for kubelet to restart its container: kubelet
        // backs off repeated restarts (up to 5 minutes), which would make reruns slow.
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), "kube-system");
        pods.delete(
            &agent_before,
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await?;
        poll_until("a new agent Ready", Duration::from_secs(180), || async {
            let (name, _) = ready_agent(&ctx).await?;
            Ok((name != agent_before).then_some(()))
        })
        .await?;

        // The new agent releases the dead one's pull lease instead of leaving it for a day.
        let owner = format!("stevedore.dev/agent-process={pid}:");
        poll_until(
            "the dead agent's lease released",
            Duration::from_secs(60),
            || async {
                let leases = ctr(cluster, &["leases", "ls"])?;
                Ok((!leases.contains(&owner)).then_some(()))
            },
        )
        .await?;

        let again = grpcurl(
            cluster,
            &pull_request,
            "stevedore.agent.v1.ImageService/PullImage",
        )
        .output()?;
        let out = String::from_utf8_lossy(&again.stdout);
        if !again.status.success() || !out.contains("PULL_PHASE_DONE") {
            bail!(
                "second pull: {out} {}",
                String::from_utf8_lossy(&again.stderr)
            );
        }
        let check = ctr(cluster, &["images", "check", &format!("name=={image}")])?;
        ensure!(
            check.contains("complete"),
            "image not complete after the second pull: {check}"
        );

        // And kubelet runs it without pulling.
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": "from-agent" },
            "spec": {
                "nodeName": cluster.node_name,
                "containers": [{ "name": "app", "image": image, "imagePullPolicy": "Never" }]
            }
        }))?;
        ctx.api::<Pod>()
            .create(&PostParams::default(), &pod)
            .await?;
        poll_until(
            "the pod runs the re-pulled image",
            Duration::from_secs(120),
            || async {
                let pod = ctx.api::<Pod>().get("from-agent").await?;
                Ok((pod.status.and_then(|s| s.phase).as_deref() == Some("Running")).then_some(()))
            },
        )
        .await
    })
    .await
}

use crate::agent_process;

/// An agent process of its own killed with SIGKILL in the middle of the layers of
/// `large:v1` (pulled through a throttled proxy) leaves what it wrote in containerd: the
/// next agent process completes the image fetching less than each interrupted layer from
/// the registry, as the registry's access log counts the bytes.
#[tokio::test]
async fn an_agent_killed_mid_layer_fetches_only_the_rest_of_the_layer_once_restarted() -> Result<()>
{
    use stevedore_proto::stevedore::agent::v1::{
        self as api, image_service_client::ImageServiceClient,
    };
    use stevedore_tests::proxy::Proxy;
    let cluster = stevedore_tests::cluster().await?;
    let proxy = Proxy::start(&cluster.registry).await?;
    proxy.throttle(Some(8 << 20));
    let image = format!("{}/stevedore/large:v1", proxy.host());
    let mut agent = agent_process::AgentProcess::start(cluster, "kill-mid-layer", &[]).await?;
    let mut client = ImageServiceClient::new(agent.channel().await?);
    // No record may keep the layers: not the image straight from the registry, nor one
    // through the proxy of an earlier run (another port) that failed before removing it.
    let listed = ctr(cluster, &["images", "ls", "-q"])?;
    let records = listed
        .lines()
        .filter(|l| l.contains("/stevedore/large:") || l.contains("/stevedore/large@"))
        .map(str::to_owned)
        .chain([cluster.image("large:v1")]);
    for name in records {
        stevedore_tests::grpc::remove_image(&client, &name).await?;
    }
    let pull = api::PullImageRequest {
        image: image.clone(),
        pull_policy: api::PullPolicy::Always.into(),
        credentials: None,
        timeout_seconds: 0,
    };
    let mut stream = client.pull_image(pull.clone()).await?.into_inner();
    let mut interrupted = Vec::new();
    let mut seen = Vec::new();
    while let Some(message) = stream.next().await {
        let layers: Vec<api::LayerProgress> = message?
            .layers
            .into_iter()
            .filter(|l| l.bytes_total > 8 << 20)
            .collect();
        seen.clone_from(&layers);
        // Kill once a large layer is well under way and no large layer is complete.
        if layers.iter().any(|l| l.bytes_done >= 4 << 20)
            && layers
                .iter()
                .all(|l| l.bytes_done + (4 << 20) < l.bytes_total)
        {
            interrupted = layers;
            break;
        }
    }
    ensure!(
        !interrupted.is_empty(),
        "the layer downloads never got going; last seen: {seen:?}"
    );
    let pid = agent.pid();
    agent.kill()?;
    drop(stream);
    drop(agent);
    // The registry logs a cut request when it notices; let it.
    tokio::time::sleep(Duration::from_secs(3)).await;

    proxy.throttle(None);
    let before = registry_log::line_count(cluster)?;
    let agent = agent_process::AgentProcess::start(cluster, "kill-mid-layer-again", &[]).await?;
    let mut client = ImageServiceClient::new(agent.channel().await?);
    let mut stream = client.pull_image(pull).await?.into_inner();
    let mut last = None;
    while let Some(message) = stream.next().await {
        last = Some(message?);
    }
    let last = last.context("no progress from the second pull")?;
    ensure!(
        last.phase == i32::from(api::PullPhase::Done) && last.bytes_done == last.bytes_total,
        "{last:?}"
    );
    let check = ctr(cluster, &["images", "check", &format!("name=={image}")])?;
    ensure!(check.contains("complete"), "image not complete: {check}");
    for layer in interrupted.iter().filter(|l| l.bytes_done > 0) {
        let request = format!("/blobs/{} HTTP/1.1\" ", layer.digest);
        let fetched = registry_log::agent_blob_bytes(cluster, &request, before)?;
        ensure!(
            fetched < layer.bytes_total,
            "after agent {pid} was killed with {} of {} bytes of {} written, the next agent \
             fetched {fetched} bytes of it",
            layer.bytes_done,
            layer.bytes_total,
            layer.digest
        );
    }
    stevedore_tests::grpc::remove_image(&client, &image).await?;
    Ok(())
}

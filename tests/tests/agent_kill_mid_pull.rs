//! E2E: the deployed agent killed (SIGKILL) in the middle of a pull, restarted by kubelet,
//! pulls the same image again to a complete, usable image. A test binary of its own, as it
//! takes the node's agent away for a while.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;
use stevedore_tests::pods::is_ready;
use stevedore_tests::{ClusterInfo, TestContext, poll_until, run_in_namespace};

const SOCKET: &str = "unix:///run/stevedore/agent.sock";

fn grpcurl(cluster: &ClusterInfo, data: &str, method: &str) -> Command {
    let mut cmd = Command::new(&cluster.grpcurl);
    cmd.args(["-plaintext", "-max-time", "300", "-d", data, SOCKET, method]);
    cmd
}

fn ctr(cluster: &ClusterInfo, args: &[&str]) -> Result<String> {
    let out = Command::new("ctr")
        .arg("--address")
        .arg(&cluster.containerd_sock)
        .args(["-n", "k8s.io"])
        .args(args)
        .output()?;
    ensure!(
        out.status.success(),
        "ctr {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
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
        let pids = Command::new("pgrep")
            .args(["-f", "^/usr/local/bin/stevedore-agent"])
            .output()?;
        let pid = String::from_utf8_lossy(&pids.stdout).trim().to_owned();
        ensure!(
            !pid.is_empty() && !pid.contains('\n'),
            "one agent process expected: {pid:?}"
        );
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

//! E2E: the agent as deployed by `deploy/local/run.sh` — a DaemonSet pod on the kubelet
//! node, serving TLS (certificate issued through the CSR API by the control plane's
//! signer; `agent_ca_bundle` also trusts the cluster CA) with token authentication, acting
//! on pods with its own service account, and fenced to its node by the admission policy.

use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stevedore_proto::stevedore::agent::v1::{
    ConditionStatus, GetNodeInfoRequest, PodRef, SetPodConditionRequest,
    node_service_client::NodeServiceClient, pod_service_client::PodServiceClient,
};
use stevedore_tests::auth::{
    agent_ca_bundle, bind_cluster_role, client_as_agent_pod, node_info_once_allowed, token_for,
    unbind, with_token,
};
use stevedore_tests::pods::{condition, is_ready};
use stevedore_tests::{ClusterInfo, TestContext, poll_until, run_in_namespace};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

const AGENT_PORT: u16 = 10350;
const READY: Duration = Duration::from_secs(180);

/// The Ready agent pod on the kubelet node, or an error saying how to deploy it.
async fn agent_pod(client: &kube::Client, cluster: &ClusterInfo) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let lp = ListParams::default()
        .labels("app.kubernetes.io/name=stevedore-agent")
        .fields(&format!("spec.nodeName={}", cluster.node_name));
    poll_until("a Ready agent pod on the kubelet node", READY, || async {
        let list = pods.list(&lp).await?;
        if list.items.is_empty() {
            bail!("no agent pod: deploy it with deploy/local/run.sh (or cluster.sh deploy)");
        }
        Ok(list.items.into_iter().find(is_ready))
    })
    .await
}

async fn agent_channel(ctx: &TestContext) -> Result<Channel> {
    let cluster = ctx.cluster;
    let ca = agent_ca_bundle(ctx).await?;
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name(cluster.node_name.clone());
    let endpoint = Endpoint::from_shared(format!("https://{}:{AGENT_PORT}", cluster.node_ip))?
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(5));
    Ok(endpoint.connect().await?)
}

/// The deployed agent serves a certificate issued through the CSR API: it verifies
/// against the control plane's signer CA alone, for the node's IP (the script-made
/// certificate it served before came from the cluster CA).
#[tokio::test]
async fn deployed_agent_serves_a_certificate_issued_by_the_signer() -> Result<()> {
    run_in_namespace("deployed-agent-csr", |ctx| async move {
        agent_pod(&ctx.client, ctx.cluster).await?;
        poll_until(
            "the agent serving a certificate of the signer CA",
            READY,
            || connect_trusting_only_the_signer(&ctx),
        )
        .await
    })
    .await
}

/// Connects to the deployed agent trusting the signer CA (Secret
/// kube-system/stevedore-agent-ca) and nothing else.
async fn connect_trusting_only_the_signer(ctx: &TestContext) -> Result<Option<()>> {
    let secrets = Api::<Secret>::namespaced(ctx.client.clone(), "kube-system");
    let Some(ca) = secrets
        .get_opt("stevedore-agent-ca")
        .await?
        .and_then(|secret| secret.data?.remove("ca.crt"))
    else {
        bail!("no Secret kube-system/stevedore-agent-ca yet");
    };
    let node_ip = &ctx.cluster.node_ip;
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca.0))
        .domain_name(node_ip.clone());
    Endpoint::from_shared(format!("https://{node_ip}:{AGENT_PORT}"))?
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await?;
    Ok(Some(()))
}

#[tokio::test]
async fn deployed_agent_serves_tls_and_authorizes_callers() -> Result<()> {
    run_in_namespace("deployed-agent-auth", |ctx| async move {
        agent_pod(&ctx.client, ctx.cluster).await?;
        let mut nodes = NodeServiceClient::new(agent_channel(&ctx).await?);
        let err = nodes
            .get_node_info(GetNodeInfoRequest {})
            .await
            .err()
            .context("no token")?;
        ensure!(err.code() == tonic::Code::Unauthenticated, "{err:?}");

        let token = token_for(&ctx, "operator", &ctx.cluster.node_name).await?;
        let binding = bind_cluster_role(&ctx, "stevedore:agent-client", "operator").await?;
        let info = node_info_once_allowed(agent_channel(&ctx).await?, &token).await;
        unbind(&ctx, &binding).await;
        let info = info?;
        ensure!(info.node_name == ctx.cluster.node_name, "{info:?}");
        Ok(())
    })
    .await
}

async fn web_pod(ctx: &TestContext, name: &str, node: &str) -> Result<Pod> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "nodeName": node,
            "tolerations": [{ "operator": "Exists" }],
            "readinessGates": [{ "conditionType": "InPlaceUpdateReady" }],
            "containers": [{ "name": "web", "image": ctx.cluster.image("web:v1") }]
        }
    }))?;
    Ok(ctx
        .api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await?)
}

/// The agent flips a readiness gate of a pod on its node with its own service account
/// (RBAC and the admission policy allow it), and the pod's Ready follows.
#[tokio::test]
async fn deployed_agent_flips_a_readiness_gate_on_its_node() -> Result<()> {
    run_in_namespace("deployed-agent-gate", |ctx| async move {
        agent_pod(&ctx.client, ctx.cluster).await?;
        let pod = web_pod(&ctx, "gated", &ctx.cluster.node_name).await?;
        let token = token_for(&ctx, "operator", &ctx.cluster.node_name).await?;
        let binding = bind_cluster_role(&ctx, "stevedore:agent-client", "operator").await?;
        let pods = PodServiceClient::new(agent_channel(&ctx).await?);
        let request = SetPodConditionRequest {
            pod: Some(PodRef {
                namespace: ctx.namespace.clone(),
                name: "gated".into(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
            }),
            condition_type: "InPlaceUpdateReady".into(),
            status: ConditionStatus::True.into(),
            reason: "E2E".into(),
            message: "set by the deployed agent".into(),
        };
        let set = poll_until(
            "the agent sets the condition",
            Duration::from_secs(60),
            || {
                let mut pods = pods.clone();
                let request = with_token(request.clone(), &token);
                async move {
                    match pods.set_pod_condition(request?).await {
                        Ok(_) => Ok(Some(())),
                        Err(status) => bail!("{status:?}"),
                    }
                }
            },
        )
        .await;
        unbind(&ctx, &binding).await;
        set?;
        poll_until("the gated pod Ready", READY, || async {
            let pod = ctx.api::<Pod>().get("gated").await?;
            let gate = condition(&pod, "InPlaceUpdateReady");
            Ok((gate.as_deref() == Some("True")
                && condition(&pod, "Ready").as_deref() == Some("True"))
            .then_some(()))
        })
        .await
    })
    .await
}

/// A token of the agent's service account bound to its pod carries the node name; the
/// admission policy refuses writes with it to pods of any other node.
#[tokio::test]
async fn admission_policy_fences_the_agent_to_its_node() -> Result<()> {
    run_in_namespace("agent-admission-fence", |ctx| async move {
        let agent = agent_pod(&ctx.client, ctx.cluster).await?;
        let as_agent = client_as_agent_pod(&ctx, &agent).await?;

        web_pod(&ctx, "here", &ctx.cluster.node_name).await?;
        web_pod(&ctx, "elsewhere", &ctx.cluster.fake_node(0)).await?;
        let pods: Api<Pod> = Api::namespaced(as_agent, &ctx.namespace);
        let patch = json!({ "status": { "conditions": [
            { "type": "InPlaceUpdateReady", "status": "False", "reason": "E2E" }
        ] } });
        pods.patch_status("here", &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .context("the agent may change pods of its own node")?;
        match pods
            .patch_status(
                "elsewhere",
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(_) => bail!("the agent changed a pod on another node"),
            Err(kube::Error::Api(status)) => {
                ensure!(status.code == 403 || status.code == 422, "{status:?}");
                ensure!(status.message.contains("own node"), "{status:?}");
            }
            Err(err) => bail!("unexpected error: {err}"),
        }
        Ok(())
    })
    .await
}

fn grpcurl(cluster: &ClusterInfo, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new(&cluster.grpcurl)
        .args(args)
        .output()?;
    ensure!(
        out.status.success(),
        "grpcurl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `grpcurl list` works against the deployed agent over TLS with a token, and on the
/// node's Unix socket without one — the two ways the README shows.
#[tokio::test]
async fn grpcurl_lists_the_agent_services_over_tls_and_the_unix_socket() -> Result<()> {
    run_in_namespace("agent-grpcurl", |ctx| async move {
        agent_pod(&ctx.client, ctx.cluster).await?;
        let token = token_for(&ctx, "operator", &ctx.cluster.node_name).await?;
        let binding = bind_cluster_role(&ctx, "stevedore:agent-client", "operator").await?;
        let cluster = ctx.cluster;
        let ca_file = cluster
            .log_dir()
            .join(format!("{}-agent-ca.pem", ctx.namespace));
        std::fs::write(&ca_file, agent_ca_bundle(&ctx).await?)?;
        let ca = ca_file.to_string_lossy().into_owned();
        let addr = format!("{}:{AGENT_PORT}", cluster.node_ip);
        let header = format!("authorization: Bearer {token}");
        let tls_args = [
            "-cacert",
            &ca,
            "-servername",
            &cluster.node_name,
            "-H",
            &header,
            &addr,
        ];
        let listed = grpcurl(cluster, &[&tls_args[..], &["list"]].concat());
        let info = poll_until(
            "GetNodeInfo through grpcurl",
            Duration::from_secs(60),
            || {
                let args = [
                    &tls_args[..],
                    &["stevedore.agent.v1.NodeService/GetNodeInfo"],
                ]
                .concat();
                async move { grpcurl(cluster, &args).map(Some) }
            },
        )
        .await;
        unbind(&ctx, &binding).await;
        let _ = std::fs::remove_file(&ca_file);
        let listed = listed?;
        for service in [
            "ImageService",
            "ContainerService",
            "PodService",
            "NodeService",
        ] {
            ensure!(
                listed.contains(&format!("stevedore.agent.v1.{service}")),
                "{listed}"
            );
        }
        ensure!(listed.contains("grpc.health.v1.Health"), "{listed}");
        ensure!(
            info?.contains(&cluster.node_name),
            "GetNodeInfo names the node"
        );

        let local = grpcurl(
            cluster,
            &[
                "-plaintext",
                "unix:///run/stevedore/agent.sock",
                "stevedore.agent.v1.NodeService/GetNodeInfo",
            ],
        )?;
        ensure!(local.contains(&cluster.node_name), "{local}");

        // A pull through the socket shows up in the agent's metrics by result.
        let request = format!(
            r#"{{"image":"{}","pull_policy":"PULL_POLICY_ALWAYS"}}"#,
            cluster.image("web:v1")
        );
        let pulled = grpcurl(
            cluster,
            &[
                "-plaintext",
                "-d",
                &request,
                "unix:///run/stevedore/agent.sock",
                "stevedore.agent.v1.ImageService/PullImage",
            ],
        )?;
        ensure!(pulled.contains("PULL_PHASE_DONE"), "{pulled}");
        // Metrics on the node's localhost only (the agent shares the host network); the
        // health port on the node's address serves none.
        let metrics = http_get(
            &format!("127.0.0.1:{}", stevedore_tests::metrics::AGENT_METRICS_PORT),
            "/metrics",
        )
        .await?;
        let health = http_get(&format!("{}:10351", cluster.node_ip), "/metrics").await?;
        ensure!(
            health.lines().next().is_some_and(|l| l.contains(" 404 ")),
            "/metrics on the health port: {health}"
        );
        ensure!(
            metrics.contains(r#"stevedore_agent_images_pulled_total{result="succeeded"}"#),
            "{metrics}"
        );
        Ok(())
    })
    .await
}

/// A plain HTTP/1.0 GET, enough for the agent's admin endpoint.
async fn http_get(addr: &str, path: &str) -> Result<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut body = String::new();
    stream.read_to_string(&mut body).await?;
    Ok(body)
}

/// The agent's DaemonSet as `deploy/local/agent` renders it.
fn rendered_local_daemonset() -> Result<serde_json::Value> {
    let dir = stevedore_tests::cluster::repo_root().join("deploy/local/agent");
    let output = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(&dir)
        .output()
        .context("running kubectl kustomize")?;
    ensure!(output.status.success(), "kubectl kustomize: {output:?}");
    let rendered = String::from_utf8(output.stdout)?;
    for document in rendered.split("\n---\n") {
        let object: serde_json::Value = serde_saphyr::from_str(document)?;
        if object["kind"] == "DaemonSet" {
            return Ok(object);
        }
    }
    bail!("no DaemonSet in {}", dir.display())
}

/// The `config_path` of the local cluster's containerd, where its hosts.toml files live.
fn containerd_config_path(cluster: &ClusterInfo) -> Result<String> {
    let config = std::fs::read_to_string(cluster.state_dir.join("containerd/config.toml"))?;
    config
        .lines()
        .find_map(|line| line.trim().strip_prefix("config_path = "))
        .map(|value| value.trim_matches('"').to_owned())
        .context("containerd's config has no config_path")
}

#[tokio::test]
async fn the_agent_mounts_containerds_registry_configuration_read_only() -> Result<()> {
    let cluster = stevedore_tests::cluster().await?;
    let daemonset = rendered_local_daemonset()?;
    let pod = &daemonset["spec"]["template"]["spec"];
    let volume = pod["volumes"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "registry-config"))
        .context("no registry-config volume")?;
    ensure!(
        volume["hostPath"]["path"] == containerd_config_path(cluster)?.as_str(),
        "the volume is not containerd's config_path: {volume}"
    );
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["name"] == "registry-config"))
        .context("no registry-config mount")?;
    // Where --registry-config-dir looks by default.
    ensure!(
        mount["mountPath"] == "/etc/containerd/certs.d" && mount["readOnly"] == true,
        "{mount}"
    );
    Ok(())
}

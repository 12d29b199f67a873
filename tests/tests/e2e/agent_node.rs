//! The agent's node services against the real cluster: the agent runs in-process on
//! loopback with the admin kubeconfig and the kubelet's own containerd, and acts on
//! real pods that the real kubelet runs.

#![allow(
    clippy::unwrap_used,
    reason = "helpers of tests, where a panic is the failure"
)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use clap::Parser as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use stevedore_agent::{auth::tls::TlsMaterial, config::Args, server};
use stevedore_proto::stevedore::agent::v1::{
    ConditionStatus, GetNodeInfoRequest, PodRef, RestartContainersRequest, RestartState,
    SetPodConditionRequest, WatchRestartRequest, container_service_client::ContainerServiceClient,
    node_service_client::NodeServiceClient, pod_service_client::PodServiceClient,
};
use stevedore_tests::auth::{node_info_once_allowed, token_for, with_token};
use stevedore_tests::pods::condition;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

const POD_START: Duration = Duration::from_secs(180);

/// The agent running in this test process.
struct Agent {
    grpc: SocketAddr,
    admin: SocketAddr,
    unix: PathBuf,
    ca: String,
    shutdown: CancellationToken,
    dir: PathBuf,
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.shutdown.cancel();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn start_agent(ctx: &TestContext) -> Result<Agent> {
    let dir = std::env::temp_dir().join(format!("stevedore-agent-{}", ctx.namespace));
    let unix = dir.join("run/agent.sock");
    let args = Args::try_parse_from([
        "agent",
        "--node-name",
        &ctx.cluster.node_name,
        "--containerd-socket",
        ctx.cluster
            .containerd
            .socket
            .to_str()
            .context("socket path")?,
        "--unix-socket",
        unix.to_str().context("socket path")?,
    ])?;
    let admin = TcpListener::bind("127.0.0.1:0").await?;
    let admin_addr = admin.local_addr()?;
    let listeners = server::Listeners {
        grpc: TcpListener::bind("127.0.0.1:0").await?,
        unix: server::bind_unix(&unix)?,
        admin: stevedore_agent::admin::AdminListeners::Shared(admin),
    };
    let grpc = listeners.grpc.local_addr()?;
    let tls = TlsMaterial::self_signed(vec!["localhost".into()])?;
    let ca = tls.cert_pem.clone();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let kube = ctx.client.clone();
    tokio::spawn(async move {
        if let Err(err) = server::run(&args, listeners, tls, kube, token).await {
            eprintln!("agent stopped with an error: {err:?}");
        }
    });
    Ok(Agent {
        grpc,
        admin: admin_addr,
        unix,
        ca,
        shutdown,
        dir,
    })
}

impl Agent {
    /// A channel over the root-only Unix socket (no token needed).
    async fn unix_channel(&self) -> Result<Channel> {
        stevedore_tests::grpc::unix_channel(self.unix.clone()).await
    }

    /// A channel over TCP + TLS, trusting the agent's self-signed certificate.
    async fn tcp_channel(&self) -> Result<Channel> {
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca))
            .domain_name("localhost");
        Ok(Channel::from_shared(format!("https://{}", self.grpc))?
            .tls_config(tls)?
            .connect()
            .await?)
    }

    /// `GET path` on the admin port: (status code, body).
    async fn admin_get(&self, path: &str) -> Result<(u16, String)> {
        stevedore_tests::metrics::http_get(&self.admin.to_string(), path).await
    }
}

/// A web pod bound straight to `node` (no scheduler), with readiness gates.
async fn create_pod(ctx: &TestContext, name: &str, node: &str, gates: &[&str]) -> Result<Pod> {
    let gates: Vec<_> = gates
        .iter()
        .map(|g| json!({ "conditionType": g }))
        .collect();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "nodeName": node,
            "readinessGates": gates,
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "web",
                "image": ctx.cluster.image("web:v1"),
                "imagePullPolicy": "IfNotPresent",
            }],
        },
    }))?;
    Ok(ctx
        .api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await?)
}

async fn running_pod(ctx: &TestContext, name: &str) -> Result<Pod> {
    poll_until(&format!("pod {name} running"), POD_START, || async {
        let pod = ctx.api::<Pod>().get(name).await?;
        let running = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .all(|c| c.state.as_ref().and_then(|s| s.running.as_ref()).is_some())
            });
        Ok(running.then_some(pod))
    })
    .await
}

fn pod_ref(pod: &Pod) -> Option<PodRef> {
    Some(PodRef {
        namespace: pod.metadata.namespace.clone()?,
        name: pod.metadata.name.clone()?,
        uid: pod.metadata.uid.clone()?,
    })
}

fn set_condition(pod: &Pod, type_: &str, status: ConditionStatus) -> SetPodConditionRequest {
    SetPodConditionRequest {
        pod: pod_ref(pod),
        condition_type: type_.to_owned(),
        status: status.into(),
        reason: "Test".to_owned(),
        message: String::new(),
    }
}

#[tokio::test]
async fn set_pod_condition_drives_a_readiness_gate_of_a_kubelet_pod() -> Result<()> {
    run_in_namespace("agent-set-condition", |ctx| async move {
        let agent = start_agent(&ctx).await?;
        let node = ctx.cluster.node_name.clone();
        create_pod(&ctx, "gated", &node, &["InPlaceUpdateReady"]).await?;
        let pod = running_pod(&ctx, "gated").await?;
        ensure!(
            condition(&pod, "Ready").as_deref() != Some("True"),
            "gate must hold Ready back"
        );

        let mut client = PodServiceClient::new(agent.unix_channel().await?);
        for (status, expected) in [
            (ConditionStatus::True, "True"),
            (ConditionStatus::False, "False"),
        ] {
            client
                .set_pod_condition(set_condition(&pod, "InPlaceUpdateReady", status))
                .await?;
            poll_until(
                &format!("Ready={expected}"),
                Duration::from_secs(60),
                || async {
                    let pod = ctx.api::<Pod>().get("gated").await?;
                    let gate = condition(&pod, "InPlaceUpdateReady");
                    let ready = condition(&pod, "Ready");
                    Ok(
                        (gate.as_deref() == Some(expected) && ready.as_deref() == Some(expected))
                            .then_some(()),
                    )
                },
            )
            .await?;
        }

        // A UID that is not the pod's is refused.
        let mut stale = set_condition(&pod, "InPlaceUpdateReady", ConditionStatus::True);
        if let Some(p) = stale.pod.as_mut() {
            p.uid = "00000000-0000-0000-0000-000000000000".into();
        }
        let err = client.set_pod_condition(stale).await.unwrap_err();
        ensure!(err.code() == tonic::Code::FailedPrecondition, "{err:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn pods_of_other_nodes_and_missing_pods_are_refused() -> Result<()> {
    run_in_namespace("agent-other-node", |ctx| async move {
        let agent = start_agent(&ctx).await?;
        let fake = ctx.cluster.fake_node(0);
        let pod = create_pod(&ctx, "elsewhere", &fake, &["InPlaceUpdateReady"]).await?;
        let mut client = PodServiceClient::new(agent.unix_channel().await?);
        let err = client
            .set_pod_condition(set_condition(
                &pod,
                "InPlaceUpdateReady",
                ConditionStatus::True,
            ))
            .await
            .unwrap_err();
        ensure!(err.code() == tonic::Code::PermissionDenied, "{err:?}");
        // kwok fills in readiness gates itself; our reason must not appear.
        let after = ctx.api::<Pod>().get("elsewhere").await?;
        let ours = after
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .any(|c| c.reason.as_deref() == Some("Test"));
        ensure!(!ours, "the agent changed a pod of another node");

        let mut missing = set_condition(&pod, "InPlaceUpdateReady", ConditionStatus::True);
        if let Some(p) = missing.pod.as_mut() {
            p.name = "nope".into();
        }
        let err = client.set_pod_condition(missing).await.unwrap_err();
        ensure!(err.code() == tonic::Code::NotFound, "{err:?}");

        let mut restart = ContainerServiceClient::new(agent.unix_channel().await?);
        let err = restart
            .restart_containers(RestartContainersRequest {
                pod: pod_ref(&pod),
                container_names: vec!["web".into()],
                ..Default::default()
            })
            .await
            .unwrap_err();
        ensure!(err.code() == tonic::Code::PermissionDenied, "{err:?}");
        Ok(())
    })
    .await
}

fn container_id(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
    status.container_id.clone()
}

fn restart_count(pod: &Pod) -> Option<i32> {
    Some(
        pod.status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .first()?
            .restart_count,
    )
}

#[tokio::test]
async fn restart_recreates_the_container_in_the_same_pod() -> Result<()> {
    if !stevedore_tests::cluster()
        .await?
        .containerd
        .runs_kubelets_pods("restart_recreates_the_container_in_the_same_pod")
    {
        return Ok(());
    }
    run_in_namespace("agent-restart", |ctx| async move {
        let agent = start_agent(&ctx).await?;
        let node = ctx.cluster.node_name.clone();
        create_pod(&ctx, "web", &node, &["KruisePodReady"]).await?;
        let before = running_pod(&ctx, "web").await?;
        let mut pods = PodServiceClient::new(agent.unix_channel().await?);
        pods.set_pod_condition(set_condition(
            &before,
            "KruisePodReady",
            ConditionStatus::True,
        ))
        .await?;

        let mut client = ContainerServiceClient::new(agent.unix_channel().await?);
        let operation_id = client
            .restart_containers(RestartContainersRequest {
                pod: pod_ref(&before),
                container_names: vec!["web".into()],
                termination_grace_period_seconds: Some(1),
                unready_grace_period_seconds: 1,
                min_started_seconds: 2,
                ..Default::default()
            })
            .await?
            .into_inner()
            .operation_id;
        let mut stream = client
            .watch_restart(WatchRestartRequest { operation_id })
            .await?
            .into_inner();
        let mut last = None;
        let mut saw_recreating = false;
        let watched = tokio::time::timeout(POD_START, async {
            while let Some(progress) = stream.message().await? {
                saw_recreating |= progress
                    .containers
                    .iter()
                    .any(|c| c.state() == RestartState::Recreating);
                last = Some(progress);
            }
            anyhow::Ok(())
        })
        .await;
        watched.context("restart did not finish")??;
        let last = last.context("no progress")?;
        ensure!(last.done, "{last:?}");
        ensure!(saw_recreating, "never reported Recreating");
        let state = last
            .containers
            .first()
            .map(|c| (c.state(), c.message.clone()));
        if state.as_ref().map(|s| s.0) != Some(RestartState::Succeeded) {
            bail!("restart did not succeed: {state:?}");
        }

        let after = poll_until(
            "the new container in the pod status",
            Duration::from_secs(60),
            || async {
                let pod = ctx.api::<Pod>().get("web").await?;
                Ok((container_id(&pod) != container_id(&before)
                    && condition(&pod, "KruisePodReady").as_deref() == Some("True"))
                .then_some(pod))
            },
        )
        .await?;
        ensure!(
            after.metadata.uid == before.metadata.uid,
            "pod was replaced"
        );
        let ip = |p: &Pod| p.status.as_ref().and_then(|s| s.pod_ip.clone());
        ensure!(
            ip(&after) == ip(&before) && ip(&after).is_some(),
            "pod IP changed"
        );
        ensure!(
            restart_count(&after) == restart_count(&before).map(|n| n + 1),
            "restartCount {:?} -> {:?}",
            restart_count(&before),
            restart_count(&after)
        );
        let (_, metrics) = agent.admin_get("/metrics").await?;
        ensure!(
            metrics.contains("stevedore_agent_container_restarts_total{result=\"succeeded\"} 1"),
            "{metrics}"
        );
        Ok(())
    })
    .await
}

fn kubectl_apply(ctx: &TestContext, file: &Path) -> Result<()> {
    let output = std::process::Command::new(&ctx.cluster.kubectl)
        .arg("--kubeconfig")
        .arg(&ctx.cluster.kubeconfig)
        .args(["apply", "-f"])
        .arg(file)
        .output()?;
    ensure!(
        output.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

#[tokio::test]
async fn tcp_calls_need_a_token_with_permission() -> Result<()> {
    run_in_namespace("agent-auth", |ctx| async move {
        let agent = start_agent(&ctx).await?;
        let role = stevedore_tests::cluster::repo_root().join("deploy/agent/client-role.yaml");
        kubectl_apply(&ctx, &role)?;
        let binding_name = format!("stevedore-test-{}", ctx.namespace);
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": { "name": binding_name },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": "stevedore:agent-client" },
            "subjects": [{ "kind": "ServiceAccount", "name": "operator",
                           "namespace": ctx.namespace }],
        }))?;
        let bindings: Api<ClusterRoleBinding> = Api::all(ctx.client.clone());
        bindings.create(&PostParams::default(), &binding).await?;
        let result = async {
            let stranger = token_for(&ctx, "stranger", &ctx.cluster.node_name).await?;
            let operator = token_for(&ctx, "operator", &ctx.cluster.node_name).await?;
            let mut client = NodeServiceClient::new(agent.tcp_channel().await?);

            let err = client
                .get_node_info(GetNodeInfoRequest {})
                .await
                .unwrap_err();
            ensure!(err.code() == tonic::Code::Unauthenticated, "{err:?}");
            let err = client
                .get_node_info(with_token(GetNodeInfoRequest {}, "not-a-token")?)
                .await
                .unwrap_err();
            ensure!(err.code() == tonic::Code::Unauthenticated, "{err:?}");
            let err = client
                .get_node_info(with_token(GetNodeInfoRequest {}, &stranger)?)
                .await
                .unwrap_err();
            ensure!(err.code() == tonic::Code::PermissionDenied, "{err:?}");

            // RBAC may take a moment to see the new binding.
            let info = node_info_once_allowed(agent.tcp_channel().await?, &operator).await?;
            ensure!(info.node_name == ctx.cluster.node_name, "{info:?}");
            let version = ctx.cluster.containerd.server_version()?;
            ensure!(
                info.containerd_version == version,
                "{info:?}, not {version}"
            );
            ensure!(info.snapshotter == "overlayfs", "{info:?}");

            // The Unix socket needs no token.
            let mut local = NodeServiceClient::new(agent.unix_channel().await?);
            local.get_node_info(GetNodeInfoRequest {}).await?;
            Ok(())
        }
        .await;
        let _ = bindings
            .delete(&binding_name, &DeleteParams::default())
            .await;
        result
    })
    .await
}

#[tokio::test]
async fn admin_endpoint_reports_health_readiness_and_metrics() -> Result<()> {
    run_in_namespace("agent-admin", |ctx| async move {
        let agent = start_agent(&ctx).await?;
        let (code, _) = agent.admin_get("/healthz").await?;
        ensure!(code == 200, "healthz {code}");
        let (code, body) = agent.admin_get("/readyz").await?;
        ensure!(code == 200, "readyz {code}: {body}");
        ensure!(body.contains("containerd ok"), "{body}");

        let mut client = NodeServiceClient::new(agent.tcp_channel().await?);
        let _ = client.get_node_info(GetNodeInfoRequest {}).await;
        let (code, body) = agent.admin_get("/metrics").await?;
        ensure!(code == 200, "metrics {code}");
        ensure!(
            body.contains("stevedore_agent_rpc_duration_seconds_count{method=\"/stevedore.agent.v1.NodeService/GetNodeInfo\",code=\"Unauthenticated\"} 1"),
            "{body}"
        );
        ensure!(body.contains("stevedore_agent_image_bytes_pulled_total"), "{body}");
        Ok(())
    })
    .await
}

//! Component, against the local apiserver: the control plane's CSR signer, run here
//! in-process, and the agent's CSR client, acting with a token of the agent's service
//! account bound to a pod on a simulated node (so the apiserver records that node in the
//! CSR, as for a real agent).
//! - A CSR for the agent's own node is approved and issued, signed by the CA kept in
//!   Secret kube-system/stevedore-agent-ca, for exactly that node's name and address.
//! - A CSR naming another node's IP is denied, with a reason naming the address.
//! - The whole agent started with `--csr-signer` serves the issued certificate without
//!   a restart.
//!
//! The signer acts with the admin client: the control plane's own service account gets
//! its CSR rights from deploy/controlplane/rbac.yaml, which this suite does not deploy.
//! The agent's service account is granted `create`/`get` on CSRs by a role of this
//! test's own, as deploy/agent/rbac.yaml does, so the suite runs whether or not Stevedore
//! is deployed. The CA Secret is the deployment's: read, or created as the control plane
//! creates it (a deployed signer then signs with the same CA, and decides alike).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use clap::Parser as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Node, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt as _};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject as _};
use serde_json::json;
use stevedore_agent::admin::AdminListeners;
use stevedore_agent::config::Args;
use stevedore_agent::server;
use stevedore_agent::serving::{CsrError, CsrSettings, Issued, request_certificate};
use stevedore_controlplane::certs::{AGENT_SERVING_SIGNER, CsrSigner, load_or_create};
use stevedore_controlplane::controller::queue::{Backoff, WorkQueue};
use stevedore_controlplane::controller::runner::{self, RunnerConfig};
use stevedore_controlplane::runtime::metrics::Metrics;
use stevedore_tests::auth::client_as_agent_pod;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

const AGENT_ACCOUNT: &str = "stevedore-agent";
const AGENT_USER: &str = "system:serviceaccount:kube-system:stevedore-agent";
const CA_SECRET: &str = "stevedore-agent-ca";

#[tokio::test]
async fn the_signer_issues_an_agent_its_own_nodes_certificate_and_refuses_another_nodes_ip()
-> Result<()> {
    run_in_namespace("agent-certificates", |ctx| async move {
        let node = ctx.cluster.fake_node(0);
        let own_ip = internal_ip(&ctx, &node).await?;
        let other_ip = internal_ip(&ctx, &ctx.cluster.node_name).await?;
        ensure!(own_ip != other_ip, "the two nodes share {own_ip}");
        let (ctx, node) = (&ctx, node.as_str());
        as_agent_on(ctx, node, |pod, shutdown| async move {
            exercise(ctx, &pod, node, &own_ip, &other_ip, &shutdown).await
        })
        .await
    })
    .await
}

/// The whole agent, started with `--csr-signer`, serves its self-signed certificate
/// first and then, without a restart, the one the signer issued for its node.
#[tokio::test]
async fn an_agent_started_with_the_csr_signer_serves_the_issued_certificate() -> Result<()> {
    run_in_namespace("agent-csr-serving", |ctx| async move {
        // Another node than the other test's, whose CSRs this one deletes.
        let node = ctx.cluster.fake_node(1);
        let node_ip = internal_ip(&ctx, &node).await?;
        let (ctx, node) = (&ctx, node.as_str());
        as_agent_on(ctx, node, |pod, shutdown| async move {
            let ca_pem = start_signer(ctx, &shutdown).await?;
            let agent = client_as_agent_pod(ctx, &pod).await?;
            let addr = start_agent(node, &node_ip, agent, &shutdown).await?;
            let served = poll_until("the agent serving the issued certificate", WAIT, || {
                handshake_trusting(&ca_pem, addr, &node_ip)
            })
            .await;
            shutdown.cancel();
            delete_csrs_of(ctx, node).await?;
            served
        })
        .await
    })
    .await
}

/// How long an issued certificate may take to be served.
const WAIT: Duration = Duration::from_secs(60);

/// Runs `body` with the agent's CSR rights granted and a pod of the agent's account on
/// `node` (whose token it acts with), and a token that stops what it started; removes
/// the grant and the pod afterwards.
async fn as_agent_on<F, Fut>(ctx: &TestContext, node: &str, body: F) -> Result<()>
where
    F: FnOnce(Pod, CancellationToken) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let grant = grant_csr_requests(ctx).await?;
    let shutdown = CancellationToken::new();
    let result = match agent_pod_on(ctx, node).await {
        Ok(pod) => body(pod, shutdown.clone()).await,
        Err(err) => Err(err),
    };
    shutdown.cancel();
    revoke(ctx, &grant).await;
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), "kube-system");
    let _ = pods.delete(&grant, &DeleteParams::default()).await;
    result
}

/// Starts the agent (server::run, as main does) for `node` on loopback, with the
/// CSR signer, acting with `kube`; containerd is never reached. Returns its gRPC address.
async fn start_agent(
    node: &str,
    node_ip: &str,
    kube: kube::Client,
    shutdown: &CancellationToken,
) -> Result<SocketAddr> {
    let dir = std::env::temp_dir().join(format!("sd-csr-{}", std::process::id()));
    let socket = dir.join("agent.sock");
    let args = Args::try_parse_from([
        "agent",
        "--node-name",
        node,
        "--csr-signer",
        AGENT_SERVING_SIGNER,
        "--node-ip",
        node_ip,
        "--unix-socket",
        &socket.to_string_lossy(),
        "--containerd-socket",
        &dir.join("no-containerd.sock").to_string_lossy(),
    ])?;
    let listeners = server::Listeners {
        grpc: TcpListener::bind("127.0.0.1:0").await?,
        unix: server::bind_unix(&socket)?,
        admin: AdminListeners::Shared(TcpListener::bind("127.0.0.1:0").await?),
    };
    let addr = listeners.grpc.local_addr()?;
    let tls = server::tls_material(&args).await?;
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        let _ = server::run(&args, listeners, tls, kube, shutdown).await;
        let _ = std::fs::remove_dir_all(dir);
    });
    Ok(addr)
}

/// A TLS handshake with the agent at `addr`, trusting `ca_pem` alone and expecting a
/// certificate for `name`: Some once it succeeds.
async fn handshake_trusting(ca_pem: &str, addr: SocketAddr, name: &str) -> Result<Option<()>> {
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca_pem))
        .domain_name(name);
    Endpoint::from_shared(format!("https://{addr}"))?
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await?;
    Ok(Some(()))
}

/// Deletes the CSRs the agent made for `node` (named after it by the agent).
async fn delete_csrs_of(ctx: &TestContext, node: &str) -> Result<()> {
    let csrs = Api::<CertificateSigningRequest>::all(ctx.client.clone());
    let prefix = format!("stevedore-agent-{node}-");
    for csr in csrs.list(&ListParams::default()).await? {
        let name = csr.metadata.name.unwrap_or_default();
        if name.starts_with(&prefix) {
            let _ = csrs.delete(&name, &DeleteParams::default()).await;
        }
    }
    Ok(())
}

/// Starts the signer, then makes the two requests as the agent and checks the answers.
async fn exercise(
    ctx: &TestContext,
    pod: &Pod,
    node: &str,
    own_ip: &str,
    other_ip: &str,
    shutdown: &CancellationToken,
) -> Result<()> {
    let ca_pem = start_signer(ctx, shutdown).await?;
    let agent = client_as_agent_pod(ctx, pod).await?;
    let csrs = Api::<CertificateSigningRequest>::all(agent);
    let settings = |ip: &str| -> Result<CsrSettings> {
        Ok(CsrSettings {
            signer: AGENT_SERVING_SIGNER.into(),
            node: node.to_owned(),
            addresses: vec![ip.parse()?],
            lifetime: Duration::from_secs(3600),
            poll: Duration::from_millis(500),
            wait: Duration::from_secs(60),
        })
    };

    let issued = request_certificate(&csrs, &settings(own_ip)?).await;
    let refused = request_certificate(&csrs, &settings(other_ip)?).await;
    let admin_csrs = Api::<CertificateSigningRequest>::all(ctx.client.clone());
    for name in [
        issued.as_ref().ok().map(|i| i.csr.clone()),
        csr_name(&refused),
    ]
    .into_iter()
    .flatten()
    {
        let _ = admin_csrs.delete(&name, &DeleteParams::default()).await;
    }

    let issued = issued.context("the agent's own node's certificate")?;
    check_issued(&issued, &ca_pem, node, own_ip, other_ip)?;
    match refused {
        Err(CsrError::Denied { reason, .. }) => ensure!(
            reason.contains(other_ip) && reason.contains(node),
            "the reason names the address and the node: {reason}"
        ),
        other => bail!("a CSR naming another node's IP was not denied: {other:?}"),
    }
    Ok(())
}

/// The CSR a request made, to delete it afterwards.
fn csr_name(result: &Result<Issued, CsrError>) -> Option<String> {
    match result {
        Ok(issued) => Some(issued.csr.clone()),
        Err(CsrError::Denied { name, .. } | CsrError::Failed { name, .. }) => Some(name.clone()),
        Err(_) => None,
    }
}

/// The certificate serves the node's name and address, no other node's, verifies
/// against the CA in the Secret, and lives the hour asked for (plus the backdating).
fn check_issued(
    issued: &Issued,
    ca_pem: &str,
    node: &str,
    own_ip: &str,
    other: &str,
) -> Result<()> {
    for name in [node, own_ip] {
        ensure!(
            verifies(ca_pem, &issued.cert_pem, name)?,
            "not valid for {name}"
        );
    }
    ensure!(
        !verifies(ca_pem, &issued.cert_pem, other)?,
        "valid for another node's address {other}"
    );
    let lifetime = issued.not_after.duration_since(issued.not_before)?;
    ensure!(
        lifetime > Duration::from_secs(3600) && lifetime <= Duration::from_secs(3900),
        "lifetime {lifetime:?}"
    );
    Ok(())
}

/// Reads (or creates) the CA, runs the signer as a leader would, returns the CA's PEM.
async fn start_signer(ctx: &TestContext, shutdown: &CancellationToken) -> Result<String> {
    let secrets = Api::<Secret>::namespaced(ctx.client.clone(), "kube-system");
    let authority = load_or_create(&secrets, CA_SECRET, None).await?;
    let again = load_or_create(&secrets, CA_SECRET, None).await?;
    ensure!(
        again.cert_pem() == authority.cert_pem(),
        "a second replica reads the same CA"
    );
    let ca_pem = authority.cert_pem().to_owned();
    let queue = WorkQueue::new(Backoff::default());
    let (signer, watch) = CsrSigner::new(
        ctx.client.clone(),
        Arc::new(authority),
        AGENT_USER.into(),
        queue.clone(),
        shutdown.clone(),
    );
    let (leading, leadership) = tokio::sync::watch::channel(true);
    let shutdown = shutdown.clone();
    tokio::spawn(watch);
    tokio::spawn(async move {
        // This "replica" leads for as long as the signer runs.
        let _leading = leading;
        let config = RunnerConfig {
            workers: 1,
            resync: Duration::from_secs(60),
        };
        runner::run(signer, queue, config, leadership, Metrics::new(), shutdown).await;
    });
    Ok(ca_pem)
}

fn verifies(ca_pem: &str, leaf_pem: &str, name: &str) -> Result<bool> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca_pem.as_bytes())?)?;
    let verifier = WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()?;
    let leaf = CertificateDer::from_pem_slice(leaf_pem.as_bytes())?;
    let name = ServerName::try_from(name.to_owned())?;
    Ok(verifier
        .verify_server_cert(&leaf, &[], &name, &[], UnixTime::now())
        .is_ok())
}

async fn internal_ip(ctx: &TestContext, node: &str) -> Result<String> {
    let node = Api::<Node>::all(ctx.client.clone()).get(node).await?;
    node.status
        .and_then(|s| s.addresses)
        .into_iter()
        .flatten()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address)
        .context("no InternalIP")
}

/// Lets the agent's service account create and read CSRs (as deploy/agent/rbac.yaml
/// does), creating the account if Stevedore is not deployed; returns the name of the
/// role, binding and pod, all named after the test's namespace.
async fn grant_csr_requests(ctx: &TestContext) -> Result<String> {
    let name = format!("{}-csr-agent", ctx.namespace);
    let accounts = Api::<ServiceAccount>::namespaced(ctx.client.clone(), "kube-system");
    if accounts.get_opt(AGENT_ACCOUNT).await?.is_none() {
        let account = serde_json::from_value(json!({ "metadata": { "name": AGENT_ACCOUNT } }))?;
        accounts.create(&PostParams::default(), &account).await?;
    }
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": { "name": name },
        "rules": [{
            "apiGroups": ["certificates.k8s.io"],
            "resources": ["certificatesigningrequests"],
            "verbs": ["create", "get"],
        }],
    }))?;
    Api::<ClusterRole>::all(ctx.client.clone())
        .create(&PostParams::default(), &role)
        .await?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
        "subjects": [{ "kind": "ServiceAccount", "name": AGENT_ACCOUNT, "namespace": "kube-system" }],
    }))?;
    Api::<ClusterRoleBinding>::all(ctx.client.clone())
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(name)
}

async fn revoke(ctx: &TestContext, name: &str) {
    let params = DeleteParams::default();
    let bindings = Api::<ClusterRoleBinding>::all(ctx.client.clone());
    let _ = bindings.delete(name, &params).await;
    let _ = Api::<ClusterRole>::all(ctx.client.clone())
        .delete(name, &params)
        .await;
}

/// A pod of the agent's service account on `node`, which the agent's token is bound to.
async fn agent_pod_on(ctx: &TestContext, node: &str) -> Result<Pod> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": format!("{}-csr-agent", ctx.namespace) },
        "spec": {
            "nodeName": node,
            "serviceAccountName": AGENT_ACCOUNT,
            "tolerations": [{ "operator": "Exists" }],
            "containers": [{ "name": "agent", "image": ctx.cluster.image("web:v1") }],
        },
    }))?;
    Ok(Api::<Pod>::namespaced(ctx.client.clone(), "kube-system")
        .create(&PostParams::default(), &pod)
        .await?)
}

/// The CA Secret goes with the control plane's Deployment: made with it as owner, or given
/// it when an older control plane made it without one, and then deleted by the garbage
/// collector with the Deployment (so `helm uninstall` leaves no CA behind). The CA an
/// adopted Secret holds is the one it held.
#[tokio::test]
async fn a_ca_secret_is_owned_by_the_deployment_and_goes_with_it() -> Result<()> {
    run_in_namespace("ca-owner", |ctx| async move {
        let deployments = Api::<Deployment>::namespaced(ctx.client.clone(), &ctx.namespace);
        let deployment = deployments
            .create(&PostParams::default(), &idle_deployment("controlplane")?)
            .await?;
        let owner = OwnerReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: deployment.name_any(),
            uid: deployment.uid().context("the Deployment has no UID")?,
            ..OwnerReference::default()
        };
        let secrets = Api::<Secret>::namespaced(ctx.client.clone(), &ctx.namespace);
        load_or_create(&secrets, "made-owned", Some(&owner)).await?;
        let older = load_or_create(&secrets, "made-ownerless", None).await?;
        ensure!(
            owner_uids(&secrets.get("made-ownerless").await?).is_empty(),
            "made without an owner, yet owned"
        );
        let adopted = load_or_create(&secrets, "made-ownerless", Some(&owner)).await?;
        ensure!(
            adopted.cert_pem() == older.cert_pem(),
            "giving the Secret its owner changed its CA"
        );
        for name in ["made-owned", "made-ownerless"] {
            let owners = owner_uids(&secrets.get(name).await?);
            ensure!(
                owners == [owner.uid.clone()],
                "{name} is owned by {owners:?}"
            );
        }
        deployments
            .delete(&owner.name, &DeleteParams::background())
            .await?;
        poll_until(
            "the CA Secrets deleted with the Deployment",
            Duration::from_secs(60),
            || async {
                let left = [
                    secrets.get_opt("made-owned").await?,
                    secrets.get_opt("made-ownerless").await?,
                ];
                Ok(left.iter().all(Option::is_none).then_some(()))
            },
        )
        .await
    })
    .await
}

fn owner_uids(secret: &Secret) -> Vec<String> {
    secret
        .metadata
        .owner_references
        .iter()
        .flatten()
        .map(|o| o.uid.clone())
        .collect()
}

/// A Deployment of no pods: an owner, nothing more.
fn idle_deployment(name: &str) -> Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name },
        "spec": {
            "replicas": 0,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "c", "image": "pause" }] }
            }
        }
    }))?)
}

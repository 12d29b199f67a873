//! The cluster's real kubelet nodes: the kubelet node and the workers that
//! `deploy/local/run.sh --real-nodes N` adds (deploy/local/lib/nodes.sh), each with its own
//! containerd and its own agent from the DaemonSet. Suites that need several real nodes
//! fail, naming the command that makes them, on a cluster that has fewer.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail, ensure};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::auth::agent_ca_bundle;
use crate::cluster::{parse_env, run_cluster_script};
use crate::containerd::Containerd;
use crate::pods::is_ready;
use crate::{TestContext, poll_until};

/// The taint (and label, value `true`) of the workers: only pods that tolerate it land
/// there, so suites written for the one kubelet node keep their placement.
pub const WORKER_TAINT: &str = "stevedore.dev/worker";
/// Where every node's agent serves gRPC (the DaemonSet's port).
pub const AGENT_PORT: u16 = 10350;
const READY: Duration = Duration::from_secs(180);

/// A real worker node added to the running cluster (`cluster.sh node add`), as a node
/// joins a production cluster; it leaves again (`cluster.sh node remove`) when dropped,
/// also when the test fails.
pub struct AddedNode {
    pub name: String,
}

impl AddedNode {
    pub fn add() -> Result<Self> {
        let out = run_cluster_script(&["node", "add"])?;
        let name = out.lines().last().unwrap_or_default().trim().to_owned();
        ensure!(
            name.starts_with("stevedore-worker-"),
            "cluster.sh node add printed no node name: {out}"
        );
        Ok(Self { name })
    }
}

impl Drop for AddedNode {
    fn drop(&mut self) {
        if let Err(err) = run_cluster_script(&["node", "remove", &self.name]) {
            eprintln!("removing the added node {} failed: {err:#}", self.name);
        }
    }
}

/// One real node: its name and InternalIP.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RealNode {
    pub name: String,
    pub ip: String,
}

/// The real nodes (not kwok's simulated ones), the kubelet node first; fails unless
/// there are at least `wanted`.
pub async fn real_nodes(ctx: &TestContext, wanted: usize) -> Result<Vec<RealNode>> {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let params = ListParams::default().labels("type notin (kwok)");
    let mut found: Vec<RealNode> = (nodes.list(&params).await?.items.into_iter())
        .map(|node| RealNode {
            ip: internal_ip(&node).unwrap_or_default(),
            name: node.metadata.name.unwrap_or_default(),
        })
        .collect();
    found.sort_by_key(|node| (node.name != ctx.cluster.node_name, node.name.clone()));
    ensure!(
        found.len() >= wanted,
        "this suite needs {wanted} real nodes and the cluster has {} ({:?}); bring one up \
         with: deploy/local/cluster.sh down && deploy/local/run.sh --real-nodes {wanted} --fake-nodes 2",
        found.len(),
        found.iter().map(|n| &n.name).collect::<Vec<_>>()
    );
    Ok(found)
}

fn internal_ip(node: &Node) -> Option<String> {
    let addresses = node.status.as_ref()?.addresses.as_ref()?;
    let internal = addresses.iter().find(|a| a.type_ == "InternalIP")?;
    Some(internal.address.clone())
}

/// Tolerations for pods meant for every real node, the workers included.
pub fn worker_toleration() -> Value {
    json!([{ "key": WORKER_TAINT, "operator": "Exists", "effect": "NoSchedule" }])
}

/// Node affinity for the real nodes only (kwok's simulated nodes run no containers).
pub fn real_node_affinity() -> Value {
    json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{ "matchExpressions": [
            { "key": "type", "operator": "NotIn", "values": ["kwok"] }
        ] }]
    } } })
}

/// Waits for the Ready agent pod on `node`.
pub async fn agent_pod(ctx: &TestContext, node: &str) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), "kube-system");
    let params = ListParams::default()
        .labels("app.kubernetes.io/name=stevedore-agent")
        .fields(&format!("spec.nodeName={node}"));
    poll_until(&format!("a Ready agent pod on {node}"), READY, || async {
        let list = pods.list(&params).await?;
        if list.items.is_empty() {
            bail!("no agent pod on {node}: deploy it with deploy/local/cluster.sh deploy");
        }
        Ok(list.items.into_iter().find(is_ready))
    })
    .await
}

/// A TLS channel to `node`'s agent, verifying its serving certificate for the node's
/// name against the agents' CA bundle.
pub async fn agent_channel(ctx: &TestContext, node: &RealNode) -> Result<Channel> {
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(agent_ca_bundle(ctx).await?))
        .domain_name(node.name.clone());
    let endpoint = Endpoint::from_shared(format!("https://{}:{AGENT_PORT}", node.ip))?
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(5));
    Ok(endpoint.connect().await?)
}

/// The containerd of `node`, as seen from this machine: the cluster's for the kubelet
/// node, the worker's own socket for a worker (`STEVEDORE_WORKERS_RUN/<node>`).
pub fn node_containerd(ctx: &TestContext, node: &str) -> Result<Containerd> {
    let mut containerd = ctx.cluster.containerd.clone();
    if node == ctx.cluster.node_name {
        containerd.socket = ctx.cluster.containerd_sock.clone();
        return Ok(containerd);
    }
    let env = parse_env(&run_cluster_script(&["env"])?);
    let Some(run) = env.get("STEVEDORE_WORKERS_RUN") else {
        bail!("the cluster's env names no STEVEDORE_WORKERS_RUN (an older cluster.sh)");
    };
    containerd.socket = PathBuf::from(run).join(node).join("containerd.sock");
    Ok(containerd)
}

/// `skopeo copy FROM docker://TO` into the local registry, for images no node holds yet;
/// FROM is `oci:<layout>:<tag>` or `docker://<image>`.
pub async fn copy_to_registry(from: &str, to: &str) -> Result<()> {
    copy_image(from, &format!("docker://{to}")).await
}

/// Copies `from` (an image of the local registry) to `to` as an image of its own: its
/// config gets the label `stevedore.dev/copy-of=<label>` (umoci), so its image ID differs
/// from `from`'s. A plain copy would give a node's containerd two names for one image
/// ID, and the kubelet would then report the containers of either under whichever name
/// containerd lists first, misleading every suite that reads `status.containerStatuses[].image`.
pub async fn distinct_copy(
    from: &str,
    to: &str,
    label: &str,
    scratch: &std::path::Path,
) -> Result<()> {
    let layout = scratch.join("distinct-copy");
    let tagged = format!("{}:copy", layout.display());
    copy_image(&format!("docker://{from}"), &format!("oci:{tagged}")).await?;
    let output = tokio::process::Command::new("umoci")
        .args(["config", "--image", &tagged, "--config.label"])
        .arg(format!("stevedore.dev/copy-of={label}"))
        .output()
        .await?;
    ensure!(
        output.status.success(),
        "umoci config of {tagged} failed: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    copy_to_registry(&format!("oci:{tagged}"), to).await
}

/// `skopeo copy FROM TO`, either side plain HTTP.
async fn copy_image(from: &str, to: &str) -> Result<()> {
    let output = tokio::process::Command::new("skopeo")
        .args([
            "copy",
            "--quiet",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
        ])
        .args([from, to])
        .output()
        .await?;
    ensure!(
        output.status.success(),
        "skopeo copy {from} to {to} failed: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(())
}

/// The PID of the deployed agent of `node` (the DaemonSet's container process), found
/// among every agent process of this machine by its `NODE_NAME`: with real workers, each
/// node's agent runs here too, in the host's PID namespace (the DaemonSet is hostPID).
pub fn agent_process_of(node: &str) -> Result<u32> {
    let output = std::process::Command::new("pgrep")
        .args(["-f", "^/usr/local/bin/stevedore-agent"])
        .output()?;
    let wanted = format!("NODE_NAME={node}");
    let pids: Vec<u32> = (String::from_utf8_lossy(&output.stdout).lines())
        .filter_map(|line| line.trim().parse().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == wanted.as_bytes()))
        })
        .collect();
    match pids.as_slice() {
        [pid] => Ok(*pid),
        _ => bail!("one agent process of {node} expected, found {pids:?}"),
    }
}

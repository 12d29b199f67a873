//! Carrying out one fault of the schedule on the local cluster. Each returns what it did,
//! in words for the run's history; a fault that finds nothing to act on says so.

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};

use super::invariants::Checker;
use super::plan::Fault;
use super::pool::Pool;
use super::process_faults;
use super::throttle::{self, proxy::Throttle};
use super::workloads::{self, STATEFUL, Workload};
use crate::TestContext;
use crate::controlplane::{self, CONTROL_PLANE, SYSTEM_NAMESPACE};
use crate::test_nodes;

/// What a fault acts on.
pub struct Targets<'a> {
    pub ctx: &'a TestContext,
    /// The client a user's own writes go through: like kubectl's, it sends each once, so a
    /// budget's refusal (429) is the fault's outcome. The harness's client retries a 429
    /// with backoff, as kube does, and a delete a PodUnavailableBudget refused during a
    /// rollout was retried until the fault's timeout (60 s of a 135 s run, seed 20261128).
    pub as_user: kube::Client,
    pub workloads: &'a [Workload],
    pub nodes: &'a [String],
    pub pool: &'a Pool,
    pub checker: &'a Arc<Mutex<Checker>>,
    pub images: [&'a str; 2],
    /// The proxy the control plane reaches the apiserver through, when the run routed
    /// it (only when `throttle-apiserver` is among its kinds).
    pub throttle: Option<&'a Throttle>,
}

pub async fn inject(targets: &Targets<'_>, fault: &Fault) -> Result<String> {
    let ctx = targets.ctx;
    match fault {
        Fault::KillLeader => {
            let leader = controlplane::leader(&ctx.client).await?;
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE);
            if pods.get_opt(&leader).await?.is_none() {
                return Ok(format!("the Lease still names {leader}, which is gone"));
            }
            let how = controlplane::kill_leader(&ctx.client, &leader).await?;
            Ok(format!("killed leader {leader} ({how})"))
        }
        Fault::KillStandby => kill_standby(ctx).await,
        Fault::PauseEtcd { seconds } => pause_etcd(ctx, *seconds).await,
        Fault::NodeNotReady { node } => {
            let name = pick(targets.nodes, *node as u64).context("no node")?;
            // kwok's node stage sets it back at its next pass.
            test_nodes::set_ready(ctx, name, "False").await?;
            Ok(format!("set node {name} NotReady"))
        }
        Fault::DeletePod { set, pick: which } => {
            let workload = &targets.workloads[*set % targets.workloads.len()];
            delete_pod(targets, workload, *which).await
        }
        Fault::DeleteRevision { set, pick: which } => {
            let workload = &targets.workloads[*set % targets.workloads.len()];
            delete_revision(ctx, workload, *which).await
        }
        Fault::UserEdit { set } => {
            let workload = &targets.workloads[*set % targets.workloads.len()];
            let now = workloads::current_image(ctx, workload).await?;
            let next = other_image(targets.images, &now);
            workloads::set_image(ctx, workload, next).await?;
            Ok(format!("edited {} to {next} mid-rollout", workload.name()))
        }
        Fault::RestartApiserver => process_faults::restart_apiserver(ctx).await,
        Fault::KillAgent { node, seconds } => {
            process_faults::kill_agent(targets.pool, *node, *seconds).await
        }
        Fault::DeletePvc { pick: which } => delete_claim(ctx, *which).await,
        Fault::DropWebhookEndpoints => drop_webhook_endpoints(ctx).await,
        Fault::ThrottleApiserver { seconds } => match targets.throttle {
            Some(proxy) => Ok(throttle::slow_down(proxy, *seconds).await),
            None => Ok("the control plane is not routed through the proxy".into()),
        },
        Fault::KillRealAgent { pick: which } => kill_real_agent(ctx, *which).await,
    }
}

/// Deletes, without grace, the agent pod of the node of a live pod of the real CloneSet
/// (its DaemonSet starts another): the agent dies at once, perhaps mid-restart.
async fn kill_real_agent(ctx: &TestContext, which: u64) -> Result<String> {
    let pods = ctx.api::<Pod>();
    let mut nodes: Vec<String> = Vec::new();
    for name in live_pod_names(ctx, workloads::REAL).await? {
        let node = pods.get_opt(&name).await?.and_then(|p| p.spec?.node_name);
        nodes.extend(node.filter(|n| !nodes.contains(n)));
    }
    let Some(node) = pick(&nodes, which) else {
        return Ok(format!("{} has no live pod on a node", workloads::REAL));
    };
    let agents: Api<Pod> = Api::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE);
    let params = ListParams::default()
        .labels("app.kubernetes.io/name=stevedore-agent")
        .fields(&format!("spec.nodeName={node}"));
    let Some(agent) = agents.list(&params).await?.items.into_iter().next() else {
        return Ok(format!("node {node} has no agent pod"));
    };
    agents
        .delete(&agent.name_any(), &DeleteParams::default().grace_period(0))
        .await?;
    Ok(format!(
        "killed the agent {} of real node {node}",
        agent.name_any()
    ))
}

/// The Service in front of the control plane's admission webhooks.
const WEBHOOK_SERVICE: &str = "stevedore-controlplane-webhook";

async fn drop_webhook_endpoints(ctx: &TestContext) -> Result<String> {
    let slices: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE);
    let selector = format!("kubernetes.io/service-name={WEBHOOK_SERVICE}");
    let found = slices
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    if found.is_empty() {
        return Ok(format!("{WEBHOOK_SERVICE} had no EndpointSlice to drop"));
    }
    let mut names = Vec::new();
    for slice in found {
        slices
            .delete(&slice.name_any(), &DeleteParams::default())
            .await?;
        names.push(slice.name_any());
    }
    Ok(format!("dropped the webhook's EndpointSlices {names:?}"))
}

/// Deletes a claim of a live StatefulSet ordinal (`data-sts-N` of a pod that is not
/// terminating). Kubernetes keeps it (its protection finalizer) until the pod is gone.
async fn delete_claim(ctx: &TestContext, which: u64) -> Result<String> {
    let live = live_pod_names(ctx, STATEFUL).await?;
    let Some(pod) = pick(&live, which) else {
        return Ok(format!("{STATEFUL} has no live pod whose claim to delete"));
    };
    let claim = format!("data-{pod}");
    let claims = ctx.api::<PersistentVolumeClaim>();
    if claims.get_opt(&claim).await?.is_none() {
        return Ok(format!("{pod} has no claim {claim}"));
    }
    claims.delete(&claim, &DeleteParams::default()).await?;
    Ok(format!("deleted claim {claim} of live pod {pod}"))
}

/// The other of the two images (the first when `now` is neither).
pub fn other_image<'a>(images: [&'a str; 2], now: &str) -> &'a str {
    if now == images[0] {
        images[1]
    } else {
        images[0]
    }
}

fn pick<T>(items: &[T], which: u64) -> Option<&T> {
    let len = u64::try_from(items.len()).ok().filter(|n| *n > 0)?;
    items.get(usize::try_from(which % len).ok()?)
}

async fn kill_standby(ctx: &TestContext) -> Result<String> {
    let leader = controlplane::leader(&ctx.client).await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE);
    let standby = pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find(|p| {
            let name = p.name_any();
            name.starts_with(CONTROL_PLANE)
                && name != leader
                && p.metadata.deletion_timestamp.is_none()
        });
    let Some(standby) = standby else {
        return Ok("no standby to kill".into());
    };
    let uid = standby.uid().unwrap_or_default();
    let Some(pid) = controlplane::control_plane_pid(&uid) else {
        return Ok(format!("standby {} has no process yet", standby.name_any()));
    };
    signal("KILL", pid)?;
    Ok(format!("killed standby {} (pid {pid})", standby.name_any()))
}

pub fn signal(name: &str, pid: u32) -> Result<()> {
    let status = Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status()?;
    ensure!(status.success(), "kill -{name} {pid}: {status}");
    Ok(())
}

/// Sends SIGCONT to etcd when dropped, so a failing or cancelled run never leaves it stopped.
struct Stopped(u32);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = signal("CONT", self.0);
    }
}

async fn pause_etcd(ctx: &TestContext, seconds: u64) -> Result<String> {
    let pid_file = ctx.cluster.state_dir.join("pids/etcd.pid");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .with_context(|| format!("reading {}", pid_file.display()))?
        .trim()
        .parse()
        .with_context(|| format!("{} holds no pid", pid_file.display()))?;
    signal("STOP", pid)?;
    let stopped = Stopped(pid);
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    drop(stopped);
    Ok(format!("paused etcd (pid {pid}) for {seconds} s"))
}

async fn delete_pod(targets: &Targets<'_>, workload: &Workload, which: u64) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(targets.as_user.clone(), &targets.ctx.namespace);
    let selector = format!("app={}", workload.name());
    let mut live: Vec<Pod> = pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    live.sort_by_key(|p| p.name_any());
    let Some(pod) = pick(&live, which) else {
        return Ok(format!("{} has no live pod to delete", workload.name()));
    };
    let uid = pod.uid().unwrap_or_default();
    // Told first: the watch may report the deletion before the call returns.
    lock(targets.checker)?.harness_deleted(&uid);
    // Only that pod: a StatefulSet's replacement has the same name, and deleting it by
    // name alone (seed 23, fault #226) made the checkers count the harness's deletion of
    // an unrecorded pod as the controller's.
    let only_that_pod = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    pods.delete(&pod.name_any(), &only_that_pod).await?;
    Ok(format!("deleted pod {}", pod.name_any()))
}

async fn delete_revision(ctx: &TestContext, workload: &Workload, which: u64) -> Result<String> {
    let revisions = ctx.api::<ControllerRevision>();
    let mut owned: Vec<ControllerRevision> = revisions
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|r| {
            r.owner_references()
                .iter()
                .any(|o| o.name == workload.name())
        })
        .collect();
    owned.sort_by_key(|r| r.name_any());
    let Some(revision) = pick(&owned, which) else {
        return Ok(format!("{} has no revision to delete", workload.name()));
    };
    revisions
        .delete(&revision.name_any(), &DeleteParams::default())
        .await?;
    Ok(format!("deleted revision {}", revision.name_any()))
}

/// An error in words: the apiserver's own message for a refusal, never a dump of the
/// status object.
pub fn in_words(err: &anyhow::Error) -> String {
    match err.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(status)) => format!("the apiserver said \"{}\"", status.message),
        _ => format!("{err:#}"),
    }
}

pub fn lock<T>(mutex: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>> {
    match mutex.lock() {
        Ok(guard) => Ok(guard),
        Err(_) => bail!("a checker thread panicked"),
    }
}

/// The names of `app`'s pods that are not terminating, sorted (so a seeded pick replays).
pub async fn live_pod_names(ctx: &TestContext, app: &str) -> Result<Vec<String>> {
    let selector = format!("app={app}");
    let pods = ctx
        .api::<Pod>()
        .list(&ListParams::default().labels(&selector))
        .await?;
    let mut live: Vec<String> = (pods.items.iter())
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.name_any())
        .collect();
    live.sort();
    Ok(live)
}

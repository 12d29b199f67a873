//! The deployed (in-cluster) control plane as a fault-tolerance suite handles it: who
//! leads, killing the leader so it cannot release its Lease, waiting for both replicas,
//! and stopping it altogether for a while — scaled back when the guard drops, even when
//! the test fails or panics.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};

use crate::cluster::ClusterInfo;
use crate::poll_until;

pub const SYSTEM_NAMESPACE: &str = "kube-system";
/// The Deployment, and the Lease its replicas elect a leader on.
pub const CONTROL_PLANE: &str = "stevedore-controlplane";

/// The identity (pod name) holding the control plane's Lease.
pub async fn leader(client: &kube::Client) -> Result<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let lease = leases.get(CONTROL_PLANE).await?;
    lease
        .spec
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
        .context("the control plane Lease has no holder")
}

/// Waits until a replica other than `old` holds the Lease; returns it.
pub async fn new_leader(client: &kube::Client, old: &str) -> Result<String> {
    poll_until(
        "another control plane replica to take the Lease",
        Duration::from_secs(60),
        || async {
            let holder = leader(client).await.ok();
            Ok(holder.filter(|h| h != old))
        },
    )
    .await
}

/// The host PID of the control plane's process in pod `uid` (the kubelet node is this
/// machine): the process whose cgroup names the pod and whose command is the binary.
pub fn control_plane_pid(pod_uid: &str) -> Option<u32> {
    let systemd_uid = pod_uid.replace('-', "_");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cgroup = std::fs::read_to_string(entry.path().join("cgroup")).ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            let in_pod = cgroup.contains(pod_uid) || cgroup.contains(&systemd_uid);
            (in_pod && comm.trim().starts_with("stevedore-contr")).then_some(pid)
        })
}

/// Kills the leader without letting it release its Lease: SIGKILL to its process (when
/// it can be found from here), then at once a forced deletion of its pod, so the kubelet
/// does not restart it under the same identity (which would simply renew its own Lease).
/// Returns how it was killed.
pub async fn kill_leader(client: &kube::Client, leader: &str) -> Result<&'static str> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let pod = pods.get(leader).await?;
    let mut how = "forced pod deletion";
    let pod_uid = pod.metadata.uid.unwrap_or_default();
    if let Some(pid) = control_plane_pid(&pod_uid) {
        let status = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()?;
        ensure!(status.success(), "kill -KILL {pid}: {status}");
        how = "SIGKILL and forced pod deletion";
    }
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    pods.delete(leader, &force).await?;
    Ok(how)
}

/// Waits until the control plane Deployment has all its replicas (two) updated and ready.
pub async fn wait_control_plane_ready(client: &kube::Client) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    poll_until(
        "the control plane Deployment to have 2 ready replicas",
        Duration::from_secs(180),
        || async {
            let d = deployments.get(CONTROL_PLANE).await?;
            let status = d.status.unwrap_or_default();
            let ready = status.ready_replicas == Some(2)
                && status.replicas == Some(2)
                && status.updated_replicas == Some(2);
            if ready {
                Ok(Some(()))
            } else {
                bail!("status {status:?}")
            }
        },
    )
    .await
}

/// The control plane scaled to zero; dropping it scales the Deployment back to the
/// replicas it had (through kubectl, since a drop cannot await).
pub struct Stopped {
    kubectl: std::path::PathBuf,
    kubeconfig: std::path::PathBuf,
    replicas: i32,
    restored: bool,
}

fn scale(client: &kube::Client, replicas: i32) -> impl Future<Output = Result<()>> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    async move {
        let patch = serde_json::json!({ "spec": { "replicas": replicas } });
        deployments
            .patch_scale(
                CONTROL_PLANE,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        Ok(())
    }
}

/// Scales the control plane to zero and waits until none of its pods is left, so nothing
/// reconciles until [`Stopped::start`] (or the guard's drop).
pub async fn stop_control_plane(client: &kube::Client, cluster: &ClusterInfo) -> Result<Stopped> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let replicas = deployments
        .get(CONTROL_PLANE)
        .await?
        .spec
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    // The guard exists before the scale-down, so a failure from here on restores it.
    let guard = Stopped {
        kubectl: cluster.kubectl.clone(),
        kubeconfig: cluster.kubeconfig.clone(),
        replicas,
        restored: false,
    };
    scale(client, 0).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
    let selector = ListParams::default().labels(&format!("app.kubernetes.io/name={CONTROL_PLANE}"));
    poll_until(
        "every control plane pod to be gone",
        Duration::from_secs(90),
        || async { Ok(pods.list(&selector).await?.items.is_empty().then_some(())) },
    )
    .await?;
    Ok(guard)
}

impl Stopped {
    /// Scales the control plane back and waits until a replica holds the Lease.
    pub async fn start(mut self, client: &kube::Client) -> Result<()> {
        scale(client, self.replicas).await?;
        self.restored = true;
        poll_until(
            "a control plane replica to hold the Lease",
            Duration::from_secs(120),
            || async {
                let holder = leader(client).await.ok();
                let pods: Api<Pod> = Api::namespaced(client.clone(), SYSTEM_NAMESPACE);
                // Not the Lease of a replica from before the stop.
                Ok(match holder {
                    Some(h) => pods.get_opt(&h).await?.map(|_| h),
                    None => None,
                })
            },
        )
        .await?;
        Ok(())
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if self.restored {
            return;
        }
        let outcome = Command::new(&self.kubectl)
            .env("KUBECONFIG", &self.kubeconfig)
            .args(["-n", SYSTEM_NAMESPACE, "scale", "deployment", CONTROL_PLANE])
            .arg(format!("--replicas={}", self.replicas))
            .status();
        if !outcome.as_ref().is_ok_and(|s| s.success()) {
            eprintln!(
                "scaling the control plane back to {} failed: {outcome:?}",
                self.replicas
            );
        }
    }
}

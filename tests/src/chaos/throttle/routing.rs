//! Routing the deployed control plane through the proxy and back: its Deployment's env
//! patched ([`super::route`]), then its rollout waited for. A [`Route`] not restored by
//! the end of the run restores the Deployment when dropped, and a run begins by
//! restoring one that an earlier, crashed run left routed through a proxy that is gone,
//! so the suites after a chaos run always find the control plane dialling the apiserver.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::core::v1::{EnvVar, Pod};
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;

use super::route;
use crate::TestContext;
use crate::controlplane::{self, CONTROL_PLANE, SYSTEM_NAMESPACE};
use crate::poll_until;

/// The control plane's container in its Deployment.
const CONTAINER: &str = "controlplane";
/// Two replicas replaced one at a time, each ready once its caches have synced.
const ROLLOUT: Duration = Duration::from_secs(240);

/// Whether the Deployment of generation `generation` has all `want` replicas on its
/// current template, ready and available, and no old one left. Pure.
pub fn rolled_out(generation: Option<i64>, want: i32, status: &DeploymentStatus) -> bool {
    let observed = status.observed_generation >= generation;
    let all = |n: Option<i32>| n == Some(want);
    observed
        && all(status.updated_replicas)
        && all(status.ready_replicas)
        && all(status.available_replicas)
        && all(status.replicas)
}

fn deployments(ctx: &TestContext) -> Api<Deployment> {
    Api::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE)
}

/// The index of the control plane's container and its env.
async fn current_env(ctx: &TestContext) -> Result<(usize, Vec<EnvVar>)> {
    let deployment = deployments(ctx).get(CONTROL_PLANE).await?;
    let containers = deployment
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| s.containers)
        .unwrap_or_default();
    let index = containers
        .iter()
        .position(|c| c.name == CONTAINER)
        .with_context(|| format!("{CONTROL_PLANE} has no container {CONTAINER}"))?;
    let env = containers[index].env.clone().unwrap_or_default();
    Ok((index, env))
}

async fn apply(ctx: &TestContext, patch: &Value) -> Result<()> {
    let patch: json_patch::Patch = serde_json::from_value(patch.clone())?;
    deployments(ctx)
        .patch(
            CONTROL_PLANE,
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await?;
    Ok(())
}

/// Restores the Deployment when an earlier run left it routed (no proxy of this run
/// exists yet, so any route is stale); says what it found.
pub async fn restore_stale(ctx: &TestContext) -> Result<Option<String>> {
    let (index, env) = current_env(ctx).await?;
    let Some(stale) = route::proxy_of(&env).map(str::to_owned) else {
        return Ok(None);
    };
    let Some(restored) = route::restored(&env) else {
        return Ok(None);
    };
    apply(ctx, &route::env_patch(index, CONTAINER, &restored)).await?;
    wait_rolled_out(ctx).await?;
    Ok(Some(format!(
        "restored the control plane, which an earlier run left routed through {stale}"
    )))
}

/// The control plane routed through a proxy; see the module's words on restoring it.
pub struct Route {
    kubectl: PathBuf,
    kubeconfig: PathBuf,
    restore: Value,
    restored: bool,
}

/// Routes the control plane through `proxy` (without waiting for the rollout: see
/// [`wait_rolled_out`]).
pub async fn route(ctx: &TestContext, proxy: SocketAddr) -> Result<Route> {
    let (index, env) = current_env(ctx).await?;
    let Some(routed) = route::routed(&env, proxy) else {
        bail!(
            "{CONTROL_PLANE} sets {} itself; the harness does not route it",
            route::HOST
        );
    };
    let restore = route::restored(&routed).unwrap_or_default();
    // The guard exists before the patch, so a failure from here on restores it.
    let guard = Route {
        kubectl: ctx.cluster.kubectl.clone(),
        kubeconfig: ctx.cluster.kubeconfig.clone(),
        restore: route::env_patch(index, CONTAINER, &restore),
        restored: false,
    };
    apply(ctx, &route::env_patch(index, CONTAINER, &routed)).await?;
    Ok(guard)
}

impl Route {
    /// Routes the control plane back to the apiserver and waits for the rollout (the
    /// proxy must serve the old replicas until then).
    pub async fn restore(mut self, ctx: &TestContext) -> Result<()> {
        apply(ctx, &self.restore).await?;
        self.restored = true;
        wait_rolled_out(ctx).await
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        if self.restored {
            return;
        }
        let outcome = Command::new(&self.kubectl)
            .env("KUBECONFIG", &self.kubeconfig)
            .args(["-n", SYSTEM_NAMESPACE, "patch", "deployment", CONTROL_PLANE])
            .args(["--type=json", "-p", &self.restore.to_string()])
            .status();
        if !outcome.as_ref().is_ok_and(|s| s.success()) {
            eprintln!("routing the control plane back to the apiserver failed: {outcome:?}");
        }
    }
}

/// Waits until the control plane's rollout is done and one of its live replicas holds
/// the Lease.
pub async fn wait_rolled_out(ctx: &TestContext) -> Result<()> {
    let deployments = deployments(ctx);
    poll_until("the control plane's rollout", ROLLOUT, || async {
        let d = deployments.get(CONTROL_PLANE).await?;
        let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let status = d.status.unwrap_or_default();
        if rolled_out(d.metadata.generation, want, &status) {
            return Ok(Some(()));
        }
        let n = |count: Option<i32>| count.unwrap_or(0);
        bail!(
            "{} of {want} replicas on the new template, {} ready, {} in all (the Deployment \
             controller has seen generation {} of {})",
            n(status.updated_replicas),
            n(status.ready_replicas),
            n(status.replicas),
            status.observed_generation.unwrap_or(0),
            d.metadata.generation.unwrap_or(0)
        )
    })
    .await?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE);
    poll_until(
        "a live control plane replica to hold the Lease",
        ROLLOUT,
        || async {
            let Ok(holder) = controlplane::leader(&ctx.client).await else {
                return Ok(None);
            };
            let live = pods
                .get_opt(&holder)
                .await?
                .is_some_and(|p| p.metadata.deletion_timestamp.is_none());
            Ok(live.then_some(()))
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(
        observed: i64,
        updated: i32,
        ready: i32,
        available: i32,
        all: i32,
    ) -> DeploymentStatus {
        DeploymentStatus {
            observed_generation: Some(observed),
            updated_replicas: Some(updated),
            ready_replicas: Some(ready),
            available_replicas: Some(available),
            replicas: Some(all),
            ..DeploymentStatus::default()
        }
    }

    #[test]
    fn a_rollout_is_done_when_every_replica_is_new_ready_and_alone() {
        // (case, generation, status, done)
        let rows = [
            ("all new and ready", 5, status(5, 2, 2, 2, 2), true),
            (
                "the status is of the last template",
                6,
                status(5, 2, 2, 2, 2),
                false,
            ),
            (
                "one old replica left beside a surge",
                5,
                status(5, 2, 2, 2, 3),
                false,
            ),
            (
                "a new replica not ready yet",
                5,
                status(5, 2, 1, 1, 2),
                false,
            ),
            (
                "one replica not on the new template",
                5,
                status(5, 1, 2, 2, 2),
                false,
            ),
        ];
        for (case, generation, status, done) in rows {
            assert_eq!(rolled_out(Some(generation), 2, &status), done, "{case}");
        }
        assert!(!rolled_out(Some(1), 2, &DeploymentStatus::default()));
    }
}

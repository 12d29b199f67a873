//! Native PodDisruptionBudgets over a CloneSet on the simulated nodes: the disruption
//! controller reads the CloneSet's scale subresource for `expectedPods`, and a Stevedore
//! scale-down deletes through the Eviction API, so a budget with nothing left holds it
//! (a `DisruptionHeld` Event quoting the apiserver) until the budget allows it. Needs this
//! branch's control plane with `--controllers cloneset` (see dev-cp.sh).

use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::CloneSet;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use crate::cloneset_support;
use cloneset_support::{ROLLOUT, apply, pods_of, wait_event, wait_rolled_out};

/// A CloneSet `name` of `replicas` pods on the kwok nodes (kwok makes them ready).
fn kwok_cloneset(ctx: &TestContext, name: &str, replicas: i32) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": { "name": name, "namespace": ctx.namespace },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "nodeSelector": { "type": "kwok" },
                    "tolerations": [{
                        "key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"
                    }],
                    "containers": [{ "name": "web", "image": ctx.cluster.image("web:v1") }],
                },
            },
        },
    })
}

async fn create_pdb(ctx: &TestContext, name: &str, selects: &str, spec: Value) -> Result<()> {
    let mut spec = spec;
    spec["selector"] = json!({ "matchLabels": { "app": selects } });
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": ctx.namespace },
        "spec": spec,
    }))?;
    ctx.api::<PodDisruptionBudget>()
        .create(&PostParams::default(), &pdb)
        .await?;
    Ok(())
}

/// Waits until the PDB's (expectedPods, currentHealthy, disruptionsAllowed) are `want`.
async fn wait_pdb(ctx: &TestContext, name: &str, want: (i32, i32, i32)) -> Result<()> {
    let what = format!("PDB {name} at (expected, healthy, allowed) {want:?}");
    poll_until(&what, Duration::from_secs(90), || async {
        let pdb = ctx.api::<PodDisruptionBudget>().get(name).await?;
        let status = pdb.status.context("no status yet")?;
        let got = (
            status.expected_pods,
            status.current_healthy,
            status.disruptions_allowed,
        );
        if got == want {
            Ok(Some(()))
        } else {
            bail!("{got:?}")
        }
    })
    .await
}

async fn scale(ctx: &TestContext, name: &str, replicas: i32) -> Result<()> {
    let patch = json!({ "spec": { "replicas": replicas } });
    ctx.api::<CloneSet>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_native_budget_counts_a_cloneset_by_its_scale_subresource() -> Result<()> {
    run_in_namespace("pdb-scale", |ctx| async move {
        apply(&ctx, &kwok_cloneset(&ctx, "counted", 3)).await?;
        wait_rolled_out(&ctx, "counted", ROLLOUT).await?;
        // A percentage needs the controller's scale (an integer minAvailable does not).
        create_pdb(&ctx, "counted", "counted", json!({ "minAvailable": "50%" })).await?;
        wait_pdb(&ctx, "counted", (3, 3, 1)).await?;
        scale(&ctx, "counted", 5).await?;
        wait_rolled_out(&ctx, "counted", ROLLOUT).await?;
        wait_pdb(&ctx, "counted", (5, 5, 2)).await
    })
    .await
}

#[tokio::test]
async fn a_native_budget_holds_a_scale_down_until_it_allows() -> Result<()> {
    run_in_namespace("pdb-scaledown", |ctx| async move {
        let name = "held";
        apply(&ctx, &kwok_cloneset(&ctx, name, 3)).await?;
        wait_rolled_out(&ctx, name, ROLLOUT).await?;
        create_pdb(&ctx, name, name, json!({ "maxUnavailable": 0 })).await?;
        wait_pdb(&ctx, name, (3, 3, 0)).await?;

        scale(&ctx, name, 2).await?;
        let event = wait_event(&ctx, name, "DisruptionHeld", &["disruption budget"]).await?;
        eprintln!("held: {}", event.message);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let pods = pods_of(&ctx, name).await?;
        let going = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .count();
        ensure!(
            pods.len() == 3 && going == 0,
            "{} pods, {going} going",
            pods.len()
        );

        let allow = json!({ "spec": { "maxUnavailable": 1 } });
        ctx.api::<PodDisruptionBudget>()
            .patch(name, &PatchParams::default(), &Patch::Merge(&allow))
            .await?;
        wait_rolled_out(&ctx, name, ROLLOUT).await?;
        wait_pdb(&ctx, name, (2, 2, 1)).await
    })
    .await
}

//! The Advanced StatefulSet controller (running in the cluster) scaling pods on the
//! simulated (kwok) nodes: stable names and identity labels, OrderedReady creating each
//! pod only after the one before is Ready and scaling down from the highest ordinal,
//! Parallel creating all at once, and reserveOrdinals / ordinals.start as seed 002
//! describes them. kwok marks pods Running and Ready without running containers.

mod cloneset_component;

use std::collections::BTreeSet;
use std::sync::Mutex;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_controlplane::api::StatefulSet;
use stevedore_tests::pods::is_running_and_ready;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use cloneset_component::{CONVERGE, label, merge};

/// An Advanced StatefulSet of `replicas` pods on the kwok nodes, with `overrides` merged
/// over it (RFC 7386).
fn statefulset(ctx: &TestContext, name: &str, replicas: i32, overrides: Value) -> Value {
    let mut object = json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "StatefulSet",
        "metadata": { "name": name },
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "nodeSelector": { "type": "kwok" },
                    "tolerations": [{
                        "key": "kwok.x-k8s.io/node",
                        "operator": "Exists",
                        "effect": "NoSchedule"
                    }],
                    "containers": [{ "name": "web", "image": ctx.cluster.image("web:v1") }]
                }
            }
        }
    });
    merge(&mut object, overrides);
    object
}

async fn create(ctx: &TestContext, object: Value) -> Result<StatefulSet> {
    let set: StatefulSet = serde_json::from_value(object).context("a valid StatefulSet")?;
    Ok(ctx
        .api::<StatefulSet>()
        .create(&PostParams::default(), &set)
        .await?)
}

async fn scale(ctx: &TestContext, name: &str, replicas: i32) -> Result<()> {
    let patch = json!({ "spec": { "replicas": replicas } });
    ctx.api::<StatefulSet>()
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// The set's pods that are not terminating.
async fn live_pods(ctx: &TestContext, name: &str) -> Result<Vec<Pod>> {
    let list = ctx
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

/// Waits until exactly the pods `<name>-<ordinal>` for `ordinals` run and are ready.
async fn wait_ordinals(ctx: &TestContext, name: &str, ordinals: &[i32]) -> Result<Vec<Pod>> {
    let want: BTreeSet<String> = ordinals.iter().map(|o| format!("{name}-{o}")).collect();
    poll_until(
        &format!("pods {want:?} running and ready"),
        CONVERGE,
        || async {
            let pods = live_pods(ctx, name).await?;
            let names: BTreeSet<String> = pods.iter().map(|p| p.name_any()).collect();
            let ready = pods.iter().all(is_running_and_ready);
            Ok((names == want && ready).then_some(pods))
        },
    )
    .await
}

/// When the pod's Ready condition last turned True.
fn ready_since(pod: &Pod) -> Option<k8s_openapi::jiff::Timestamp> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions.iter().find(|c| c.type_ == "Ready")?;
    ready.last_transition_time.as_ref().map(|t| t.0)
}

fn created(pod: &Pod) -> Option<k8s_openapi::jiff::Timestamp> {
    pod.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

#[tokio::test]
async fn ordered_ready_creates_in_order_and_scales_down_from_the_top() -> Result<()> {
    run_in_namespace("sts-ordered", |ctx| async move {
        create(&ctx, statefulset(&ctx, "web", 3, json!({}))).await?;
        let pods = wait_ordinals(&ctx, "web", &[0, 1, 2]).await?;
        for pod in &pods {
            let name = pod.name_any();
            let ordinal = name.rsplit('-').next().unwrap_or_default();
            ensure!(
                label(pod, "statefulset.kubernetes.io/pod-name") == Some(name.as_str()),
                "{name}: pod-name label"
            );
            ensure!(
                label(pod, "apps.kubernetes.io/pod-index") == Some(ordinal),
                "{name}: pod-index label"
            );
            let spec = pod.spec.as_ref().context("a pod spec")?;
            ensure!(
                spec.hostname.as_deref() == Some(name.as_str()),
                "{name}: hostname"
            );
            ensure!(
                spec.subdomain.as_deref() == Some("web"),
                "{name}: subdomain"
            );
        }
        // Each pod was created only after the one before it was Ready.
        let by_name = |n: &str| pods.iter().find(|p| p.name_any() == n);
        for (before, after) in [("web-0", "web-1"), ("web-1", "web-2")] {
            let ready = by_name(before).and_then(ready_since);
            let born = by_name(after).and_then(created);
            ensure!(
                matches!((ready, born), (Some(r), Some(b)) if b >= r),
                "{after} was created at {born:?}, before {before} was Ready at {ready:?}"
            );
        }

        scale(&ctx, "web", 1).await?;
        // From the highest ordinal down: web-1 never goes while web-2 is still there.
        let out_of_order = Mutex::new(None::<BTreeSet<String>>);
        poll_until("web scaled down to web-0", CONVERGE, || async {
            let names: BTreeSet<String> = live_pods(&ctx, "web")
                .await?
                .iter()
                .map(|p| p.name_any())
                .collect();
            if names.contains("web-2") && !names.contains("web-1") {
                *out_of_order
                    .lock()
                    .map_err(|_| anyhow::anyhow!("poisoned"))? = Some(names.clone());
            }
            Ok((names.len() == 1 && names.contains("web-0")).then_some(()))
        })
        .await?;
        let seen = out_of_order
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        ensure!(seen.is_none(), "web-1 was deleted before web-2: {seen:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn parallel_creates_at_once_and_seed_002_ordinals_apply() -> Result<()> {
    run_in_namespace("sts-parallel", |ctx| async move {
        let overrides = json!({ "spec": { "podManagementPolicy": "Parallel" } });
        create(&ctx, statefulset(&ctx, "par", 3, overrides)).await?;
        wait_ordinals(&ctx, "par", &[0, 1, 2]).await?;

        // replicas 3 with ordinal 1 reserved: par2-0, par2-2, par2-3.
        let overrides = json!({ "spec": {
            "podManagementPolicy": "Parallel",
            "reserveOrdinals": [1]
        }});
        create(&ctx, statefulset(&ctx, "par2", 3, overrides)).await?;
        wait_ordinals(&ctx, "par2", &[0, 2, 3]).await?;
        // Reserving 2 as well moves its pod to 4, replicas unchanged.
        let patch = json!({ "spec": { "reserveOrdinals": [1, 2] } });
        ctx.api::<StatefulSet>()
            .patch("par2", &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        wait_ordinals(&ctx, "par2", &[0, 3, 4]).await?;

        // ordinals.start 3 with a reserved range: 3, 4, 7.
        let overrides = json!({ "spec": {
            "podManagementPolicy": "Parallel",
            "ordinals": { "start": 3 },
            "reserveOrdinals": ["5-6"]
        }});
        create(&ctx, statefulset(&ctx, "start", 3, overrides)).await?;
        wait_ordinals(&ctx, "start", &[3, 4, 7]).await?;

        let status = poll_until("status counts", CONVERGE, || async {
            let set = ctx.api::<StatefulSet>().get("start").await?;
            let status = set.status.unwrap_or_default();
            Ok((status.ready_replicas == 3 && status.replicas == 3).then_some(status))
        })
        .await?;
        ensure!(status.label_selector == "app=start", "{status:?}");
        Ok(())
    })
    .await
}

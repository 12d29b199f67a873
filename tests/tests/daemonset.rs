//! The Advanced DaemonSet controller against the real apiserver, on kwok nodes the test
//! creates and labels (the DaemonSets select them by nodeSelector, so nothing lands on
//! the cluster's other nodes): one pod per node, pinned by node affinity; a node whose
//! label goes, that is tainted NoSchedule (the pod stays) or NoExecute (it goes, and
//! comes back with the taint removed), or that is deleted; a native apps/v1 DaemonSet
//! manifest with only its apiVersion changed, rolled out Standard within maxUnavailable,
//! held by partition and by paused.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use stevedore_controlplane::api::DaemonSet;
use stevedore_tests::{poll_until, run_in_namespace};

mod daemonset_support;
use daemonset_support::{
    TEST_LABEL, WAIT, create, image_of, manifest, nodes, patch_spec, pods_by_node, ready, taint,
    wait_on_nodes, with_nodes, within_unavailable,
};

#[tokio::test]
async fn one_pod_per_node_follows_labels_taints_and_removal() -> Result<()> {
    run_in_namespace("ds-nodes", |ctx| async move {
        with_nodes(ctx, 3, |ctx, n| async move {
            let ds = create(&ctx, manifest(&ctx, "agent", "web:v1", json!({}))).await?;
            wait_on_nodes(&ctx, "agent", &[&n[0], &n[1], &n[2]]).await?;
            let by_node = pods_by_node(&ctx, "agent").await?;
            for pods in by_node.values() {
                let spec = pods[0].spec.clone().unwrap_or_default();
                let affinity = serde_json::to_string(&spec.affinity)?;
                ensure!(
                    affinity.contains("metadata.name"),
                    "a pod is pinned by required node affinity: {affinity}"
                );
                let tolerations = spec.tolerations.unwrap_or_default();
                ensure!(
                    tolerations
                        .iter()
                        .any(|t| t.key.as_deref() == Some("node.kubernetes.io/unreachable")),
                    "daemon pods carry the automatic tolerations: {tolerations:?}"
                );
            }
            poll_until("status counts three nodes", WAIT, || async {
                let ds = ctx.api::<DaemonSet>().get(&ds.name_any()).await?;
                let s = ds.status.unwrap_or_default();
                Ok((s.desired_number_scheduled == 3
                    && s.current_number_scheduled == 3
                    && s.number_ready == 3
                    && s.updated_number_scheduled == 3
                    && s.number_available == 3
                    && !s.daemon_set_hash.is_empty())
                .then_some(()))
            })
            .await?;

            // The label goes: the node no longer fits, its pod goes.
            let unlabel = json!({ "metadata": { "labels": { TEST_LABEL: null } } });
            nodes(&ctx)
                .patch(&n[2], &PatchParams::default(), &Patch::Merge(unlabel))
                .await?;
            wait_on_nodes(&ctx, "agent", &[&n[0], &n[1]]).await?;

            // NoSchedule keeps new pods off but lets the running one stay.
            let dedicated =
                |effect: &str| json!({ "key": "dedicated", "value": "x", "effect": effect });
            let before = pods_by_node(&ctx, "agent").await?;
            taint(&ctx, &n[1], &[dedicated("NoSchedule")]).await?;
            tokio::time::sleep(Duration::from_secs(3)).await;
            let after = pods_by_node(&ctx, "agent").await?;
            ensure!(
                before.get(&n[1]).map(|p| p[0].uid()) == after.get(&n[1]).map(|p| p[0].uid()),
                "a NoSchedule taint left the running pod alone"
            );

            // NoExecute evicts; removing it brings a pod back (OpenKruise #1199).
            taint(&ctx, &n[1], &[dedicated("NoExecute")]).await?;
            wait_on_nodes(&ctx, "agent", &[&n[0]]).await?;
            taint(&ctx, &n[1], &[]).await?;
            wait_on_nodes(&ctx, "agent", &[&n[0], &n[1]]).await?;

            // A node that is removed takes its pod with it.
            nodes(&ctx).delete(&n[0], &DeleteParams::default()).await?;
            wait_on_nodes(&ctx, "agent", &[&n[1]]).await?;
            Ok(())
        })
        .await
    })
    .await
}

#[tokio::test]
async fn native_manifest_rolls_out_within_max_unavailable_partition_and_pause() -> Result<()> {
    run_in_namespace("ds-rollout", |ctx| async move {
        with_nodes(ctx, 3, |ctx, n| async move {
            let rolling = json!({ "maxUnavailable": 1 });
            create(&ctx, manifest(&ctx, "logs", "web:v1", rolling)).await?;
            wait_on_nodes(&ctx, "logs", &[&n[0], &n[1], &n[2]]).await?;
            poll_until("all ready", WAIT, || async {
                let by_node = pods_by_node(&ctx, "logs").await?;
                Ok((by_node.values().flatten().filter(|p| ready(p)).count() == 3).then_some(()))
            })
            .await?;
            let v2 = ctx.cluster.image("web:v2");
            let on_v2 = |by_node: &BTreeMap<String, Vec<Pod>>| {
                by_node
                    .values()
                    .flatten()
                    .filter(|p| image_of(p) == v2)
                    .count()
            };

            // partition 1: two nodes move, one stays, never two down at once.
            let template = json!({ "spec": { "containers": [{ "name": "main", "image": v2 }] } });
            patch_spec(
                &ctx,
                "logs",
                json!({
                    "template": template,
                    "updateStrategy": { "rollingUpdate": { "partition": 1 } },
                }),
            )
            .await?;
            poll_until(
                "two nodes updated, one held by the partition",
                WAIT,
                || async {
                    let by_node = within_unavailable(&ctx, "logs", &n, 1).await?;
                    let settled = on_v2(&by_node) == 2 && by_node.values().flatten().all(ready);
                    Ok((settled && by_node.len() == 3).then_some(()))
                },
            )
            .await?;
            tokio::time::sleep(Duration::from_secs(3)).await;
            ensure!(
                on_v2(&pods_by_node(&ctx, "logs").await?) == 2,
                "the partition holds"
            );

            // paused: lowering the partition moves nothing until it is unpaused.
            patch_spec(
                &ctx,
                "logs",
                json!({
                    "updateStrategy": { "rollingUpdate": { "partition": 0, "paused": true } },
                }),
            )
            .await?;
            tokio::time::sleep(Duration::from_secs(4)).await;
            ensure!(
                on_v2(&pods_by_node(&ctx, "logs").await?) == 2,
                "paused holds the update"
            );
            patch_spec(
                &ctx,
                "logs",
                json!({
                    "updateStrategy": { "rollingUpdate": { "paused": false } },
                }),
            )
            .await?;
            poll_until("every node updated", WAIT, || async {
                let by_node = within_unavailable(&ctx, "logs", &n, 1).await?;
                Ok((on_v2(&by_node) == 3 && by_node.len() == 3).then_some(()))
            })
            .await?;
            poll_until("status counts the rollout", WAIT, || async {
                let ds = ctx.api::<DaemonSet>().get("logs").await?;
                let s = ds.status.unwrap_or_default();
                Ok((s.updated_number_scheduled == 3 && s.number_available == 3).then_some(()))
            })
            .await?;
            Ok(())
        })
        .await
    })
    .await
}

#[tokio::test]
async fn surging_starts_the_new_pod_beside_the_old_within_max_surge() -> Result<()> {
    run_in_namespace("ds-surge", |ctx| async move {
        with_nodes(ctx, 3, |ctx, n| async move {
            let rolling =
                json!({ "rollingUpdateType": "Surging", "maxSurge": 1, "maxUnavailable": 0 });
            create(&ctx, manifest(&ctx, "proxy", "web:v1", rolling)).await?;
            poll_until("all ready", WAIT, || async {
                let by_node = pods_by_node(&ctx, "proxy").await?;
                let ready = by_node.values().flatten().filter(|p| ready(p)).count();
                Ok((ready == 3 && by_node.len() == 3).then_some(()))
            })
            .await?;
            let v2 = ctx.cluster.image("web:v2");
            let template = json!({ "spec": { "containers": [{ "name": "main", "image": v2 }] } });
            patch_spec(&ctx, "proxy", json!({ "template": template })).await?;
            let saw_surge = std::cell::Cell::new(false);
            poll_until("every node on the new pod alone", WAIT, || {
                let (ctx, n, v2, saw_surge) = (&ctx, &n, &v2, &saw_surge);
                async move {
                    // maxUnavailable 0: every node keeps a ready pod throughout.
                    let by_node = within_unavailable(ctx, "proxy", n, 0).await?;
                    let doubled = by_node.values().filter(|pods| pods.len() > 1).count();
                    ensure!(doubled <= 1, "{doubled} nodes run two pods (maxSurge 1)");
                    ensure!(
                        by_node.values().all(|pods| pods.len() <= 2),
                        "a node runs more than two pods"
                    );
                    saw_surge.set(saw_surge.get() || doubled == 1);
                    let done = by_node.len() == 3
                        && by_node
                            .values()
                            .all(|pods| pods.len() == 1 && image_of(&pods[0]) == *v2);
                    Ok(done.then_some(()))
                }
            })
            .await?;
            ensure!(
                saw_surge.get(),
                "no node was seen running the new pod beside the old"
            );
            Ok(())
        })
        .await
    })
    .await
}

//! Advanced StatefulSet `volumeClaimUpdateStrategy` (OpenKruise 1.9) on the kubelet node
//! `stevedore-node`, whose claims bind through the local CSI driver: under
//! `OnPodRollingUpdate` a larger storage request in the claim template, together with an
//! image change, grows both pods' claims (spec request, then status capacity) before their
//! pods are replaced, and `status.volumeClaims` counts them; on the class
//! `stevedore-fixed`, which does not allow expansion, the apiserver's refusal is a
//! `FailedResize` Warning and the FailedUpdatePod condition naming the claim and the
//! class, and no pod is lost or replaced; under `OnDelete` (the default, read back as
//! such) the pods roll and the claims stay as they were.

use crate::cloneset_support;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use kube::ResourceExt as _;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use stevedore_api::StatefulSet;
use stevedore_api::statefulset::VolumeClaimUpdateStrategyType;
use stevedore_tests::events::warning;
use stevedore_tests::manifests::apply;
use stevedore_tests::pods::is_running_and_ready;
use stevedore_tests::{TestContext, invariant, poll_until, run_in_namespace};

use cloneset_support::{ROLLOUT, is_bound, pods_of, pvcs, uid};

const REPLICAS: usize = 2;
const NODE: &str = "stevedore-node";
const EXPANDABLE: &str = "stevedore-expandable";
const FIXED: &str = "stevedore-fixed";
const SMALL: &str = "16Mi";
const LARGE: &str = "32Mi";

/// A StatefulSet `name` of 2 `web:v1` pods on the kubelet node, each with a `data` claim
/// of `class` asking for [`SMALL`], under `strategy` (`None`: the field left out).
fn statefulset(ctx: &TestContext, name: &str, class: &str, strategy: Option<&str>) -> Value {
    let mut set = json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "StatefulSet",
        "metadata": { "name": name },
        "spec": {
            "replicas": REPLICAS,
            "serviceName": name,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "nodeSelector": { "kubernetes.io/hostname": NODE },
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{
                        "name": "web",
                        "image": ctx.cluster.image("web:v1"),
                        "volumeMounts": [{ "name": "data", "mountPath": "/data" }]
                    }]
                }
            },
            "volumeClaimTemplates": [{
                "metadata": { "name": "data" },
                "spec": {
                    "storageClassName": class,
                    "accessModes": ["ReadWriteOnce"],
                    "resources": { "requests": { "storage": SMALL } }
                }
            }]
        }
    });
    if let Some(strategy) = strategy {
        set["spec"]["volumeClaimUpdateStrategy"] = json!({ "type": strategy });
    }
    set
}

/// The image of the set's template to `web:v2` and its claim template's request to
/// [`LARGE`], in one write.
async fn grow_and_change_image(ctx: &TestContext, name: &str) -> Result<()> {
    let patch = json!([
        { "op": "replace", "path": "/spec/template/spec/containers/0/image",
          "value": ctx.cluster.image("web:v2") },
        { "op": "replace", "path": "/spec/volumeClaimTemplates/0/spec/resources/requests/storage",
          "value": LARGE }
    ]);
    ctx.api::<StatefulSet>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::<()>::Json(serde_json::from_value(patch)?),
        )
        .await?;
    Ok(())
}

/// A quantity in bytes (`16Mi`, `1Gi`, `33554432`, `20M`); `None` when malformed.
fn bytes(quantity: &str) -> Option<f64> {
    let split = quantity
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(quantity.len());
    let (number, suffix) = quantity.split_at(split);
    let scale = match suffix {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    number.parse::<f64>().ok().map(|n| n * scale)
}

/// The claim's storage request and capacity in bytes.
fn sizes(claim: &PersistentVolumeClaim) -> (Option<f64>, Option<f64>) {
    let request = (claim.spec.as_ref())
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| bytes(&q.0));
    let capacity = (claim.status.as_ref())
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .and_then(|q| bytes(&q.0));
    (request, capacity)
}

/// The `data` claims of the set's pods, by name; an error until both exist.
async fn set_claims(
    ctx: &TestContext,
    name: &str,
) -> Result<BTreeMap<String, PersistentVolumeClaim>> {
    let all = pvcs(ctx).await?;
    let mut claims = BTreeMap::new();
    for ordinal in 0..REPLICAS {
        let claim = format!("data-{name}-{ordinal}");
        let found = all.get(&claim).with_context(|| format!("claim {claim}"))?;
        claims.insert(claim, found.clone());
    }
    Ok(claims)
}

/// Waits until both pods run `tag`, ready, with their claims bound; returns pod → UID.
async fn wait_pods(ctx: &TestContext, name: &str, tag: &str) -> Result<BTreeMap<String, String>> {
    let image = ctx.cluster.image(tag);
    poll_until(&format!("{name} running {tag}"), ROLLOUT, || async {
        let pods: Vec<Pod> = (pods_of(ctx, name).await?.into_iter())
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let on_image = |p: &Pod| {
            let spec = p.spec.as_ref();
            spec.and_then(|s| s.containers.first())
                .and_then(|c| c.image.as_deref())
                == Some(image.as_str())
        };
        let claims = set_claims(ctx, name).await.unwrap_or_default();
        let done = pods.len() == REPLICAS
            && pods.iter().all(|p| on_image(p) && is_running_and_ready(p))
            && claims.len() == REPLICAS
            && claims.values().all(is_bound);
        Ok(done.then(|| pods.iter().map(|p| (p.name_any(), uid(p))).collect()))
    })
    .await
}

/// The set's `status.volumeClaims` as (name, compatible, compatible and ready).
async fn volume_claims_status(ctx: &TestContext, name: &str) -> Result<Vec<(String, i32, i32)>> {
    let set = ctx.api::<StatefulSet>().get(name).await?;
    let status = set.status.unwrap_or_default();
    Ok((status.volume_claims.into_iter())
        .map(|v| {
            (
                v.volume_claim_name,
                v.compatible_replicas,
                v.compatible_ready_replicas,
            )
        })
        .collect())
}

/// The messages of the Normal events with `reason` on the StatefulSet `name`.
async fn normal_events(ctx: &TestContext, name: &str, reason: &str) -> Result<Vec<String>> {
    let lp = ListParams::default().fields(&format!(
        "involvedObject.kind=StatefulSet,involvedObject.name={name}"
    ));
    let events = ctx.api::<Event>().list(&lp).await?.items;
    Ok((events.into_iter())
        .filter(|e| e.type_.as_deref() == Some("Normal") && e.reason.as_deref() == Some(reason))
        .map(|e| e.message.unwrap_or_default())
        .collect())
}

#[tokio::test]
async fn on_pod_rolling_update_grows_both_claims_and_rolls_the_pods() -> Result<()> {
    run_in_namespace("asts-claim-grow", |ctx| async move {
        let name = "grow";
        let manifest = statefulset(&ctx, name, EXPANDABLE, Some("OnPodRollingUpdate"));
        let set: StatefulSet = apply(&ctx, &manifest).await?;
        let strategy = set.spec.volume_claim_update_strategy.and_then(|s| s.type_);
        ensure!(
            strategy == Some(VolumeClaimUpdateStrategyType::OnPodRollingUpdate),
            "the strategy is stored, not pruned: {strategy:?}"
        );
        let before = wait_pods(&ctx, name, "web:v1").await?;
        grow_and_change_image(&ctx, name).await?;
        let large = bytes(LARGE).context("a quantity")?;
        poll_until("both claims grown, requested and held", ROLLOUT, || async {
            let claims = set_claims(&ctx, name).await?;
            let grown = claims.values().all(|c| {
                let (request, capacity) = sizes(c);
                request >= Some(large) && capacity >= Some(large)
            });
            Ok(grown.then_some(()))
        })
        .await?;
        let after = wait_pods(&ctx, name, "web:v2").await?;
        for (pod, old_uid) in &before {
            let replaced = after.get(pod).is_some_and(|u| u != old_uid);
            ensure!(replaced, "{pod} was not rolled: {before:?} then {after:?}");
        }
        poll_until(
            "status.volumeClaims counting both pods",
            ROLLOUT,
            || async {
                let status = volume_claims_status(&ctx, name).await?;
                Ok((status == [("data".to_owned(), 2, 2)]).then_some(()))
            },
        )
        .await?;
        let resized = normal_events(&ctx, name, "SuccessfulResize").await?;
        for claim in [format!("data-{name}-0"), format!("data-{name}-1")] {
            let named = resized.iter().any(|m| m.contains(&claim));
            ensure!(
                named,
                "no SuccessfulResize event names {claim}: {resized:?}"
            );
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_class_without_expansion_is_reported_and_no_pod_is_lost() -> Result<()> {
    run_in_namespace("asts-claim-fixed", |ctx| async move {
        let name = "fixed";
        let manifest = statefulset(&ctx, name, FIXED, Some("OnPodRollingUpdate"));
        apply::<StatefulSet>(&ctx, &manifest).await?;
        let before = wait_pods(&ctx, name, "web:v1").await?;
        grow_and_change_image(&ctx, name).await?;
        let message = poll_until(
            "a FailedResize warning",
            Duration::from_secs(90),
            || async { warning(&ctx, name, "FailedResize").await },
        )
        .await?;
        // The highest ordinal goes first; its claim is the one refused.
        let claim = format!("data-{name}-1");
        for words in [claim.as_str(), FIXED] {
            ensure!(
                message.contains(words),
                "the warning names {words}: {message}"
            );
        }
        let set = ctx.api::<StatefulSet>().get(name).await?;
        let conditions = set.status.unwrap_or_default().conditions;
        let failed = conditions.iter().find(|c| c.type_ == "FailedUpdatePod");
        let says = failed.is_some_and(|c| {
            c.status == "True" && c.message.contains(&claim) && c.message.contains(FIXED)
        });
        ensure!(
            says,
            "the FailedUpdatePod condition names the claim and class: {conditions:?}"
        );
        // Held long enough for a rollout to have replaced a pod, had it gone on.
        tokio::time::sleep(Duration::from_secs(20)).await;
        let now = wait_pods(&ctx, name, "web:v1").await?;
        invariant(now == before, || {
            format!("pods changed: {before:?} then {now:?}")
        })?;
        let small = bytes(SMALL).context("a quantity")?;
        for (claim, c) in set_claims(&ctx, name).await? {
            let (request, _) = sizes(&c);
            ensure!(request == Some(small), "{claim} asks for {request:?}");
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn on_delete_is_the_default_and_leaves_the_claims_as_they_are() -> Result<()> {
    run_in_namespace("asts-claim-ondelete", |ctx| async move {
        let name = "keep";
        let set: StatefulSet = apply(&ctx, &statefulset(&ctx, name, EXPANDABLE, None)).await?;
        let strategy = set.spec.volume_claim_update_strategy.and_then(|s| s.type_);
        ensure!(
            strategy == Some(VolumeClaimUpdateStrategyType::OnDelete),
            "the default reads back: {strategy:?}"
        );
        let before = wait_pods(&ctx, name, "web:v1").await?;
        grow_and_change_image(&ctx, name).await?;
        let after = wait_pods(&ctx, name, "web:v2").await?;
        ensure!(
            after.values().all(|u| !before.values().any(|b| b == u)),
            "pods rolled"
        );
        let small = bytes(SMALL).context("a quantity")?;
        for (claim, c) in set_claims(&ctx, name).await? {
            let (request, _) = sizes(&c);
            ensure!(
                request == Some(small),
                "{claim} asks for {request:?} under OnDelete"
            );
        }
        let status = volume_claims_status(&ctx, name).await?;
        ensure!(
            status == [("data".to_owned(), 0, 0)],
            "no claim holds the template's larger request: {status:?}"
        );
        Ok(())
    })
    .await
}

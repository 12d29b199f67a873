//! The Advanced StatefulSet end to end: the Kubernetes documentation's `web` StatefulSet
//! and headless Service with only the apiVersion changed (and the image taken from the
//! test registry) run on the kubelet node; an image change under InPlaceIfPossible
//! restarts containers in place, highest ordinal first (same pod, IP and claim, one more
//! restart); an env change under the same policy recreates the pod under its name with its
//! claim, whose data the new container reads; an OrderedReady rollout halts at a pod that
//! never becomes ready, leaving the lower ordinals alone, until the template is fixed and
//! the stuck pod deleted; seed 002's `ordinals.start` and `persistentVolumeClaimRetentionPolicy`
//! (Delete/Delete) hand a scaled-away pod's claim, then the set's, to the garbage
//! collector.

use crate::cloneset_support;

use std::collections::BTreeMap;
use std::sync::Mutex;

use anyhow::{Context as _, Result, anyhow, ensure};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt as _;
use kube::api::{DeleteParams, LogParams};
use serde_json::{Value, json};
use stevedore_api::StatefulSet;
use stevedore_tests::manifests::apply;
use stevedore_tests::pods::{condition, is_running_and_ready};
use stevedore_tests::{TestContext, invariant, poll_until, run_in_namespace};

use cloneset_support::{INPLACE_UPDATE_READY, ROLLOUT, is_bound, pods_of, pvcs, uid};

const WEB: &str = include_str!("../../fixtures/kubernetes/web-statefulset.yaml");

/// The documentation's headless Service and `web` StatefulSet (kubernetes.io, "StatefulSets";
/// the fixture has only its apiVersion changed), with the test registry's image for
/// nginx-slim and the cluster's default storage class for "my-storage-class", which no
/// cluster here has.
fn docs_web(ctx: &TestContext) -> Result<(Value, Value)> {
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": "nginx", "labels": { "app": "nginx" } },
        "spec": {
            "ports": [{ "port": 80, "name": "web" }],
            "clusterIP": "None",
            "selector": { "app": "nginx" }
        }
    });
    let mut set: Value = serde_saphyr::from_str(WEB)?;
    set["spec"]["template"]["spec"]["containers"][0]["image"] = json!(ctx.cluster.image("web:v1"));
    let claim = set["spec"]["volumeClaimTemplates"][0]["spec"]
        .as_object_mut()
        .context("a claim template")?;
    claim.remove("storageClassName");
    Ok((service, set))
}

/// Waits until the set's status counts `replicas` ready, available and updated pods.
async fn wait_ready(ctx: &TestContext, name: &str, replicas: i32) -> Result<StatefulSet> {
    poll_until(&format!("{name} ready"), ROLLOUT, || async {
        let set = ctx.api::<StatefulSet>().get(name).await?;
        let generation = set.metadata.generation.unwrap_or(0);
        let done = set.status.as_ref().is_some_and(|s| {
            s.observed_generation == generation
                && s.ready_replicas == replicas
                && s.available_replicas == replicas
                && s.updated_replicas == replicas
                && s.current_revision == s.update_revision
        });
        Ok(done.then_some(set))
    })
    .await
}

#[tokio::test]
async fn the_docs_web_statefulset_runs_with_only_its_api_version_changed() -> Result<()> {
    run_in_namespace("sts-e2e-docs", |ctx| async move {
        let (service, set) = docs_web(&ctx)?;
        apply::<Service>(&ctx, &service).await?;
        apply::<StatefulSet>(&ctx, &set).await?;
        wait_ready(&ctx, "web", 3).await?;
        let pods = pods_of(&ctx, "nginx").await?;
        let names: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
        ensure!(names == ["web-0", "web-1", "web-2"], "pods {names:?}");
        let claims = pvcs(&ctx).await?;
        for pod in &pods {
            ensure!(is_running_and_ready(pod), "{} not ready", pod.name_any());
            let claim = format!("www-{}", pod.name_any());
            let bound = claims.get(&claim).is_some_and(is_bound);
            ensure!(bound, "{claim} is not bound: {:?}", claims.keys());
            let spec = pod.spec.as_ref().context("a pod spec")?;
            ensure!(spec.subdomain.as_deref() == Some("nginx"), "subdomain");
        }
        Ok(())
    })
    .await
}

/// Pod name → (UID, restarts of its container, image in its spec, pod IP).
fn pod_states(pods: &[Pod]) -> BTreeMap<String, (String, i32, String, String)> {
    (pods.iter())
        .map(|p| {
            let restarts = (p.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .map_or(0, |c| c.restart_count);
            let image = (p.spec.as_ref())
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            let ip = (p.status.as_ref())
                .and_then(|s| s.pod_ip.clone())
                .unwrap_or_default();
            (p.name_any(), (uid(p), restarts, image, ip))
        })
        .collect()
}

/// The image the pod's first container runs, as kubelet reports it.
fn running_image(pod: &Pod) -> Option<&str> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let first = statuses.first()?;
    first.state.as_ref()?.running.as_ref()?;
    Some(first.image.as_str())
}

#[tokio::test]
async fn an_image_change_restarts_containers_in_place_highest_ordinal_first() -> Result<()> {
    run_in_namespace("sts-e2e-inplace", |ctx| async move {
        let (_, mut set) = docs_web(&ctx)?;
        set["metadata"]["name"] = json!("ip");
        set["spec"]["replicas"] = json!(2);
        set["spec"]["minReadySeconds"] = json!(0);
        set["spec"]["updateStrategy"] = json!({
            "type": "RollingUpdate",
            "rollingUpdate": { "podUpdatePolicy": "InPlaceIfPossible" }
        });
        apply::<StatefulSet>(&ctx, &set).await?;
        wait_ready(&ctx, "ip", 2).await?;
        let before = pod_states(&pods_of(&ctx, "nginx").await?);
        let claims_before: BTreeMap<String, String> = (pvcs(&ctx).await?.iter())
            .map(|(name, claim)| (name.clone(), uid(claim)))
            .collect();

        let v2 = ctx.cluster.image("web:v2");
        set["spec"]["template"]["spec"]["containers"][0]["image"] = json!(v2);
        let changed = apply::<StatefulSet>(&ctx, &set).await?;
        let generation = changed.metadata.generation.unwrap_or(0);
        // The order in which pods first carry the new image.
        let order = Mutex::new(Vec::<String>::new());
        poll_until("ip updated in place", ROLLOUT, || async {
            let pods = pods_of(&ctx, "nginx").await?;
            {
                let mut seen = order.lock().map_err(|_| anyhow!("poisoned"))?;
                for (name, (_, _, image, _)) in pod_states(&pods) {
                    if image == v2 && !seen.contains(&name) {
                        seen.push(name);
                    }
                }
            }
            // Done once the status speaks of the new template and every pod's container
            // runs it. The status alone is not enough: as in OpenKruise, it counts a pod
            // Ready from its Ready condition, which stays True for a moment after the
            // update has begun (until kubelet sees InPlaceUpdateReady turn False).
            let set = ctx.api::<StatefulSet>().get("ip").await?;
            let done = set.status.as_ref().is_some_and(|s| {
                s.observed_generation >= generation
                    && s.updated_ready_replicas == 2
                    && s.current_revision == s.update_revision
            });
            let settled = pods.iter().all(|pod| {
                running_image(pod) == Some(v2.as_str())
                    && condition(pod, INPLACE_UPDATE_READY).as_deref() == Some("True")
                    && is_running_and_ready(pod)
            });
            Ok((done && pods.len() == 2 && settled).then_some(()))
        })
        .await?;
        let order = order.into_inner().map_err(|_| anyhow!("poisoned"))?;
        ensure!(order == ["ip-1", "ip-0"], "update order {order:?}");
        let after = pod_states(&pods_of(&ctx, "nginx").await?);
        for (name, (uid_before, restarts_before, _, ip_before)) in &before {
            let (uid_after, restarts_after, _, ip_after) = after.get(name).context("pod gone")?;
            ensure!(uid_after == uid_before, "{name} was recreated");
            ensure!(
                !ip_before.is_empty() && ip_after == ip_before,
                "{name}: pod IP {ip_before} → {ip_after}"
            );
            ensure!(
                *restarts_after == restarts_before + 1,
                "{name}: restarts {restarts_before} → {restarts_after}"
            );
        }
        let claims_after: BTreeMap<String, String> = (pvcs(&ctx).await?.iter())
            .map(|(name, claim)| (name.clone(), uid(claim)))
            .collect();
        ensure!(
            claims_after == claims_before,
            "claims changed: {claims_after:?}"
        );
        Ok(())
    })
    .await
}

/// The recreate test's container: its first start writes the pod's UID to the claim, and
/// every start prints what the claim holds and GREETING before serving.
const REMEMBER_FIRST_POD: &str = "f=/usr/share/nginx/html/origin; [ -f $f ] || echo $POD_UID >$f; \
     echo origin=$(cat $f) greeting=$GREETING; exec /bin/httpd -f -p 80 -h /www";

/// Waits until the log of the pod now named `pod` contains `words`; returns the log.
async fn wait_log(ctx: &TestContext, pod: &str, words: &str) -> Result<String> {
    poll_until(&format!("{pod}'s log to say {words}"), ROLLOUT, || async {
        let log = ctx.api::<Pod>().logs(pod, &LogParams::default()).await?;
        ensure!(log.contains(words), "log: {log}");
        Ok(Some(log))
    })
    .await
}

#[tokio::test]
async fn a_non_image_change_recreates_the_pod_with_its_name_and_claim_and_the_data_survives()
-> Result<()> {
    run_in_namespace("sts-e2e-recreate", |ctx| async move {
        let (_, mut set) = docs_web(&ctx)?;
        set["metadata"]["name"] = json!("re");
        set["spec"]["replicas"] = json!(1);
        set["spec"]["minReadySeconds"] = json!(0);
        set["spec"]["updateStrategy"] = json!({
            "type": "RollingUpdate",
            "rollingUpdate": { "podUpdatePolicy": "InPlaceIfPossible" }
        });
        let pod_spec = &mut set["spec"]["template"]["spec"];
        pod_spec["terminationGracePeriodSeconds"] = json!(1);
        pod_spec["containers"][0]["command"] = json!(["/bin/sh", "-c", REMEMBER_FIRST_POD]);
        pod_spec["containers"][0]["env"] = json!([
            { "name": "POD_UID", "valueFrom": { "fieldRef": { "fieldPath": "metadata.uid" } } },
            { "name": "GREETING", "value": "hello" }
        ]);
        apply::<StatefulSet>(&ctx, &set).await?;
        wait_ready(&ctx, "re", 1).await?;
        let old_uid = uid(&ctx.api::<Pod>().get("re-0").await?);
        wait_log(&ctx, "re-0", &format!("origin={old_uid} greeting=hello")).await?;
        let claim = ctx.api::<PersistentVolumeClaim>().get("www-re-0").await?;
        ensure!(is_bound(&claim), "www-re-0 is not bound");
        let claim_uid = uid(&claim);
        let volume = claim.spec.and_then(|s| s.volume_name);
        ensure!(volume.is_some(), "www-re-0 names no volume");

        // An env change cannot be made in place: the pod is recreated.
        set["spec"]["template"]["spec"]["containers"][0]["env"][1]["value"] = json!("again");
        let changed = apply::<StatefulSet>(&ctx, &set).await?;
        let generation = changed.metadata.generation.unwrap_or(0);
        let pod = poll_until("re-0 recreated on the new revision", ROLLOUT, || async {
            let claims = pvcs(&ctx).await?;
            let now = claims.get("www-re-0").map(uid);
            invariant(now.as_deref() == Some(claim_uid.as_str()), || {
                format!("claim www-re-0 is {now:?}, was {claim_uid}")
            })?;
            let pods = pods_of(&ctx, "nginx").await?;
            let names: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
            invariant(names.iter().all(|n| n == "re-0"), || {
                format!("pods {names:?}")
            })?;
            let set = ctx.api::<StatefulSet>().get("re").await?;
            let done = set.status.as_ref().is_some_and(|s| {
                s.observed_generation >= generation
                    && s.updated_ready_replicas == 1
                    && s.current_revision == s.update_revision
            });
            let new = (pods.into_iter()).find(|p| uid(p) != old_uid && is_running_and_ready(p));
            Ok(new.filter(|_| done))
        })
        .await?;
        ensure!(pod.name_any() == "re-0", "new pod {}", pod.name_any());
        let restarts = (pod.status.as_ref())
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .map(|c| c.restart_count);
        ensure!(restarts == Some(0), "new pod restarts {restarts:?}");
        let claims: Vec<String> = (pod.spec.as_ref().and_then(|s| s.volumes.as_ref()))
            .into_iter()
            .flatten()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .map(|c| c.claim_name.clone())
            .collect();
        ensure!(claims == ["www-re-0"], "new pod mounts {claims:?}");
        let claim = ctx.api::<PersistentVolumeClaim>().get("www-re-0").await?;
        ensure!(
            uid(&claim) == claim_uid && is_bound(&claim),
            "www-re-0 replaced or unbound"
        );
        let volume_after = claim.spec.and_then(|s| s.volume_name);
        ensure!(
            volume_after == volume,
            "volume {volume:?} → {volume_after:?}"
        );
        // The new container reads what the first pod wrote, and runs the new env.
        wait_log(&ctx, "re-0", &format!("origin={old_uid} greeting=again")).await?;
        Ok(())
    })
    .await
}

/// How long the pod on the broken revision must have failed its readiness probe (every
/// second) before the halt counts as held.
const HALT_HELD: SignedDuration = SignedDuration::from_secs(10);

/// How long the pod's first container has been running (zero unless it runs).
fn running_for(pod: &Pod) -> SignedDuration {
    (pod.status.as_ref())
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref()?.running.as_ref()?.started_at.as_ref())
        .map_or(SignedDuration::ZERO, |t| {
            Timestamp::now().duration_since(t.0)
        })
}

#[tokio::test]
async fn an_ordered_ready_rollout_halts_at_a_pod_that_never_becomes_ready_and_leaves_lower_ordinals_alone()
-> Result<()> {
    run_in_namespace("sts-e2e-halt", |ctx| async move {
        let (_, mut set) = docs_web(&ctx)?;
        set["metadata"]["name"] = json!("halt");
        set["spec"]["minReadySeconds"] = json!(0);
        set["spec"]["podManagementPolicy"] = json!("OrderedReady");
        let pod_spec = &mut set["spec"]["template"]["spec"];
        pod_spec["terminationGracePeriodSeconds"] = json!(1);
        let probe = |command: &str| json!({ "exec": { "command": [command] }, "periodSeconds": 1 });
        pod_spec["containers"][0]["readinessProbe"] = probe("true");
        apply::<StatefulSet>(&ctx, &set).await?;
        wait_ready(&ctx, "halt", 3).await?;
        let before = pod_states(&pods_of(&ctx, "nginx").await?);
        let v1 = ctx.cluster.image("web:v1");
        let v2 = ctx.cluster.image("web:v2");

        // A revision whose pods never become ready.
        let container = &mut set["spec"]["template"]["spec"]["containers"][0];
        container["image"] = json!(v2);
        container["readinessProbe"] = probe("false");
        let changed = apply::<StatefulSet>(&ctx, &set).await?;
        let generation = changed.metadata.generation.unwrap_or(0);
        let halted = poll_until("the rollout halted at halt-2", ROLLOUT, || async {
            let pods = pods_of(&ctx, "nginx").await?;
            for name in ["halt-0", "halt-1"] {
                let pod = pods.iter().find(|p| p.name_any() == name);
                let kept = pod.is_some_and(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && uid(p) == before[name].0
                        && pod_states(std::slice::from_ref(p))[name].2 == v1
                });
                invariant(kept, || format!("{name} was touched: {pod:?}"))?;
            }
            let top =
                (pods.iter()).find(|p| p.name_any() == "halt-2" && uid(*p) != before["halt-2"].0);
            let Some(top) = top else { return Ok(None) };
            invariant(!is_running_and_ready(top), || {
                "halt-2 became ready on the broken revision".to_owned()
            })?;
            let set = ctx.api::<StatefulSet>().get("halt").await?;
            let status = set.status.clone().unwrap_or_default();
            let waiting = status.conditions.iter().any(|c| {
                c.type_ == "WaitingForPod" && c.status == "True" && c.message.contains("halt-2")
            });
            let held = running_for(top) >= HALT_HELD && status.observed_generation >= generation;
            Ok((waiting && held).then_some(status))
        })
        .await?;
        ensure!(
            halted.updated_replicas == 1 && halted.current_revision != halted.update_revision,
            "status {halted:?}"
        );
        let after = pod_states(&pods_of(&ctx, "nginx").await?);
        for name in ["halt-0", "halt-1"] {
            let pod = ctx.api::<Pod>().get(name).await?;
            ensure!(is_running_and_ready(&pod), "{name} is not ready");
            ensure!(after[name].1 == before[name].1, "{name} restarted");
        }

        // The native way on (Kubernetes docs, forced rollback): a template that works,
        // then the pod stuck on the broken revision deleted; the rollout then finishes.
        set["spec"]["template"]["spec"]["containers"][0]["readinessProbe"] = probe("true");
        let fixed = apply::<StatefulSet>(&ctx, &set).await?;
        let generation = fixed.metadata.generation.unwrap_or(0);
        poll_until("the fixed template observed", ROLLOUT, || async {
            let set = ctx.api::<StatefulSet>().get("halt").await?;
            let observed = set.status.map_or(0, |s| s.observed_generation);
            Ok((observed >= generation).then_some(()))
        })
        .await?;
        ctx.api::<Pod>()
            .delete("halt-2", &DeleteParams::default())
            .await?;
        wait_ready(&ctx, "halt", 3).await?;
        let done = pod_states(&pods_of(&ctx, "nginx").await?);
        for (name, (pod_uid, _, image, _)) in &done {
            ensure!(*image == v2, "{name} runs {image}");
            ensure!(*pod_uid != before[name].0, "{name} was not recreated");
        }
        Ok(())
    })
    .await
}

async fn claim_names(ctx: &TestContext) -> Result<Vec<String>> {
    let list = ctx
        .api::<PersistentVolumeClaim>()
        .list(&Default::default())
        .await?;
    let mut names: Vec<String> = (list.items.iter())
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| c.name_any())
        .collect();
    names.sort();
    Ok(names)
}

#[tokio::test]
async fn seed_002_retention_hands_claims_to_the_garbage_collector() -> Result<()> {
    run_in_namespace("sts-e2e-retention", |ctx| async move {
        // Seed 002: ordinals.start, PVC retention Delete/Delete, streaming scale-up
        // (scaleStrategy.maxUnavailable, Parallel only), on the simulated nodes.
        let (_, mut set) = docs_web(&ctx)?;
        set["metadata"]["name"] = json!("sample");
        set["spec"]["minReadySeconds"] = json!(0);
        set["spec"]["podManagementPolicy"] = json!("Parallel");
        set["spec"]["ordinals"] = json!({ "start": 3 });
        set["spec"]["scaleStrategy"] = json!({ "maxUnavailable": "10%" });
        set["spec"]["persistentVolumeClaimRetentionPolicy"] =
            json!({ "whenDeleted": "Delete", "whenScaled": "Delete" });
        set["spec"]["template"]["spec"]["nodeSelector"] = json!({ "type": "kwok" });
        set["spec"]["template"]["spec"]["tolerations"] = json!([{
            "key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"
        }]);
        apply::<StatefulSet>(&ctx, &set).await?;
        wait_ready(&ctx, "sample", 3).await?;
        let names = claim_names(&ctx).await?;
        ensure!(
            names == ["www-sample-3", "www-sample-4", "www-sample-5"],
            "claims {names:?}"
        );

        set["spec"]["replicas"] = json!(2);
        apply::<StatefulSet>(&ctx, &set).await?;
        poll_until("the scaled-away claim deleted", ROLLOUT, || async {
            let names = claim_names(&ctx).await?;
            Ok((names == ["www-sample-3", "www-sample-4"]).then_some(()))
        })
        .await?;
        let set_uid = uid(&ctx.api::<StatefulSet>().get("sample").await?);
        // The live claims; the scaled-away one may still be listed while it terminates
        // (owned by its pod, as whenScaled Delete makes it, until the collector is done).
        let claims = ctx
            .api::<PersistentVolumeClaim>()
            .list(&Default::default())
            .await?;
        for claim in (claims.into_iter()).filter(|c| c.metadata.deletion_timestamp.is_none()) {
            let owners: Vec<String> = (claim.owner_references().iter())
                .map(|r| r.uid.clone())
                .collect();
            ensure!(
                owners == [set_uid.clone()],
                "{}: owners {owners:?}",
                claim.name_any()
            );
        }

        let background = DeleteParams::background();
        ctx.api::<StatefulSet>()
            .delete("sample", &background)
            .await?;
        poll_until("the set's claims deleted with it", ROLLOUT, || async {
            Ok(claim_names(&ctx).await?.is_empty().then_some(()))
        })
        .await?;
        Ok(())
    })
    .await
}

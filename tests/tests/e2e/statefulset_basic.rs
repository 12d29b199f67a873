//! The Advanced StatefulSet controller (running in the cluster) scaling pods on the
//! simulated (kwok) nodes: stable names and identity labels, OrderedReady creating each
//! pod only after the one before is Ready and scaling down from the highest ordinal,
//! Parallel creating all at once, reserveOrdinals / ordinals.start as seed 002
//! describes them, and a rolling update's partition holding the first pods (counted from
//! `ordinals.start`) on the old revision until it is lowered, and a Pending pod's deleted
//! claim made again. kwok marks pods Running and Ready without running containers.

use crate::cloneset_component;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::ResourceExt as _;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::StatefulSet;
use stevedore_tests::pods::is_running_and_ready;
use stevedore_tests::{TestContext, invariant, poll_until, run_in_namespace};

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

const REVISION_LABEL: &str = "controller-revision-hash";

/// How long a partitioned rollout must stay settled: a controller that ignored the
/// partition would replace the next pod down within it (kwok readies pods at once).
const PARTITION_HOLDS: Duration = Duration::from_secs(5);

/// Waits until the ordinals `updated` of `name` run `image` on the update revision and the
/// status counts them, and they stay so for [`PARTITION_HOLDS`], while every ordinal in
/// `held` keeps the pod (UID) it had in `before`, on the current revision, at every
/// observation.
async fn wait_partitioned(
    ctx: &TestContext,
    name: &str,
    before: &BTreeMap<String, String>,
    held: &[i32],
    updated: &[i32],
    image: &str,
) -> Result<()> {
    let what = format!("{name} ordinals {updated:?} updated, {held:?} held");
    let settled_since = Mutex::new(None::<Instant>);
    poll_until(&what, CONVERGE, || async {
        let pods = live_pods(ctx, name).await?;
        let set = ctx.api::<StatefulSet>().get(name).await?;
        let status = set.status.clone().unwrap_or_default();
        let by_name = |o: &i32| pods.iter().find(|p| p.name_any() == format!("{name}-{o}"));
        for ordinal in held {
            let pod = by_name(ordinal);
            let kept = pod.is_some_and(|p| Some(&uid_of(p)) == before.get(&p.name_any()));
            invariant(kept, || {
                format!("{name}-{ordinal} below the partition was replaced")
            })?;
        }
        let generation = set.metadata.generation.unwrap_or(0);
        let settled = status.observed_generation == generation
            && status.updated_replicas == i32::try_from(updated.len())?
            && status.ready_replicas == i32::try_from(held.len() + updated.len())?;
        let on = |o: &i32, revision: &str| {
            by_name(o).is_some_and(|p| label(p, REVISION_LABEL) == Some(revision))
        };
        let done = settled
            && updated.iter().all(|o| {
                on(o, &status.update_revision)
                    && by_name(o).is_some_and(|p| is_running_and_ready(p) && image_of(p) == image)
            })
            && held.iter().all(|o| on(o, &status.current_revision))
            && (held.is_empty() == (status.current_revision == status.update_revision));
        let mut since = settled_since
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        if !done {
            // What the timeout reports: the last status and pods seen.
            *since = None;
            let seen: Vec<String> = (pods.iter())
                .map(|p| {
                    let revision = label(p, REVISION_LABEL).unwrap_or_default();
                    let ready = is_running_and_ready(p);
                    format!("{} {revision} {} ready={ready}", p.name_any(), image_of(p))
                })
                .collect();
            anyhow::bail!(
                "generation {generation}, observed {}, updated {}, ready {}, current {}, update {}; pods {seen:?}",
                status.observed_generation,
                status.updated_replicas,
                status.ready_replicas,
                status.current_revision,
                status.update_revision
            );
        }
        *since = Some(since.unwrap_or_else(Instant::now));
        Ok(since
            .filter(|at| at.elapsed() >= PARTITION_HOLDS)
            .map(|_| ()))
    })
    .await
}

fn uid_of(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

fn image_of(pod: &Pod) -> &str {
    (pod.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or_default()
}

async fn set_partition(ctx: &TestContext, name: &str, partition: i32) -> Result<()> {
    let patch =
        json!({ "spec": { "updateStrategy": { "rollingUpdate": { "partition": partition } } } });
    ctx.api::<StatefulSet>()
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_partition_keeps_lower_ordinals_on_the_old_revision_and_lowering_it_continues()
-> Result<()> {
    run_in_namespace("sts-partition", |ctx| async move {
        let overrides = json!({ "spec": { "updateStrategy": {
            "type": "RollingUpdate",
            "rollingUpdate": { "partition": 2 }
        }}});
        create(&ctx, statefulset(&ctx, "part", 4, overrides)).await?;
        let pods = wait_ordinals(&ctx, "part", &[0, 1, 2, 3]).await?;
        let before: BTreeMap<String, String> =
            pods.iter().map(|p| (p.name_any(), uid_of(p))).collect();
        let v2 = ctx.cluster.image("web:v2");
        let patch: json_patch::Patch = serde_json::from_value(json!([{
            "op": "replace", "path": "/spec/template/spec/containers/0/image", "value": v2
        }]))?;
        ctx.api::<StatefulSet>()
            .patch("part", &PatchParams::default(), &Patch::Json::<()>(patch))
            .await?;
        wait_partitioned(&ctx, "part", &before, &[0, 1], &[2, 3], &v2).await?;

        set_partition(&ctx, "part", 1).await?;
        wait_partitioned(&ctx, "part", &before, &[0], &[1, 2, 3], &v2).await?;
        set_partition(&ctx, "part", 0).await?;
        wait_partitioned(&ctx, "part", &before, &[], &[0, 1, 2, 3], &v2).await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_partition_counts_pods_from_the_start_ordinal() -> Result<()> {
    // ordinals.start 3, replicas 3 (ordinals 3, 4, 5), partition 1: only the pod at
    // index 0 (ordinal 3) stays; 4 and 5 are updated (OpenKruise `sortPodsToUpdate`).
    run_in_namespace("sts-partition-start", |ctx| async move {
        let overrides = json!({ "spec": {
            "ordinals": { "start": 3 },
            "podManagementPolicy": "Parallel",
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": { "partition": 1 }
            }
        }});
        create(&ctx, statefulset(&ctx, "start", 3, overrides)).await?;
        let pods = wait_ordinals(&ctx, "start", &[3, 4, 5]).await?;
        let before: BTreeMap<String, String> =
            pods.iter().map(|p| (p.name_any(), uid_of(p))).collect();
        let v2 = ctx.cluster.image("web:v2");
        let patch: json_patch::Patch = serde_json::from_value(json!([{
            "op": "replace", "path": "/spec/template/spec/containers/0/image", "value": v2
        }]))?;
        ctx.api::<StatefulSet>()
            .patch("start", &PatchParams::default(), &Patch::Json::<()>(patch))
            .await?;
        wait_partitioned(&ctx, "start", &before, &[3], &[4, 5], &v2).await?;
        Ok(())
    })
    .await
}

/// The set's UpdateHeld condition as (reason, message), once its status is current.
async fn update_held(ctx: &TestContext, name: &str) -> Result<Option<(String, String)>> {
    let set = ctx.api::<StatefulSet>().get(name).await?;
    let status = set.status.unwrap_or_default();
    ensure!(
        status.observed_generation == set.metadata.generation.unwrap_or(0),
        "status of generation {} not yet observed",
        set.metadata.generation.unwrap_or(0)
    );
    Ok((status.conditions.iter())
        .find(|c| c.type_ == "UpdateHeld" && c.status == "True")
        .map(|c| (c.reason.clone(), c.message.clone())))
}

/// Waits until UpdateHeld has `reason` and a message naming every pod in `pods`, and
/// `kubectl describe` shows the same.
async fn wait_held(ctx: &TestContext, name: &str, reason: &str, pods: &[&str]) -> Result<()> {
    let what = format!("{name} UpdateHeld {reason} naming {pods:?}");
    poll_until(&what, CONVERGE, || async {
        Ok(update_held(ctx, name).await?.and_then(|(seen, message)| {
            (seen == reason && pods.iter().all(|p| message.contains(p))).then_some(())
        }))
    })
    .await?;
    let described = ctx.kubectl(&["describe", "asts", name]).await?;
    let shown = ["UpdateHeld", reason]
        .iter()
        .chain(pods)
        .all(|s| described.contains(s));
    ensure!(
        shown,
        "kubectl describe does not show UpdateHeld {reason} naming {pods:?}: {described}"
    );
    Ok(())
}

#[tokio::test]
async fn a_held_parallel_rollout_says_which_rule_and_which_pods_in_describe() -> Result<()> {
    run_in_namespace("sts-held", |ctx| async move {
        let overrides = json!({ "spec": {
            "podManagementPolicy": "Parallel",
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": { "partition": 1, "maxUnavailable": 1 }
            }
        }});
        create(&ctx, statefulset(&ctx, "held", 3, overrides)).await?;
        wait_ordinals(&ctx, "held", &[0, 1, 2]).await?;
        ensure!(
            update_held(&ctx, "held").await?.is_none(),
            "a set with nothing to update says it is held"
        );

        // A revision whose pods no node takes: the first one recreated stays Pending and
        // uses up maxUnavailable.
        let unschedulable = json!({ "spec": { "template": { "spec": {
            "nodeSelector": { "stevedore.dev/no-such-node": "true" }
        }}}});
        ctx.api::<StatefulSet>()
            .patch(
                "held",
                &PatchParams::default(),
                &Patch::Merge(unschedulable),
            )
            .await?;
        wait_held(&ctx, "held", "MaxUnavailable", &["held-2"]).await?;

        // A schedulable revision: held-2 and held-1 move, the partition keeps held-0.
        let v2 = ctx.cluster.image("web:v2");
        let fixed = json!({ "spec": { "template": { "spec": {
            "nodeSelector": { "stevedore.dev/no-such-node": null },
            "containers": [{ "name": "web", "image": v2 }]
        }}}});
        ctx.api::<StatefulSet>()
            .patch("held", &PatchParams::default(), &Patch::Merge(fixed))
            .await?;
        wait_held(&ctx, "held", "Partition", &["held-0"]).await?;

        set_partition(&ctx, "held", 0).await?;
        poll_until(
            "UpdateHeld gone once every pod is updated",
            CONVERGE,
            || async {
                let set = ctx.api::<StatefulSet>().get("held").await?;
                let status = set.status.unwrap_or_default();
                let done = status.updated_ready_replicas == 3;
                Ok((done && update_held(&ctx, "held").await?.is_none()).then_some(()))
            },
        )
        .await
    })
    .await
}

/// The claim `name` with its UID, unless it is gone or being deleted.
async fn live_claim(ctx: &TestContext, name: &str) -> Result<Option<PersistentVolumeClaim>> {
    let claim = ctx.api::<PersistentVolumeClaim>().get_opt(name).await?;
    Ok(claim.filter(|c| c.metadata.deletion_timestamp.is_none()))
}

/// Issue 31 item 6: a Pending pod's claim deleted from outside is made again with the same
/// name and the set's labels (the native controller since 1.27, OpenKruise 1.9); the pod
/// is not recreated. No node takes the pod, so it stays Pending throughout.
#[tokio::test]
async fn a_pending_pods_deleted_claim_is_made_again() -> Result<()> {
    run_in_namespace("sts-lost-claim", |ctx| async move {
        let overrides = json!({ "spec": {
            "template": { "spec": {
                "nodeSelector": { "stevedore.dev/no-such-node": "true" }
            }},
            "volumeClaimTemplates": [{
                "metadata": { "name": "data" },
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": { "requests": { "storage": "1Mi" } }
                }
            }]
        }});
        create(&ctx, statefulset(&ctx, "lost", 1, overrides)).await?;
        let (pod, first) = poll_until("lost-0 Pending with its claim", CONVERGE, || async {
            let pod = ctx.api::<Pod>().get_opt("lost-0").await?;
            let pending = pod
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending"));
            let claim = live_claim(&ctx, "data-lost-0").await?;
            Ok(pending.zip(claim))
        })
        .await?;

        // Deleted, and its protection finalizer removed so it really goes while the pod
        // that names it still exists.
        let claims = ctx.api::<PersistentVolumeClaim>();
        claims
            .delete("data-lost-0", &DeleteParams::default())
            .await?;
        let unprotect = json!({ "metadata": { "finalizers": null } });
        match claims
            .patch(
                "data-lost-0",
                &PatchParams::default(),
                &Patch::Merge(unprotect),
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => return Err(err.into()),
        }

        let again = poll_until("data-lost-0 made again", CONVERGE, || async {
            let claim = live_claim(&ctx, "data-lost-0").await?;
            Ok(claim.filter(|c| c.metadata.uid != first.metadata.uid))
        })
        .await?;
        let labels = again.metadata.labels.clone().unwrap_or_default();
        ensure!(
            labels.get("app").map(String::as_str) == Some("lost"),
            "the claim made again lacks the set's selector labels: {labels:?}"
        );
        let now = ctx.api::<Pod>().get("lost-0").await?;
        ensure!(
            now.metadata.uid == pod.metadata.uid,
            "the Pending pod was recreated instead of getting its claim back"
        );
        Ok(())
    })
    .await
}

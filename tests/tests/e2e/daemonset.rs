//! The Advanced DaemonSet controller against the real apiserver, on kwok nodes the test
//! creates and labels (the DaemonSets select them by nodeSelector, so nothing lands on
//! the cluster's other nodes): one pod per node, pinned by node affinity; a node whose
//! label goes, that is tainted NoSchedule (the pod stays) or NoExecute (it goes, and
//! comes back with the taint removed), or that is deleted; a native apps/v1 DaemonSet
//! manifest with only its apiVersion changed, rolled out Standard within maxUnavailable,
//! held by partition and by paused; a recreate rollout held by a preDelete hook goes on
//! once the hook is released. One test runs on the kubelet node instead (selected
//! by hostname): an image change under InPlaceIfPossible restarts the container in place.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stevedore_api::DaemonSet;
use stevedore_tests::{TestContext, invariant, poll_until, run_in_namespace};

use crate::daemonset_support;
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
            wait_update_held(&ctx, "logs", Some("Partition")).await?;

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
            wait_update_held(&ctx, "logs", Some("Paused")).await?;
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
            wait_update_held(&ctx, "logs", None).await?;
            Ok(())
        })
        .await
    })
    .await
}

/// Waits until the UpdateHeld condition has `reason` (`None`: is gone).
async fn wait_update_held(ctx: &TestContext, name: &str, reason: Option<&str>) -> Result<()> {
    poll_until(&format!("{name} UpdateHeld {reason:?}"), WAIT, || async {
        let ds = ctx.api::<DaemonSet>().get(name).await?;
        let status = ds.status.unwrap_or_default();
        let held = (status.conditions.iter())
            .find(|c| c.type_ == "UpdateHeld" && c.status == "True")
            .map(|c| c.reason.as_str());
        Ok((held == reason).then_some(()))
    })
    .await
}

/// How long the surge test keeps each node's old pod beside its new one (minReadySeconds).
const SURGE_WINDOW_SECONDS: u64 = 3;

#[tokio::test]
async fn surging_starts_the_new_pod_beside_the_old_within_max_surge() -> Result<()> {
    run_in_namespace("ds-surge", |ctx| async move {
        with_nodes(ctx, 3, |ctx, n| async move {
            let rolling =
                json!({ "rollingUpdateType": "Surging", "maxSurge": 1, "maxUnavailable": 0 });
            let mut object = manifest(&ctx, "proxy", "web:v1", rolling);
            // kwok readies a pod at once, so without it a node runs two pods for less
            // than one poll; a new pod must be ready this long to be available, and the
            // old one stays beside it until then (upstream's surge rule).
            object["spec"]["minReadySeconds"] = json!(SURGE_WINDOW_SECONDS);
            create(&ctx, object).await?;
            // Available, not just ready: a node whose old pod is not available yet gets
            // its new pod at once, outside the surge budget (upstream's rule too).
            settled_hash(&ctx, "proxy", 3).await?;
            let v2 = ctx.cluster.image("web:v2");
            let template = json!({ "spec": { "containers": [{ "name": "main", "image": v2 }] } });
            patch_spec(&ctx, "proxy", json!({ "template": template })).await?;
            let saw_surge = std::cell::Cell::new(false);
            poll_until("every node on the new pod alone", WAIT, || {
                let (ctx, n, v2, saw_surge) = (&ctx, &n, &v2, &saw_surge);
                async move {
                    // maxUnavailable 0: every node keeps a ready pod throughout.
                    let by_node = within_unavailable(ctx, "proxy", n, 0).await?;
                    // maxSurge counts nodes whose new pod is not available yet. Once it
                    // is, the old pod's delete and the next node's surge may land in the
                    // same sync, as upstream's `rollingUpdate` does, so for a moment such
                    // a node still shows both pods without surging any more.
                    let doubled = by_node
                        .values()
                        .filter(|pods| {
                            pods.len() > 1 && !pods.iter().any(|p| new_and_available(p, v2))
                        })
                        .count();
                    invariant(doubled <= 1, || {
                        let names: Vec<Vec<String>> = (by_node.values())
                            .map(|pods| pods.iter().map(|p| p.name_any()).collect())
                            .collect();
                        format!("{doubled} nodes run two pods (maxSurge 1): {names:?}")
                    })?;
                    invariant(by_node.values().all(|pods| pods.len() <= 2), || {
                        "a node runs more than two pods".to_owned()
                    })?;
                    let beside = by_node.values().any(|pods| pods.len() > 1);
                    saw_surge.set(saw_surge.get() || beside);
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

/// The pod runs `image` and has been Ready for [`SURGE_WINDOW_SECONDS`] (less a second for
/// the condition's whole-second timestamps): the controller counts it available.
fn new_and_available(pod: &Pod, image: &str) -> bool {
    let ready_since = (pod.status.as_ref().and_then(|s| s.conditions.as_ref()))
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref());
    let window = i64::try_from(SURGE_WINDOW_SECONDS).unwrap_or(i64::MAX) - 1;
    image_of(pod) == image
        && ready_since.is_some_and(|since| {
            k8s_openapi::jiff::Timestamp::now()
                .duration_since(since.0)
                .as_secs()
                >= window
        })
}

/// The revision hash the status names, once it has observed the latest generation and
/// every node runs an updated, available pod.
async fn settled_hash(ctx: &TestContext, name: &str, nodes: i32) -> Result<String> {
    poll_until(&format!("{name} settled"), WAIT, || async {
        let ds = ctx.api::<DaemonSet>().get(name).await?;
        let generation = ds.metadata.generation.unwrap_or(0);
        let s = ds.status.unwrap_or_default();
        let settled = s.observed_generation == generation
            && s.updated_number_scheduled == nodes
            && s.number_available == nodes
            && !s.daemon_set_hash.is_empty();
        Ok(settled.then_some(s.daemon_set_hash))
    })
    .await
}

/// A recreate rollout moves a pod held by a preDelete hook to PreparingDelete; once the
/// user controller (the test) removes the hook label, the pod is deleted and the node gets
/// its new pod (issue 31, item 10).
#[tokio::test]
async fn releasing_a_pre_delete_hook_resumes_a_recreate_rollout() -> Result<()> {
    const HOLD: &str = "example.com/hold";
    run_in_namespace("ds-predelete-release", |ctx| async move {
        with_nodes(ctx, 1, |ctx, n| async move {
            let mut object = manifest(&ctx, "held", "web:v1", json!({ "maxUnavailable": 1 }));
            object["spec"]["template"]["metadata"]["labels"][HOLD] = json!("true");
            object["spec"]["lifecycle"] =
                json!({ "preDelete": { "labelsHandler": { HOLD: "true" } } });
            create(&ctx, object).await?;
            wait_on_nodes(&ctx, "held", &n.iter().collect::<Vec<_>>()).await?;
            let template = json!({ "spec": { "containers": [
                { "name": "main", "image": ctx.cluster.image("web:v2") }
            ] } });
            patch_spec(&ctx, "held", json!({ "template": template })).await?;
            let state = "lifecycle.apps.kruise.io/state";
            let held = poll_until("the old pod in PreparingDelete", WAIT, || async {
                let by_node = pods_by_node(&ctx, "held").await?;
                let pod = by_node.get(&n[0]).and_then(|pods| {
                    pods.iter()
                        .find(|p| {
                            p.labels().get(state).map(String::as_str) == Some("PreparingDelete")
                        })
                        .cloned()
                });
                Ok(pod)
            })
            .await?;
            let release = json!({ "metadata": { "labels": { HOLD: null } } });
            ctx.api::<Pod>()
                .patch(
                    &held.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(release),
                )
                .await?;
            let v2 = ctx.cluster.image("web:v2");
            poll_until(
                "the released pod replaced by a web:v2 pod",
                WAIT,
                || async {
                    let by_node = pods_by_node(&ctx, "held").await?;
                    let pods = by_node.get(&n[0]).cloned().unwrap_or_default();
                    let replaced = pods.iter().all(|p| p.uid() != held.uid())
                        && pods.iter().any(|p| image_of(p) == v2 && ready(p));
                    Ok(replaced.then_some(()))
                },
            )
            .await
        })
        .await
    })
    .await
}

#[tokio::test]
async fn rollback_restores_the_old_revision_with_a_higher_number() -> Result<()> {
    use k8s_openapi::api::apps::v1::ControllerRevision;
    run_in_namespace("ds-rollback", |ctx| async move {
        with_nodes(ctx, 2, |ctx, n| async move {
            create(&ctx, manifest(&ctx, "back", "web:v1", json!({ "maxUnavailable": 2 }))).await?;
            let v1_hash = settled_hash(&ctx, "back", 2).await?;
            let template = |image: &str| {
                json!({ "spec": { "containers": [{ "name": "main", "image": ctx.cluster.image(image) }] } })
            };
            patch_spec(&ctx, "back", json!({ "template": template("web:v2") })).await?;
            let v2_hash = settled_hash(&ctx, "back", 2).await?;
            ensure!(v2_hash != v1_hash, "a new template, a new hash");
            patch_spec(&ctx, "back", json!({ "template": template("web:v1") })).await?;
            let back_hash = settled_hash(&ctx, "back", 2).await?;
            ensure!(back_hash == v1_hash, "daemonSetHash back to {v1_hash}, is {back_hash}");
            let by_node = pods_by_node(&ctx, "back").await?;
            let v1 = ctx.cluster.image("web:v1");
            ensure!(
                n.iter().all(|node| by_node.get(node).is_some_and(|p| image_of(&p[0]) == v1)),
                "every node runs web:v1 again"
            );
            let revisions = ctx.api::<ControllerRevision>().list(&ListParams::default()).await?;
            let numbers: BTreeMap<String, i64> = (revisions.items.iter())
                .map(|r| (r.name_any(), r.revision))
                .collect();
            ensure!(numbers.len() == 2, "two revisions, the old one reused: {numbers:?}");
            let restored = (numbers.iter())
                .find(|(name, _)| name.ends_with(&v1_hash))
                .map(|(_, number)| *number);
            ensure!(restored == Some(3), "the restored revision is number 3: {numbers:?}");
            Ok(())
        })
        .await
    })
    .await
}

#[tokio::test]
async fn the_rolling_update_selector_updates_only_canary_nodes() -> Result<()> {
    run_in_namespace("ds-canary", |ctx| async move {
        with_nodes(ctx, 3, |ctx, n| async move {
            let canary = json!({ "metadata": { "labels": { "canary": "true" } } });
            nodes(&ctx)
                .patch(&n[0], &PatchParams::default(), &Patch::Merge(canary))
                .await?;
            let rolling = json!({
                "maxUnavailable": 3,
                "selector": { "matchLabels": { "canary": "true" } },
            });
            create(&ctx, manifest(&ctx, "canary", "web:v1", rolling)).await?;
            wait_on_nodes(&ctx, "canary", &[&n[0], &n[1], &n[2]]).await?;
            let v2 = ctx.cluster.image("web:v2");
            let template = json!({ "spec": { "containers": [{ "name": "main", "image": v2 }] } });
            patch_spec(&ctx, "canary", json!({ "template": template })).await?;
            poll_until("the canary node updated", WAIT, || async {
                let by_node = pods_by_node(&ctx, "canary").await?;
                let done = by_node.get(&n[0]).is_some_and(|p| image_of(&p[0]) == v2);
                Ok(done.then_some(()))
            })
            .await?;
            tokio::time::sleep(Duration::from_secs(4)).await;
            let by_node = pods_by_node(&ctx, "canary").await?;
            for node in &n[1..] {
                let image = by_node.get(node).map(|p| image_of(&p[0]));
                ensure!(
                    image.as_deref() != Some(v2.as_str()),
                    "{node} outside the canary moved"
                );
            }
            let ds = ctx.api::<DaemonSet>().get("canary").await?;
            let updated = ds.status.map(|s| s.updated_number_scheduled);
            ensure!(
                updated == Some(1),
                "one node updated in status, is {updated:?}"
            );
            Ok(())
        })
        .await
    })
    .await
}

#[tokio::test]
async fn a_node_without_room_gets_its_pod_once_a_pod_there_goes() -> Result<()> {
    run_in_namespace("ds-room", |ctx| async move {
        with_nodes(ctx, 2, |ctx, n| async move {
            // A pod bound to n[0] taking all its CPU.
            let allocatable = nodes(&ctx)
                .get(&n[0])
                .await?
                .status
                .and_then(|s| s.allocatable);
            let cpu = allocatable
                .and_then(|a| a.get("cpu").cloned())
                .map(|q| q.0)
                .unwrap_or_else(|| "1k".to_owned());
            let blocker: Pod = serde_json::from_value(json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": { "name": "blocker" },
                "spec": {
                    "nodeName": n[0],
                    "terminationGracePeriodSeconds": 0,
                    "tolerations": [{ "operator": "Exists" }],
                    "containers": [{
                        "name": "main",
                        "image": ctx.cluster.image("web:v1"),
                        "resources": { "requests": { "cpu": cpu } },
                    }],
                },
            }))?;
            ctx.api::<Pod>()
                .create(&PostParams::default(), &blocker)
                .await?;
            let mut ds = manifest(&ctx, "roomy", "web:v1", json!({}));
            ds["spec"]["template"]["spec"]["containers"][0]["resources"] =
                json!({ "requests": { "cpu": "100m" } });
            create(&ctx, ds).await?;
            wait_on_nodes(&ctx, "roomy", &[&n[1]]).await?;
            poll_until("status counts the full node as desired", WAIT, || async {
                let s = ctx
                    .api::<DaemonSet>()
                    .get("roomy")
                    .await?
                    .status
                    .unwrap_or_default();
                let counted = s.desired_number_scheduled == 2
                    && s.current_number_scheduled == 1
                    && s.number_misscheduled == 0;
                Ok(counted.then_some(()))
            })
            .await?;
            let events = ctx
                .api::<k8s_openapi::api::core::v1::Event>()
                .list(&ListParams::default())
                .await?;
            let placement = (events.items.iter())
                .filter(|e| e.reason.as_deref() == Some("FailedPlacement"))
                .filter_map(|e| e.message.clone())
                .collect::<Vec<_>>();
            ensure!(
                placement
                    .iter()
                    .any(|m| m.contains(&n[0]) && m.contains("cpu")),
                "a FailedPlacement event names the node and cpu: {placement:?}"
            );
            tokio::time::sleep(Duration::from_secs(2)).await;
            ensure!(
                !pods_by_node(&ctx, "roomy").await?.contains_key(&n[0]),
                "no pod on the full node"
            );
            ctx.api::<Pod>()
                .delete("blocker", &DeleteParams::default().grace_period(0))
                .await?;
            wait_on_nodes(&ctx, "roomy", &[&n[0], &n[1]]).await?;
            Ok(())
        })
        .await
    })
    .await
}

/// Marks `pod` Failed, as a kubelet reports a pod whose containers failed for good.
async fn fail(ctx: &TestContext, pod: &str) -> Result<()> {
    let patch = json!({ "status": { "phase": "Failed", "reason": "Test" } });
    ctx.api::<Pod>()
        .patch_status(pod, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

#[tokio::test]
async fn failing_pods_are_replaced_with_a_growing_backoff_not_a_flood() -> Result<()> {
    run_in_namespace("ds-backoff", |ctx| async move {
        with_nodes(ctx, 1, |ctx, n| async move {
            create(&ctx, manifest(&ctx, "crash", "web:v1", json!({}))).await?;
            wait_on_nodes(&ctx, "crash", &[&n[0]]).await?;
            // Every pod that appears fails as soon as it runs, until the controller has
            // created five. kwok starts a pod (pod IP, phase Running) a moment after it is
            // bound, and that write would turn a Failed it found already back into Running:
            // so a pod is failed once kwok has started it, and again should anything have
            // started it once more. The timeout only bounds a controller that never
            // replaces; what is asserted is the spacing of the creates it records.
            let mut seen = BTreeSet::new();
            let mut saw_condition = false;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
            while seen.len() < 5 {
                ensure!(
                    tokio::time::Instant::now() < deadline,
                    "the failed pod is not replaced: {} pods",
                    seen.len()
                );
                for pod in pods_by_node(&ctx, "crash").await?.into_values().flatten() {
                    seen.insert(pod.uid().unwrap_or_default());
                    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                    if phase == Some("Running") {
                        fail(&ctx, &pod.name_any()).await?;
                    }
                }
                let ds = ctx.api::<DaemonSet>().get("crash").await?;
                saw_condition |= (ds.status.unwrap_or_default().conditions.iter())
                    .any(|c| c.type_ == "FailedPodBackoff" && c.status == "True");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            ensure!(saw_condition, "a FailedPodBackoff condition while waiting");
            let history = ReplacementHistory::read(&ctx, "crash").await?;
            history.check()?;
            Ok(())
        })
        .await
    })
    .await
}

/// What the DaemonSet's events record about its failed pods: each deletion with the wait
/// its note names, and how many pods it created. The rule is checked on these records,
/// not on how fast kwok and the test fail each pod, so a loaded machine cannot fail it.
#[derive(Debug)]
struct ReplacementHistory {
    /// Each `FailedDaemonPod` event, oldest first: (its time in seconds, the wait named).
    deletions: Vec<(f64, u64)>,
    creates: usize,
}

impl ReplacementHistory {
    async fn read(ctx: &TestContext, name: &str) -> Result<Self> {
        let events = ctx
            .api::<k8s_openapi::api::core::v1::Event>()
            .list(&ListParams::default())
            .await?;
        let of_set =
            || (events.items.iter()).filter(|e| e.involved_object.name.as_deref() == Some(name));
        let creates = of_set()
            .filter(|e| e.reason.as_deref() == Some("SuccessfulCreate"))
            .count();
        let mut deletions = Vec::new();
        for event in of_set().filter(|e| e.reason.as_deref() == Some("FailedDaemonPod")) {
            let note = event.message.as_deref().unwrap_or_default();
            let wait = named_wait(note)
                .with_context(|| format!("a FailedDaemonPod note names its wait: {note:?}"))?;
            let time = (event.event_time.as_ref()).context("a FailedDaemonPod event has a time")?;
            deletions.push((time.0.as_millisecond() as f64 / 1000.0, wait));
        }
        deletions.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(Self { deletions, creates })
    }

    /// The waits double from one second; no failed pod is deleted (and so replaced) before
    /// the wait named at the previous deletion is over; and no pod is created but the first
    /// and one per deletion (no flood).
    fn check(&self) -> Result<()> {
        /// How much sooner than its wait a deletion's event may be stamped: the previous
        /// event is stamped a moment after its wait starts.
        const STAMP_SLACK: f64 = 0.25;
        let waits: Vec<u64> = self.deletions.iter().map(|d| d.1).collect();
        let doubling: Vec<u64> = (0..waits.len()).map(|i| 1 << i).collect();
        ensure!(waits.len() >= 4, "four deletions recorded: {self:?}");
        ensure!(waits == doubling, "the waits double from 1 s: {self:?}");
        for pair in self.deletions.windows(2) {
            let ((before, wait), (after, _)) = (pair[0], pair[1]);
            ensure!(
                after - before + STAMP_SLACK >= wait as f64,
                "a failed pod was deleted {:.2} s after the one before it, within that one's {wait} s wait: {self:?}",
                after - before
            );
        }
        ensure!(
            self.creates <= self.deletions.len() + 1,
            "more pods created than one per deletion (a flood): {self:?}"
        );
        Ok(())
    }
}

/// The whole seconds in "... waits N s ..." of a `FailedDaemonPod` note.
fn named_wait(note: &str) -> Option<u64> {
    let (_, rest) = note.split_once(" waits ")?;
    rest.split_once(" s")?.0.parse().ok()
}

#[test]
fn a_doubling_backoff_passes_and_a_flat_early_or_flooding_one_fails() {
    let history = |deletions: &[(f64, u64)], creates| ReplacementHistory {
        deletions: deletions.to_vec(),
        creates,
    };
    let doubling = [(10.0, 1), (11.3, 2), (13.2, 4), (17.9, 8)];
    assert!(history(&doubling, 5).check().is_ok());
    // A slow machine stretches the gaps; only a gap shorter than its wait fails.
    assert!(
        history(&[(10.0, 1), (14.0, 2), (16.1, 4), (20.0, 8)], 5)
            .check()
            .is_ok()
    );
    assert!(
        history(&[(10.0, 1), (11.0, 1), (12.0, 1), (13.0, 1)], 5)
            .check()
            .is_err(),
        "flat"
    );
    assert!(
        history(&[(10.0, 1), (11.0, 2), (12.0, 4), (13.0, 8)], 5)
            .check()
            .is_err(),
        "early"
    );
    assert!(history(&doubling, 9).check().is_err(), "flood");
    assert!(history(&doubling[..3], 4).check().is_err(), "too few");
    assert_eq!(
        named_wait(
            "A pod on node n failed; it is deleted, and the next one there waits 16 s before it is created."
        ),
        Some(16)
    );
}

/// What the in-place test compares of the DaemonSet's pod on the kubelet node.
#[derive(Debug, PartialEq)]
struct RealPod {
    uid: String,
    ip: String,
    restarts: i32,
    image: String,
    image_id: String,
    ready: bool,
}

/// The DaemonSet `app`'s live pods on the kubelet node (more than one is a failure).
async fn real_pods(ctx: &TestContext, app: &str) -> Result<Vec<RealPod>> {
    let pods = pods_by_node(ctx, app).await?;
    let on: Vec<&String> = pods.keys().collect();
    invariant(on.iter().all(|n| **n == ctx.cluster.node_name), || {
        format!("{app} has pods on {on:?}")
    })?;
    Ok((pods.into_values().flatten())
        .map(|pod| {
            let status = pod.status.clone().unwrap_or_default();
            let main = (status.container_statuses.unwrap_or_default().into_iter())
                .find(|c| c.name == "main")
                .unwrap_or_default();
            RealPod {
                uid: pod.uid().unwrap_or_default(),
                ip: status.pod_ip.unwrap_or_default(),
                restarts: main.restart_count,
                image: main.image,
                image_id: main.image_id,
                ready: ready(&pod) && main.ready,
            }
        })
        .collect())
}

#[tokio::test]
async fn an_image_change_restarts_the_daemon_container_in_place_on_the_kubelet_node() -> Result<()>
{
    run_in_namespace("ds-inplace", |ctx| async move {
        // Only the kubelet node: kwok nodes run no containers, so nothing restarts there.
        let rolling = json!({ "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 1 });
        let mut object = manifest(&ctx, "node-agent", "web:v1", rolling);
        let pod_spec = &mut object["spec"]["template"]["spec"];
        pod_spec["nodeSelector"] = json!({ "kubernetes.io/hostname": ctx.cluster.node_name });
        pod_spec["tolerations"] = json!([]);
        pod_spec["containers"][0]["readinessProbe"] = json!({
            "httpGet": { "path": "/version", "port": 8080 }, "periodSeconds": 1
        });
        create(&ctx, object).await?;
        let before = poll_until("the daemon pod ready on the kubelet node", WAIT, || async {
            let mut pods = real_pods(&ctx, "node-agent").await?;
            let one = pods.len() == 1 && pods[0].ready && !pods[0].ip.is_empty();
            Ok(one.then(|| pods.remove(0)))
        })
        .await?;

        let v2 = ctx.cluster.image("web:v2");
        let patch: json_patch::Patch = serde_json::from_value(json!([{
            "op": "replace", "path": "/spec/template/spec/containers/0/image", "value": v2
        }]))?;
        let ds = ctx
            .api::<DaemonSet>()
            .patch(
                "node-agent",
                &PatchParams::default(),
                &Patch::Json::<()>(patch),
            )
            .await?;
        let generation = ds.metadata.generation.unwrap_or(0);
        let after = poll_until("the daemon container restarted on web:v2", WAIT, || async {
            let mut pods = real_pods(&ctx, "node-agent").await?;
            let same = pods.iter().all(|p| p.uid == before.uid) && pods.len() <= 1;
            invariant(same, || format!("the pod was replaced: {pods:?}"))?;
            let ds = ctx.api::<DaemonSet>().get("node-agent").await?;
            let s = ds.status.unwrap_or_default();
            let settled = s.observed_generation >= generation
                && s.updated_number_scheduled == 1
                && s.number_ready == 1;
            let updated = pods.len() == 1 && pods[0].image == v2 && pods[0].ready;
            Ok((settled && updated).then(|| pods.remove(0)))
        })
        .await?;
        ensure!(after.ip == before.ip, "pod IP {} → {}", before.ip, after.ip);
        ensure!(
            after.restarts == before.restarts + 1,
            "restartCount {} → {}",
            before.restarts,
            after.restarts
        );
        ensure!(
            !after.image_id.is_empty() && after.image_id != before.image_id,
            "imageID {} → {}",
            before.image_id,
            after.image_id
        );

        ctx.api::<DaemonSet>()
            .delete("node-agent", &DeleteParams::background())
            .await?;
        poll_until("the daemon pod gone", WAIT, || async {
            Ok(real_pods(&ctx, "node-agent")
                .await?
                .is_empty()
                .then_some(()))
        })
        .await?;
        Ok(())
    })
    .await
}

//! SidecarSet end to end on the real kubelet node: its sidecar is injected at pod creation
//! into the pods of a CloneSet and of a plain Deployment (with OpenKruise's annotations); a
//! change of the sidecar's image upgrades it in place (same pod UID, the main container
//! never restarted, only the sidecar, InPlaceUpdateReady True again at the end); a
//! change beyond the image leaves the pods as they are, marked `SidecarSetUpgradable`
//! False naming the SidecarSet, with a `NotUpgradablePods` event; a partition keeps that many pods on the old sidecar; a pod two SidecarSets would give the
//! same container name is refused naming both; a SidecarSet selecting every pod of the
//! cluster is refused; each version is a ControllerRevision and
//! `injectionStrategy.revision` injects the one it names; a paused update moves no pod
//! until resumed; an injection that would make an invalid pod is refused with the
//! apiserver's message. Pods of an Advanced StatefulSet get the sidecar too.
//!
//! Run against a control plane with the `sidecarset` controller and `sidecarset-webhook`,
//! and its SidecarSet webhook installed (`deploy/controlplane/webhook.yaml`). SidecarSets
//! are cluster-scoped: each test names its own after its namespace, limits it to that
//! namespace (`spec.namespace`) and deletes it at the end.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod};
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::{SidecarSet, StatefulSet};
use stevedore_tests::pods::condition;
use stevedore_tests::{TestContext, manifests, poll_until, run_in_namespace};

use crate::cloneset_support;
use cloneset_support::{
    INPLACE_UPDATE_READY, Nodes, ROLLOUT, apply, pods_of, wait_rolled_out, web_cloneset,
};

const SIDECAR: &str = "log-agent";
const UPGRADE: Duration = Duration::from_secs(240);
const INJECTED_LIST: &str = "kruise.io/sidecarset-injected-list";
const HASH: &str = "kruise.io/sidecarset-hash";
const UPGRADABLE: &str = "SidecarSetUpgradable";

fn sidecarsets(ctx: &TestContext) -> Api<SidecarSet> {
    Api::all(ctx.client.clone())
}

/// A SidecarSet named `<namespace>-<suffix>` in the test namespace, injecting the
/// `log-agent` sidecar (`image`, sleeping) into the pods whose `app` is one of `apps`.
fn sidecarset(ctx: &TestContext, suffix: &str, apps: &[&str], image: &str, update: Value) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "SidecarSet",
        "metadata": { "name": format!("{}-{suffix}", ctx.namespace) },
        "spec": {
            "namespace": ctx.namespace,
            "selector": { "matchExpressions": [{ "key": "app", "operator": "In", "values": apps }] },
            "containers": [{
                "name": SIDECAR,
                "image": ctx.cluster.image(image),
                "imagePullPolicy": "IfNotPresent",
                "command": ["/bin/sleep", "36000"],
            }],
            "updateStrategy": update,
        },
    })
}

async fn create_sidecarset(ctx: &TestContext, object: &Value) -> Result<SidecarSet> {
    let set: SidecarSet = serde_json::from_value(object.clone())?;
    Ok(sidecarsets(ctx)
        .create(&PostParams::default(), &set)
        .await?)
}

async fn delete_sidecarsets(ctx: &TestContext, names: &[String]) {
    for name in names {
        // Best effort: a leftover is limited to the deleted namespace and harms nothing.
        let _ = sidecarsets(ctx)
            .delete(name, &DeleteParams::default())
            .await;
    }
}

/// Creates the SidecarSets `objects`, runs `check` with their names, and deletes them
/// whatever it returned (also when a later one could not be created).
async fn with_sidecarsets(
    ctx: &TestContext,
    objects: &[Value],
    check: impl AsyncFnOnce(&[String]) -> Result<()>,
) -> Result<()> {
    let mut names = Vec::new();
    for object in objects {
        match create_sidecarset(ctx, object).await {
            Ok(set) => names.push(set.name_any()),
            Err(err) => {
                delete_sidecarsets(ctx, &names).await;
                return Err(err);
            }
        }
    }
    let checked = check(&names).await;
    delete_sidecarsets(ctx, &names).await;
    checked
}

/// Applies the `web` CloneSet `name` of `replicas` pods on the kubelet node and waits
/// until it has rolled out.
async fn rolled_out_web_cloneset(ctx: &TestContext, name: &str, replicas: i32) -> Result<()> {
    apply(
        ctx,
        &web_cloneset(ctx, name, replicas, "InPlaceIfPossible", Nodes::Kubelet),
    )
    .await?;
    wait_rolled_out(ctx, name, ROLLOUT).await?;
    Ok(())
}

/// The status of container `name` of the pod.
fn status_of(pod: &Pod, name: &str) -> Result<ContainerStatus> {
    (pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default())
    .into_iter()
    .find(|c| c.name == name)
    .with_context(|| format!("pod {} has no container {name}", pod.name_any()))
}

/// The pod carries the sidecar (marked IS_INJECTED) and OpenKruise's annotations naming `set`.
fn ensure_injected(pod: &Pod, set: &str) -> Result<()> {
    let name = pod.name_any();
    let spec = pod.spec.as_ref().context("a pod spec")?;
    let sidecar = (spec.containers.iter())
        .find(|c| c.name == SIDECAR)
        .with_context(|| format!("{name}: no sidecar"))?;
    let marked = sidecar
        .env
        .iter()
        .flatten()
        .any(|e| e.name == "IS_INJECTED" && e.value.as_deref() == Some("true"));
    ensure!(marked, "{name}: the sidecar is not marked IS_INJECTED");
    let annotations = pod.annotations();
    ensure!(
        annotations
            .get(INJECTED_LIST)
            .is_some_and(|l| l.split(',').any(|n| n == set)),
        "{name}: {INJECTED_LIST} does not name {set}: {annotations:?}"
    );
    let hashes: Value = serde_json::from_str(annotations.get(HASH).map_or("{}", String::as_str))?;
    ensure!(
        hashes[set]["hash"].as_str().is_some_and(|h| !h.is_empty()),
        "{name}: {HASH} has no version of {set}"
    );
    Ok(())
}

/// Waits until the SidecarSet reports `updated` of `matched` pods updated and ready.
async fn wait_status(
    ctx: &TestContext,
    name: &str,
    matched: i32,
    updated: i32,
) -> Result<SidecarSet> {
    poll_until(
        &format!("SidecarSet {name}: {updated} of {matched} pods updated and ready"),
        UPGRADE,
        || async {
            let set = sidecarsets(ctx).get(name).await?;
            let status = set.status.clone().unwrap_or_default();
            // Counts of the spec just written, not of the one before it.
            let current = status.observed_generation >= set.metadata.generation;
            let done = current
                && status.matched_pods == matched
                && status.updated_pods == updated
                && status.updated_ready_pods == updated;
            Ok(done.then_some(set))
        },
    )
    .await
}

async fn set_sidecar_image(ctx: &TestContext, name: &str, image: &str) -> Result<()> {
    let patch = json!([{ "op": "replace", "path": "/spec/containers/0/image", "value": ctx.cluster.image(image) }]);
    sidecarsets(ctx)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(patch)?),
        )
        .await?;
    Ok(())
}

/// Replaces the sidecar's command: a change Kubernetes does not let a pod take in place.
async fn set_sidecar_command(ctx: &TestContext, name: &str, command: &[&str]) -> Result<()> {
    let patch =
        json!([{ "op": "replace", "path": "/spec/containers/0/command", "value": command }]);
    sidecarsets(ctx)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(patch)?),
        )
        .await?;
    Ok(())
}

/// The pod's `SidecarSetUpgradable` condition as (status, reason, message as JSON).
fn upgradable_condition(pod: &Pod) -> Option<(String, String, Value)> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let found = conditions.iter().find(|c| c.type_ == UPGRADABLE)?;
    let message = serde_json::from_str(found.message.as_deref().unwrap_or_default()).ok()?;
    Some((
        found.status.clone(),
        found.reason.clone().unwrap_or_default(),
        message,
    ))
}

/// The message of the first `reason` event on the cluster-scoped SidecarSet `name` (its
/// events are recorded in `default`), if there is one yet.
async fn sidecarset_event(ctx: &TestContext, name: &str, reason: &str) -> Result<Option<String>> {
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), "default");
    let selector = format!("involvedObject.name={name}");
    let listed = events
        .list(&ListParams::default().fields(&selector))
        .await?;
    Ok((listed.items.into_iter())
        .find(|e| e.reason.as_deref() == Some(reason))
        .map(|e| e.message.unwrap_or_default()))
}

/// The template of the workloads' one `web:v1` pod on the kubelet node, labelled `app: <name>`.
fn web_pod_template(ctx: &TestContext, name: &str) -> Value {
    json!({
        "metadata": { "labels": { "app": name } },
        "spec": {
            "nodeName": ctx.cluster.node_name,
            "terminationGracePeriodSeconds": 1,
            "containers": [{ "name": "web", "image": ctx.cluster.image("web:v1"), "imagePullPolicy": "IfNotPresent" }],
        },
    })
}

/// A Deployment of one `web:v1` pod on the kubelet node, labelled `app: <name>`.
fn deployment(ctx: &TestContext, name: &str) -> Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": web_pod_template(ctx, name),
        },
    }))?)
}

/// An Advanced StatefulSet (`apps.kruise.io/v1beta1`) of one `web` pod labelled `app: <name>`
/// on the kubelet node.
fn advanced_statefulset(ctx: &TestContext, name: &str) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "StatefulSet",
        "metadata": { "name": name },
        "spec": {
            "replicas": 1,
            "serviceName": name,
            "selector": { "matchLabels": { "app": name } },
            "template": web_pod_template(ctx, name),
        },
    })
}

/// Waits until every pod labelled `app: <app>` is running with all containers ready.
async fn running_pods(ctx: &TestContext, app: &str, count: usize) -> Result<Vec<Pod>> {
    poll_until(
        &format!("{count} pods of {app} running and ready"),
        ROLLOUT,
        || async {
            let pods = ctx
                .api::<Pod>()
                .list(&ListParams::default().labels(&format!("app={app}")))
                .await?
                .items;
            let ready = pods.len() == count
                && pods.iter().all(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && condition(p, "Ready").as_deref() == Some("True")
                });
            Ok(ready.then_some(pods))
        },
    )
    .await
}

#[tokio::test]
async fn injects_into_the_pods_of_a_cloneset_an_advanced_statefulset_and_a_deployment() -> Result<()>
{
    run_in_namespace("sidecarset-inject", |ctx| async move {
        let apps = ["web-cs", "web-deploy", "web-sts"];
        let object = sidecarset(&ctx, "log", &apps, "web:v1", json!({}));
        with_sidecarsets(&ctx, &[object], async |names| {
            let set = &names[0];
            apply(
                &ctx,
                &web_cloneset(&ctx, "web-cs", 2, "InPlaceIfPossible", Nodes::Kubelet),
            )
            .await?;
            ctx.api::<Deployment>()
                .create(&PostParams::default(), &deployment(&ctx, "web-deploy")?)
                .await?;
            manifests::apply::<StatefulSet>(&ctx, &advanced_statefulset(&ctx, "web-sts")).await?;
            wait_rolled_out(&ctx, "web-cs", ROLLOUT).await?;
            let mut pods = pods_of(&ctx, "web-cs").await?;
            pods.extend(running_pods(&ctx, "web-deploy", 1).await?);
            pods.extend(running_pods(&ctx, "web-sts", 1).await?);
            ensure!(pods.len() == 4, "expected 4 pods, found {}", pods.len());
            for pod in &pods {
                ensure_injected(pod, set)?;
                ensure!(
                    status_of(pod, SIDECAR)?.ready,
                    "{}: the sidecar is not ready",
                    pod.name_any()
                );
            }
            wait_status(&ctx, set, 4, 4).await?;
            Ok(())
        })
        .await
    })
    .await
}

#[tokio::test]
async fn an_image_change_upgrades_only_the_sidecar_in_place() -> Result<()> {
    run_in_namespace("sidecarset-upgrade", |ctx| async move {
        let object = sidecarset(
            &ctx,
            "log",
            &["web"],
            "web:v1",
            json!({ "maxUnavailable": 1 }),
        );
        with_sidecarsets(&ctx, &[object], async |names| {
            let set = &names[0];
            rolled_out_web_cloneset(&ctx, "web", 2).await?;
            let before = pods_of(&ctx, "web").await?;
            set_sidecar_image(&ctx, set, "web:v2").await?;
            wait_status(&ctx, set, 2, 2).await?;
            let after = wait_rolled_out(&ctx, "web", ROLLOUT)
                .await
                .and(pods_of(&ctx, "web").await)?;
            for old in &before {
                let pod = (after.iter())
                    .find(|p| p.name_any() == old.name_any())
                    .with_context(|| format!("pod {} was replaced", old.name_any()))?;
                ensure!(
                    pod.uid() == old.uid(),
                    "{}: the UID changed",
                    pod.name_any()
                );
                ensure!(
                    status_of(pod, "web")?.restart_count == 0,
                    "{}: the main container restarted",
                    pod.name_any()
                );
                let sidecar = status_of(pod, SIDECAR)?;
                ensure!(
                    sidecar.image.ends_with("web:v2") && sidecar.restart_count == 1,
                    "{}: the sidecar runs {} after {} restarts",
                    pod.name_any(),
                    sidecar.image,
                    sidecar.restart_count
                );
                ensure!(
                    condition(pod, INPLACE_UPDATE_READY).as_deref() == Some("True"),
                    "{}: InPlaceUpdateReady is not True again",
                    pod.name_any()
                );
            }
            Ok(())
        })
        .await
    })
    .await
}

#[tokio::test]
async fn a_change_beyond_the_image_marks_the_pods_not_upgradable_and_leaves_them() -> Result<()> {
    run_in_namespace("sidecarset-immutable", |ctx| async move {
        // maxUnavailable 2: both pods would be upgraded at once if they could be.
        let object = sidecarset(
            &ctx,
            "log",
            &["web"],
            "web:v1",
            json!({ "maxUnavailable": 2 }),
        );
        with_sidecarsets(&ctx, &[object], async |names| {
            let set = &names[0];
            rolled_out_web_cloneset(&ctx, "web", 2).await?;
            wait_status(&ctx, set, 2, 2).await?;
            let before = pods_of(&ctx, "web").await?;
            set_sidecar_command(&ctx, set, &["/bin/sleep", "36001"]).await?;
            let marked = poll_until(
                &format!("both pods marked {UPGRADABLE} False by {set}"),
                UPGRADE,
                || async {
                    let pods = pods_of(&ctx, "web").await?;
                    let all = pods.len() == 2
                        && pods.iter().all(|p| {
                            upgradable_condition(p).is_some_and(|(status, reason, message)| {
                                status == "False"
                                    && reason == "UpdateImmutableField"
                                    && message == json!({ set.as_str(): false })
                            })
                        });
                    Ok(all.then_some(pods))
                },
            )
            .await?;
            // Counted for the new spec: none of the two pods updated.
            wait_status(&ctx, set, 2, 0).await?;
            let event = poll_until(
                &format!("a NotUpgradablePods event on {set}"),
                UPGRADE,
                || sidecarset_event(&ctx, set, "NotUpgradablePods"),
            )
            .await?;
            ensure!(
                event.contains("2 pod(s)"),
                "the event does not count 2 pods: {event}"
            );
            let after = pods_of(&ctx, "web").await?;
            for old in &before {
                let name = old.name_any();
                ensure!(
                    marked.iter().any(|p| p.uid() == old.uid()),
                    "{name}: the marked pods are not the ones from before"
                );
                let pod = (after.iter())
                    .find(|p| p.uid() == old.uid())
                    .with_context(|| format!("pod {name} was replaced"))?;
                let command = (pod.spec.as_ref())
                    .and_then(|s| s.containers.iter().find(|c| c.name == SIDECAR))
                    .and_then(|c| c.command.clone())
                    .unwrap_or_default();
                ensure!(
                    command == ["/bin/sleep", "36000"],
                    "{name}: the sidecar's command changed to {command:?}"
                );
                ensure!(
                    pod.annotations().get(HASH) == old.annotations().get(HASH),
                    "{name}: the recorded SidecarSet version changed"
                );
                for container in ["web", SIDECAR] {
                    let restarts = status_of(pod, container)?.restart_count;
                    ensure!(
                        restarts == 0,
                        "{name}: {container} restarted {restarts} times"
                    );
                }
            }
            Ok(())
        })
        .await
    })
    .await
}

/// Waits until the SidecarSet names a latest revision other than `old`; returns it.
async fn wait_latest_revision(ctx: &TestContext, name: &str, old: &str) -> Result<String> {
    poll_until(
        &format!("SidecarSet {name}: a latest revision after {old:?}"),
        UPGRADE,
        || async {
            let set = sidecarsets(ctx).get(name).await?;
            let latest = set.status.map(|s| s.latest_revision).unwrap_or_default();
            Ok((!latest.is_empty() && latest != old).then_some(latest))
        },
    )
    .await
}

#[tokio::test]
async fn injection_strategy_revision_injects_the_version_it_names() -> Result<()> {
    run_in_namespace("sidecarset-revision", |ctx| async move {
        let mut object = sidecarset(&ctx, "log", &["web-deploy"], "web:v1", json!({ "paused": true }));
        object["metadata"]["labels"] = json!({ "apps.kruise.io/sidecarset-custom-version": "stable" });
        with_sidecarsets(&ctx, &[object], async |names| {
            let set = &names[0];
            let first = wait_latest_revision(&ctx, set, "").await?;
            let patch = json!({
                "metadata": { "labels": { "apps.kruise.io/sidecarset-custom-version": "canary" } },
                "spec": {
                    "containers": [{ "name": SIDECAR, "image": ctx.cluster.image("web:v2"), "imagePullPolicy": "IfNotPresent", "command": ["/bin/sleep", "36000"] }],
                    "injectionStrategy": { "revision": { "customVersion": "stable" } },
                },
            });
            sidecarsets(&ctx).patch(set, &PatchParams::default(), &Patch::Merge(&patch)).await?;
            wait_latest_revision(&ctx, set, &first).await?;
            ctx.api::<Deployment>().create(&PostParams::default(), &deployment(&ctx, "web-deploy")?).await?;
            let pods = running_pods(&ctx, "web-deploy", 1).await?;
            let sidecar = status_of(&pods[0], SIDECAR)?;
            ensure!(sidecar.image.ends_with("web:v1"), "the new pod got {} rather than the stable revision's web:v1", sidecar.image);
            Ok(())
        })
        .await
    })
    .await
}

#[tokio::test]
async fn a_partition_keeps_that_many_pods_on_the_old_sidecar() -> Result<()> {
    run_in_namespace("sidecarset-partition", |ctx| async move {
        let update = json!({ "partition": 2, "maxUnavailable": 3 });
        let object = sidecarset(&ctx, "log", &["web"], "web:v1", update);
        with_sidecarsets(&ctx, &[object], async |names| {
            let set = &names[0];
            rolled_out_web_cloneset(&ctx, "web", 3).await?;
            set_sidecar_image(&ctx, set, "web:v2").await?;
            // One pod upgraded and ready again: the status of a sync that saw its upgrade
            // done. That sync planned the next pods from the same view, so had the
            // partition not held (maxUnavailable 3 allows all), it would have patched them
            // before writing this status.
            wait_status(&ctx, set, 3, 1).await?;
            let pods = pods_of(&ctx, "web").await?;
            let upgraded = (pods.iter())
                .filter(|p| sidecar_spec_image(p).is_some_and(|image| image.ends_with("web:v2")))
                .count();
            ensure!(
                upgraded == 1,
                "{upgraded} of 3 pods were given the new sidecar under partition 2"
            );
            let status = sidecarsets(&ctx).get(set).await?.status.unwrap_or_default();
            ensure!(
                status.updated_pods == 1,
                "updatedPods is {} under partition 2",
                status.updated_pods
            );
            Ok(())
        })
        .await
    })
    .await
}

/// The image the pod's spec gives its sidecar (patched at an upgrade's start, before the
/// kubelet runs it).
fn sidecar_spec_image(pod: &Pod) -> Option<&str> {
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice());
    (containers.unwrap_or_default().iter())
        .find(|c| c.name == SIDECAR)
        .and_then(|c| c.image.as_deref())
}

/// Creates `pod` until its creation is refused; returns the apiserver's message. The
/// webhook reads the SidecarSets from its cache, which may not have the test's yet: a pod
/// admitted meanwhile is deleted and created again.
async fn refused_pod(ctx: &TestContext, pod: &Pod) -> Result<String> {
    let name = pod.name_any();
    poll_until("the pod refused", Duration::from_secs(60), || async {
        match ctx.api::<Pod>().create(&PostParams::default(), pod).await {
            Err(kube::Error::Api(status)) => Ok(Some(status.message)),
            Err(err) => Err(err.into()),
            Ok(_) => {
                let now = DeleteParams::default().grace_period(0);
                ctx.api::<Pod>().delete(&name, &now).await?;
                Ok(None)
            }
        }
    })
    .await
}

#[tokio::test]
async fn a_pod_two_sidecarsets_give_one_container_name_is_refused_naming_both() -> Result<()> {
    run_in_namespace("sidecarset-conflict", |ctx| async move {
        let objects = [
            sidecarset(&ctx, "a", &["web"], "web:v1", json!({})),
            sidecarset(&ctx, "b", &["web"], "web:v1", json!({})),
        ];
        with_sidecarsets(&ctx, &objects, async |names| {
            let [first, second] = names else {
                anyhow::bail!("expected two SidecarSets, created {names:?}");
            };
            let pod: Pod = serde_json::from_value(json!({
                "metadata": { "name": "web", "labels": { "app": "web" } },
                "spec": { "nodeName": ctx.cluster.node_name, "containers": [{ "name": "web", "image": ctx.cluster.image("web:v1") }] },
            }))?;
            let refused = refused_pod(&ctx, &pod).await?;
            ensure!(refused.contains(first.as_str()) && refused.contains(second.as_str()), "the refusal names not both SidecarSets: {refused}");
            ensure!(refused.contains(SIDECAR), "the refusal names not the container: {refused}");
            Ok(())
        })
        .await
    })
    .await
}

#[tokio::test]
async fn a_sidecarset_selecting_every_pod_of_the_cluster_is_refused() -> Result<()> {
    run_in_namespace("sidecarset-everything", |ctx| async move {
        let mut object = sidecarset(&ctx, "all", &["web"], "web:v1", json!({}));
        object["spec"]
            .as_object_mut()
            .context("a spec")?
            .remove("selector");
        object["spec"]
            .as_object_mut()
            .context("a spec")?
            .remove("namespace");
        let refused = create_sidecarset(&ctx, &object).await;
        let Err(err) = refused else {
            delete_sidecarsets(&ctx, &[format!("{}-all", ctx.namespace)]).await;
            anyhow::bail!("a SidecarSet with no selector and no namespace was admitted");
        };
        let message = err.to_string();
        ensure!(
            message.contains("spec.selector") && message.contains("every pod in the cluster"),
            "{message}"
        );
        // Limited to a namespace, the same empty selector is admitted.
        object["spec"]["namespace"] = json!(ctx.namespace);
        let admitted = create_sidecarset(&ctx, &object).await?;
        delete_sidecarsets(&ctx, &[admitted.name_any()]).await;
        Ok(())
    })
    .await
}

/// The image the sidecar of each pod of `app` names in its spec (what an upgrade patches).
async fn sidecar_spec_images(ctx: &TestContext, app: &str) -> Result<Vec<String>> {
    let pods = pods_of(ctx, app).await?;
    (pods.iter())
        .map(|pod| {
            let spec = pod.spec.as_ref().context("a pod spec")?;
            let sidecar = (spec.containers.iter()).find(|c| c.name == SIDECAR);
            sidecar
                .and_then(|c| c.image.clone())
                .with_context(|| format!("{}: no sidecar", pod.name_any()))
        })
        .collect()
}

#[tokio::test]
async fn a_paused_update_holds_every_pod_until_it_is_resumed() -> Result<()> {
    run_in_namespace("sidecarset-paused", |ctx| async move {
        let update = json!({ "paused": true, "maxUnavailable": 2 });
        let object = sidecarset(&ctx, "log", &["web"], "web:v1", update);
        with_sidecarsets(&ctx, &[object], async |names| {
            let set = &names[0];
            rolled_out_web_cloneset(&ctx, "web", 2).await?;
            set_sidecar_image(&ctx, set, "web:v2").await?;
            let generation = (sidecarsets(&ctx).get(set).await?.metadata.generation).unwrap_or(0);
            // The sync that observes the new image writes the status after its pod patches:
            // once the status speaks of it, a pod it upgraded would name the new image.
            let status = poll_until("the new image observed", UPGRADE, || async {
                let status = sidecarsets(&ctx).get(set).await?.status.unwrap_or_default();
                Ok((status.observed_generation >= Some(generation)).then_some(status))
            })
            .await?;
            ensure!(
                status.updated_pods == 0,
                "updatedPods {} while paused",
                status.updated_pods
            );
            let images = sidecar_spec_images(&ctx, "web").await?;
            let old = ctx.cluster.image("web:v1");
            ensure!(
                images.iter().all(|i| *i == old),
                "pods moved while paused: {images:?}"
            );

            let resume = json!({ "spec": { "updateStrategy": { "paused": false } } });
            sidecarsets(&ctx)
                .patch(set, &PatchParams::default(), &Patch::Merge(&resume))
                .await?;
            wait_status(&ctx, set, 2, 2).await?;
            Ok(())
        })
        .await
    })
    .await
}

#[tokio::test]
async fn an_injection_that_would_make_an_invalid_pod_is_refused_with_the_apiservers_message()
-> Result<()> {
    run_in_namespace("sidecarset-invalid", |ctx| async move {
        let mut object = sidecarset(&ctx, "log", &["web"], "web:v1", json!({}));
        // A mount of a volume neither the SidecarSet nor the pod has.
        object["spec"]["containers"][0]["volumeMounts"] =
            json!([{ "name": "nowhere", "mountPath": "/var/log/app" }]);
        with_sidecarsets(&ctx, &[object], async |_| {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": { "name": "web", "labels": { "app": "web" } },
                "spec": { "nodeName": ctx.cluster.node_name, "containers": [{ "name": "web", "image": ctx.cluster.image("web:v1") }] },
            }))?;
            let refused = refused_pod(&ctx, &pod).await?;
            ensure!(
                refused.contains("volumeMounts") && refused.contains("nowhere"),
                "the refusal names neither the field nor the volume: {refused}"
            );
            ensure!(
                ctx.api::<Pod>().get_opt("web").await?.is_none(),
                "a refused pod exists"
            );
            Ok(())
        })
        .await
    })
    .await
}

//! The CloneSet controller (running in the cluster) and pods it does not own alone:
//! adoption of a matching orphan and release of a pod that stops matching, and lifecycle
//! hooks held by a "user controller" played by the test (preDelete labels, preNormal
//! finalizers).

use crate::cloneset_component;

use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_tests::pods::is_running_and_ready;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use cloneset_component::{
    CONVERGE, INSTANCE_ID_LABEL, STATE_LABEL, all_pods, cloneset, controller_uid, create, describe,
    label, live_pods, patch, wait_converged, wait_pods,
};

async fn patch_pod(ctx: &TestContext, pod: &str, body: Value) -> Result<Pod> {
    Ok(ctx
        .api::<Pod>()
        .patch(pod, &PatchParams::default(), &Patch::Merge(body))
        .await?)
}

#[tokio::test]
async fn adopts_a_matching_orphan_and_releases_a_pod_that_stops_matching() -> Result<()> {
    run_in_namespace("cloneset-lifecycle-adopt", |ctx| async move {
        let name = "web";
        let cs = create(&ctx, cloneset(&ctx, name, 2, json!({}))).await?;
        let uid = cs.uid().context("uid")?;
        let converged = wait_converged(&ctx, name, 2).await?;

        // An orphan that does not match yet, so it is Running and Ready before the set
        // sees it and the scale-down that follows adoption can rank it by deletion cost.
        let template = &converged.pods[0];
        let mut orphan_spec = serde_json::to_value(template.spec.clone().context("spec")?)?;
        orphan_spec["nodeName"] = Value::Null;
        let orphan: Pod = serde_json::from_value(json!({
            "metadata": {
                "name": "orphan",
                "labels": { "app": "not-yet" },
                "annotations": { "controller.kubernetes.io/pod-deletion-cost": "1000" }
            },
            "spec": {
                "nodeSelector": { "type": "kwok" },
                "tolerations": orphan_spec["tolerations"],
                "containers": [{ "name": "web", "image": ctx.cluster.image("web:v1") }]
            }
        }))?;
        ctx.api::<Pod>()
            .create(&PostParams::default(), &orphan)
            .await?;
        poll_until("the orphan to run", CONVERGE, || async {
            let pod = ctx.api::<Pod>().get("orphan").await?;
            Ok(is_running_and_ready(&pod).then_some(()))
        })
        .await?;
        // Now make it match, on the set's revision (so no update replaces it).
        let mut labels = template.labels().clone();
        labels.remove(INSTANCE_ID_LABEL);
        patch_pod(&ctx, "orphan", json!({ "metadata": { "labels": labels } })).await?;
        poll_until("the orphan to be adopted", CONVERGE, || async {
            let pod = ctx.api::<Pod>().get("orphan").await?;
            if controller_uid(&pod.metadata) == Some(uid.as_str()) {
                return Ok(Some(()));
            }
            bail!("ownerReferences {:?}", pod.metadata.owner_references)
        })
        .await?;
        // Three pods for two replicas: the set scales one of its cheaper pods away.
        let converged = wait_converged(&ctx, name, 2).await?;
        ensure!(
            converged.pods.iter().any(|p| p.name_any() == "orphan"),
            "the adopted pod was kept: {}",
            describe(&converged.pods)
        );

        // Release: a pod whose labels stop matching loses its controller reference and a
        // replacement takes its place.
        let released = converged
            .pods
            .iter()
            .find(|p| p.name_any() != "orphan")
            .context("a pod of the set")?
            .clone();
        patch_pod(
            &ctx,
            &released.name_any(),
            json!({ "metadata": { "labels": { "app": "gone" } } }),
        )
        .await?;
        poll_until("the pod to be released", CONVERGE, || async {
            let pod = ctx.api::<Pod>().get(&released.name_any()).await?;
            if pod.metadata.deletion_timestamp.is_some() {
                bail!("the released pod is being deleted");
            }
            if controller_uid(&pod.metadata).is_none() {
                return Ok(Some(()));
            }
            bail!("ownerReferences {:?}", pod.metadata.owner_references)
        })
        .await?;
        let converged = wait_converged(&ctx, name, 2).await?;
        ensure!(
            converged.pods.iter().all(|p| p.uid() != released.uid()),
            "a replacement took the released pod's place"
        );
        let still = ctx.api::<Pod>().get(&released.name_any()).await?;
        ensure!(
            still.metadata.deletion_timestamp.is_none(),
            "releasing does not delete the pod"
        );
        Ok(())
    })
    .await
}

const HOLD: &str = "example.com/hold";

#[tokio::test]
async fn pre_delete_hook_holds_a_scaled_down_pod_until_released() -> Result<()> {
    run_in_namespace("cloneset-lifecycle-predelete", |ctx| async move {
        let name = "web";
        let spec = json!({ "spec": {
            "template": { "metadata": { "labels": { HOLD: "true" } } },
            "lifecycle": { "preDelete": { "labelsHandler": { HOLD: "true" } } }
        } });
        create(&ctx, cloneset(&ctx, name, 3, spec)).await?;
        let converged = wait_converged(&ctx, name, 3).await?;
        for pod in &converged.pods {
            ensure!(
                label(pod, HOLD) == Some("true") && label(pod, STATE_LABEL) == Some("Normal"),
                "pod {} created with the hook label in state Normal",
                pod.name_any()
            );
        }

        patch(&ctx, name, json!({ "spec": { "replicas": 2 } })).await?;
        let held = wait_pods(&ctx, name, "one pod in PreparingDelete", CONVERGE, |pods| {
            let preparing: Vec<&Pod> = pods
                .iter()
                .filter(|p| label(p, STATE_LABEL) == Some("PreparingDelete"))
                .collect();
            Ok(match preparing.as_slice() {
                [pod] => Some((*pod).clone()),
                [] => None,
                more => bail!("{} pods in PreparingDelete", more.len()),
            })
        })
        .await?;
        // Held: not deleted, and not replaced.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let pods = all_pods(&ctx, name).await?;
        ensure!(
            pods.len() == 3
                && pods
                    .iter()
                    .any(|p| p.uid() == held.uid() && p.metadata.deletion_timestamp.is_none()),
            "the hooked pod was deleted or replaced while held: {}",
            describe(&pods)
        );

        // The user controller releases the hook: the pod goes.
        patch_pod(
            &ctx,
            &held.name_any(),
            json!({ "metadata": { "labels": { HOLD: null } } }),
        )
        .await?;
        poll_until("the released pod to be deleted", CONVERGE, || async {
            let pod = ctx.api::<Pod>().get_opt(&held.name_any()).await?;
            match pod {
                Some(p) if p.uid() == held.uid() && p.metadata.deletion_timestamp.is_none() => {
                    bail!("still there in state {:?}", label(&p, STATE_LABEL))
                }
                _ => Ok(Some(())),
            }
        })
        .await?;
        let converged = wait_converged(&ctx, name, 2).await?;
        ensure!(
            converged.pods.iter().all(|p| p.uid() != held.uid()),
            "the released pod is gone"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn excluding_preparing_delete_replaces_a_held_pod_at_once() -> Result<()> {
    run_in_namespace("cloneset-lifecycle-exclude", |ctx| async move {
        let name = "web";
        let spec = json!({
            "metadata": { "labels": {
                "apps.kruise.io/cloneset-scaling-exclude-preparing-delete": "true"
            } },
            "spec": {
                "template": { "metadata": { "labels": { HOLD: "true" } } },
                "lifecycle": { "preDelete": { "labelsHandler": { HOLD: "true" } } }
            }
        });
        create(&ctx, cloneset(&ctx, name, 2, spec)).await?;
        let converged = wait_converged(&ctx, name, 2).await?;
        let doomed = converged.pods[0].name_any();
        patch_pod(
            &ctx,
            &doomed,
            json!({ "metadata": { "labels": { "apps.kruise.io/specified-delete": "true" } } }),
        )
        .await?;
        // Held in PreparingDelete, left out of the scaling counts: a replacement runs
        // beside it and status.replicas counts both.
        poll_until("a replacement beside the held pod", CONVERGE, || async {
            let cs = ctx.api::<stevedore_api::CloneSet>().get(name).await?;
            let pods = live_pods(&ctx, name).await?;
            let held = pods.iter().any(|p| {
                p.name_any() == doomed && label(p, STATE_LABEL) == Some("PreparingDelete")
            });
            let replicas = cs.status.map_or(0, |s| s.replicas);
            if held && pods.len() == 3 && replicas == 3 {
                return Ok(Some(()));
            }
            bail!("status.replicas {replicas}; pods: {}", describe(&pods))
        })
        .await?;

        // Released, the held pod goes and two remain.
        patch_pod(
            &ctx,
            &doomed,
            json!({ "metadata": { "labels": { HOLD: null } } }),
        )
        .await?;
        let converged = wait_converged(&ctx, name, 2).await?;
        ensure!(
            converged.pods.iter().all(|p| p.name_any() != doomed),
            "the released pod is gone"
        );
        Ok(())
    })
    .await
}

const REGISTERED: &str = "example.com/registered";

/// Removes the hook finalizer from every pod, so the namespace can go.
async fn drop_finalizers(ctx: &TestContext, name: &str) {
    if let Ok(pods) = all_pods(ctx, name).await {
        for pod in pods {
            let _ = patch_pod(
                ctx,
                &pod.name_any(),
                json!({ "metadata": { "finalizers": null } }),
            )
            .await;
        }
    }
}

async fn pre_normal_body(ctx: &TestContext, name: &str) -> Result<()> {
    let spec = json!({ "spec": {
        "progressDeadlineSeconds": PRE_NORMAL_DEADLINE,
        "lifecycle": { "preNormal": { "finalizersHandler": [REGISTERED] } }
    } });
    create(ctx, cloneset(ctx, name, 2, spec)).await?;
    // The pods run, but stay PreparingNormal: nobody has registered them yet.
    let pods = wait_pods(ctx, name, "2 pods Running and Ready", CONVERGE, |pods| {
        Ok((pods.len() == 2 && pods.iter().all(is_running_and_ready)).then(|| pods.to_vec()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pods_now = live_pods(ctx, name).await?;
    for pod in &pods_now {
        ensure!(
            label(pod, STATE_LABEL) == Some("PreparingNormal"),
            "pod {} left PreparingNormal before the hook was satisfied: {}",
            pod.name_any(),
            describe(&pods_now)
        );
        ensure!(
            !pod.finalizers().iter().any(|f| f == REGISTERED),
            "pod {} was created with the hook's finalizer: only the user controller adds it",
            pod.name_any()
        );
    }
    ensure!(pods_now.len() == pods.len(), "no pod replaced meanwhile");
    // Held pods are not available (only Normal ones are), so the rollout times out.
    let available = progressing_reason(ctx, name, "ProgressDeadlineExceeded").await?;
    ensure!(
        available == 0,
        "pods held in PreparingNormal counted available: {available}"
    );

    // The user controller registers the pods: they become Normal.
    for pod in &pods_now {
        patch_pod(
            ctx,
            &pod.name_any(),
            json!({ "metadata": { "finalizers": [REGISTERED] } }),
        )
        .await?;
    }
    wait_pods(
        ctx,
        name,
        "the registered pods to be Normal",
        CONVERGE,
        |pods| {
            Ok(
                (pods.len() == 2 && pods.iter().all(|p| label(p, STATE_LABEL) == Some("Normal")))
                    .then_some(()),
            )
        },
    )
    .await?;
    let converged = wait_converged(ctx, name, 2).await?;
    ensure!(
        converged
            .cloneset
            .status
            .as_ref()
            .is_some_and(|s| s.available_replicas == 2),
        "both pods available once Normal"
    );
    progressing_reason(ctx, name, "CloneSetAvailable").await?;
    Ok(())
}

/// Short enough to pass while the test holds the pods, long enough for them to start.
const PRE_NORMAL_DEADLINE: i32 = 20;

/// Waits for the CloneSet's Progressing condition to have `reason`; returns the status's
/// availableReplicas at that moment.
async fn progressing_reason(ctx: &TestContext, name: &str, reason: &str) -> Result<i32> {
    let api = ctx.api::<stevedore_api::CloneSet>();
    let what = format!("Progressing with reason {reason}");
    poll_until(&what, CONVERGE, || async {
        let status = api.get(name).await?.status.unwrap_or_default();
        let found = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Progressing" && c.reason == reason)
            .map(|_| status.available_replicas);
        Ok(found)
    })
    .await
}

#[tokio::test]
async fn pre_normal_hook_holds_new_pods_until_the_user_controller_registers_them() -> Result<()> {
    run_in_namespace("cloneset-lifecycle-prenormal", |ctx| async move {
        let name = "web";
        let result = pre_normal_body(&ctx, name).await;
        // Pods keep the hook finalizer; take it off so they (and the namespace) can go.
        drop_finalizers(&ctx, name).await;
        result
    })
    .await
}

/// A scheduler no one runs: pods naming it are never bound unless the test binds them.
const NOBODY_SCHEDULER: &str = "stevedore-test-nobody";

/// Binds `pod` to `node` through the binding subresource, as a scheduler does.
async fn bind(ctx: &TestContext, pod: &str, node: &str) -> Result<()> {
    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": { "name": pod },
        "target": { "apiVersion": "v1", "kind": "Node", "name": node }
    });
    ctx.api::<Pod>()
        .create_subresource::<Value, Value>("binding", pod, &PostParams::default(), &binding)
        .await
        .with_context(|| format!("binding pod {pod} to node {node}"))?;
    Ok(())
}

#[tokio::test]
async fn a_new_pod_stays_preparing_normal_until_it_is_scheduled() -> Result<()> {
    run_in_namespace("cloneset-lifecycle-unscheduled", |ctx| async move {
        let name = "web";
        let spec = json!({ "spec": { "template": { "spec": {
            "schedulerName": NOBODY_SCHEDULER
        } } } });
        create(&ctx, cloneset(&ctx, name, 1, spec)).await?;
        // The set has synced with its pod (status counts it), and more syncs follow while
        // the test waits: none may move the unbound pod to Normal (OpenKruise 1.9).
        poll_until("the CloneSet to count its pod", CONVERGE, || async {
            let cs = ctx
                .api::<stevedore_controlplane::api::CloneSet>()
                .get(name)
                .await?;
            Ok(cs.status.is_some_and(|s| s.replicas == 1).then_some(()))
        })
        .await?;
        tokio::time::sleep(Duration::from_secs(6)).await;
        let pods = live_pods(&ctx, name).await?;
        let [pod] = pods.as_slice() else {
            bail!("one pod expected: {}", describe(&pods));
        };
        ensure!(
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_none()
                && label(pod, STATE_LABEL) == Some("PreparingNormal"),
            "an unscheduled pod is PreparingNormal: {}",
            describe(&pods)
        );

        // Bound to a node, it turns Normal without a preNormal hook.
        let nodes = Api::<Node>::all(ctx.client.clone())
            .list(&ListParams::default().labels("type=kwok"))
            .await?;
        let node = nodes.items.first().context("a kwok node")?.name_any();
        bind(&ctx, &pod.name_any(), &node).await?;
        wait_pods(&ctx, name, "the bound pod to be Normal", CONVERGE, |pods| {
            Ok(pods
                .iter()
                .all(|p| label(p, STATE_LABEL) == Some("Normal"))
                .then_some(()))
        })
        .await?;
        Ok(())
    })
    .await
}

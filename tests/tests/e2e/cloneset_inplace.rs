//! CloneSet updates end to end on the real kubelet node, with the control plane running in
//! the cluster and the agent setting pod conditions: an image change updates pods in place
//! (same pod, same IP, same claim, one container restart, `InPlaceUpdateReady` False then
//! True); ReCreate and non-image changes replace pods (and, by design, their claims);
//! InPlaceOnly refuses what it cannot do in place and ignores claim-template changes
//! (in place, claims kept); `kubectl scale` and an HPA drive the scale subresource.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use stevedore_api::CloneSet;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use crate::cloneset_support;
use cloneset_support::{
    INPLACE_UPDATE_READY, Nodes, ROLLOUT, Recorder, STATE_ANNOTATION, apply, condition_transitions,
    condition_with_reason, instance_id, is_bound, json_patch, pods_of, pvcs, set_image, uid,
    wait_event, wait_rolled_out, web_cloneset,
};

/// What a test compares of a pod before and after an update.
#[derive(Clone, Debug)]
struct PodView {
    name: String,
    uid: String,
    ip: String,
    node: String,
    restarts: i32,
    image: String,
    image_id: String,
    instance_id: String,
}

fn view(pod: &Pod) -> PodView {
    let status = pod.status.clone().unwrap_or_default();
    let web = status
        .container_statuses
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.name == "web")
        .unwrap_or_default();
    PodView {
        name: pod.name_any(),
        uid: uid(pod),
        ip: status.pod_ip.unwrap_or_default(),
        node: pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default(),
        restarts: web.restart_count,
        image: web.image,
        image_id: web.image_id,
        instance_id: instance_id(pod).unwrap_or_default().to_owned(),
    }
}

async fn views(ctx: &TestContext, name: &str) -> Result<BTreeMap<String, PodView>> {
    Ok(pods_of(ctx, name)
        .await?
        .iter()
        .map(|p| (p.name_any(), view(p)))
        .collect())
}

/// The claim of instance `id` (template `data`): name, UID and whether it is bound.
async fn claim_of(ctx: &TestContext, set: &str, id: &str) -> Result<(String, String, bool)> {
    let name = format!("data-{set}-{id}");
    let all = pvcs(ctx).await?;
    let pvc = all
        .get(&name)
        .with_context(|| format!("no claim {name}; claims: {:?}", all.keys()))?;
    Ok((name, uid(pvc), is_bound(pvc)))
}

/// Creates the web CloneSet and waits for it; returns its pods.
async fn create_ready(
    ctx: &TestContext,
    name: &str,
    replicas: i32,
    policy: &str,
    nodes: Nodes,
) -> Result<BTreeMap<String, PodView>> {
    apply(ctx, &web_cloneset(ctx, name, replicas, policy, nodes)).await?;
    wait_rolled_out(ctx, name, ROLLOUT).await?;
    views(ctx, name).await
}

/// Waits until the set has rolled out a revision other than `old_revision`.
async fn wait_new_revision(ctx: &TestContext, name: &str, old_revision: &str) -> Result<CloneSet> {
    let cs = wait_rolled_out(ctx, name, ROLLOUT).await?;
    let status = cs.status.clone().unwrap_or_default();
    ensure!(
        status.update_revision != old_revision,
        "updateRevision is still {old_revision}"
    );
    Ok(cs)
}

fn revision(cs: &CloneSet) -> String {
    cs.status
        .as_ref()
        .map(|s| s.update_revision.clone())
        .unwrap_or_default()
}

/// The pod keeps `apps.kruise.io/inplace-update-state` after its update, as OpenKruise does:
/// it names `update_revision` and records the container restarted in its batch.
fn ensure_state_kept(pod: &Pod, update_revision: &str) -> Result<()> {
    let name = pod.name_any();
    let raw = pod
        .annotations()
        .get(STATE_ANNOTATION)
        .with_context(|| format!("{name}: the in-place state annotation was removed"))?;
    let state: serde_json::Value = serde_json::from_str(raw)?;
    ensure!(
        state["revision"] == update_revision,
        "{name}: the kept state names revision {}, not {update_revision}",
        state["revision"]
    );
    let batches = state["containerBatchesRecord"].as_array();
    ensure!(
        batches.is_some_and(|b| b.iter().any(|batch| batch["containers"]
            .as_array()
            .is_some_and(|c| c.iter().any(|n| n == "web")))),
        "{name}: containerBatchesRecord does not name container web: {raw}"
    );
    Ok(())
}

#[tokio::test]
async fn image_change_updates_pods_in_place() -> Result<()> {
    run_in_namespace("cloneset-inplace-image", |ctx| async move {
        let name = "web";
        let before = create_ready(&ctx, name, 2, "InPlaceIfPossible", Nodes::Kubelet).await?;
        let old_revision = revision(&ctx.api::<CloneSet>().get(name).await?);
        let mut claims_before = BTreeMap::new();
        for pod in before.values() {
            let claim = claim_of(&ctx, name, &pod.instance_id).await?;
            ensure!(claim.2, "claim {} is not bound", claim.0);
            claims_before.insert(pod.name.clone(), claim);
        }
        let recorder = Recorder::<Pod>::start(&ctx).await?;

        let started = Instant::now();
        let v2 = ctx.cluster.image("web:v2");
        set_image(&ctx, name, &v2).await?;
        let cs = wait_new_revision(&ctx, name, &old_revision).await?;
        // The status may count a pod as updated and ready a moment before the clean-up
        // patch lands; wait for the pods themselves.
        let pods = poll_until(
            "the pods to finish their in-place update",
            Duration::from_secs(60),
            || async {
                let pods = pods_of(&ctx, name).await?;
                let done = pods.iter().all(|p| {
                    !cloneset_support::in_place_update_pending(p)
                        && stevedore_tests::pods::condition(p, INPLACE_UPDATE_READY).as_deref()
                            == Some("True")
                        && stevedore_tests::pods::is_running_and_ready(p)
                });
                Ok(done.then_some(pods))
            },
        )
        .await?;
        eprintln!(
            "in-place rollout of 2 pods (maxUnavailable 1) took {:?}",
            started.elapsed()
        );

        let transitions = condition_transitions(&recorder.history(), INPLACE_UPDATE_READY);
        ensure!(pods.len() == 2, "{} pods", pods.len());
        for pod in &pods {
            let after = view(pod);
            let old = before
                .get(&after.name)
                .with_context(|| format!("pod {} is new; before: {before:?}", after.name))?;
            ensure!(after.uid == old.uid, "{}: UID changed", after.name);
            ensure!(
                after.ip == old.ip,
                "{}: IP {} → {}",
                after.name,
                old.ip,
                after.ip
            );
            ensure!(after.node == old.node, "{}: moved nodes", after.name);
            ensure!(
                after.restarts == old.restarts + 1,
                "{}: restartCount {} → {}",
                after.name,
                old.restarts,
                after.restarts
            );
            ensure!(after.image == v2, "{}: runs {}", after.name, after.image);
            ensure!(
                after.image_id != old.image_id && !after.image_id.is_empty(),
                "{}: imageID stayed {}",
                after.name,
                after.image_id
            );
            ensure_state_kept(pod, &revision(&cs))?;
            let seen = transitions.get(&after.uid).cloned().unwrap_or_default();
            let values: Vec<(&str, &str)> = seen
                .iter()
                .map(|t| (t.status.as_str(), t.reason.as_str()))
                .collect();
            let start = seen
                .iter()
                .position(|t| t.status == "False" && t.reason == "StartInPlaceUpdate")
                .with_context(|| {
                    format!("{}: never False/StartInPlaceUpdate: {values:?}", after.name)
                })?;
            let done = seen[start..]
                .iter()
                .find(|t| t.status == "True" && t.reason == "InPlaceUpdateDone")
                .with_context(|| {
                    format!("{}: not True after the update: {values:?}", after.name)
                })?;
            ensure!(
                seen.last().is_some_and(|t| t.status == "True"),
                "{}: ends {values:?}",
                after.name
            );
            eprintln!(
                "pod {}: InPlaceUpdateReady False → True in {:?} ({values:?})",
                after.name,
                done.at.duration_since(seen[start].at)
            );
            let claim = claim_of(&ctx, name, &after.instance_id).await?;
            let old_claim = &claims_before[&after.name];
            ensure!(
                claim.1 == old_claim.1,
                "{}: claim {} replaced",
                after.name,
                claim.0
            );
            ensure!(claim.2, "{}: claim {} not bound", after.name, claim.0);
        }

        let status = cs.status.unwrap_or_default();
        ensure!(
            status.updated_replicas == 2 && status.updated_ready_replicas == 2,
            "{status:?}"
        );
        ensure!(
            status.current_revision == status.update_revision,
            "{status:?}"
        );
        wait_event(&ctx, name, "SuccessfulUpdatePodInPlace", &[]).await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn recreate_policy_replaces_pods_and_their_claims() -> Result<()> {
    run_in_namespace("cloneset-recreate-image", |ctx| async move {
        let name = "web";
        let before = create_ready(&ctx, name, 2, "ReCreate", Nodes::Kubelet).await?;
        let old_revision = revision(&ctx.api::<CloneSet>().get(name).await?);
        let mut old_claims = Vec::new();
        for pod in before.values() {
            old_claims.push(claim_of(&ctx, name, &pod.instance_id).await?);
        }
        set_image(&ctx, name, &ctx.cluster.image("web:v2")).await?;
        wait_new_revision(&ctx, name, &old_revision).await?;

        let after = views(&ctx, name).await?;
        ensure!(after.len() == 2, "{after:?}");
        for pod in after.values() {
            ensure!(
                !before.contains_key(&pod.name),
                "pod {} kept its name",
                pod.name
            );
            ensure!(
                before
                    .values()
                    .all(|b| b.uid != pod.uid && b.instance_id != pod.instance_id),
                "pod {} reuses an old pod's UID or instance id",
                pod.name
            );
            let claim = claim_of(&ctx, name, &pod.instance_id).await?;
            ensure!(claim.2, "new claim {} is not bound", claim.0);
        }
        // features.md: claims are deleted and recreated on a recreate update.
        poll_until(
            "the replaced pods' claims to be deleted",
            Duration::from_secs(60),
            || async {
                let now = pvcs(&ctx).await?;
                let left: Vec<&String> = old_claims
                    .iter()
                    .filter(|(n, u, _)| now.get(n).is_some_and(|p| uid(p) == *u))
                    .map(|(n, _, _)| n)
                    .collect();
                if left.is_empty() {
                    Ok(Some(()))
                } else {
                    bail!("still there: {left:?}")
                }
            },
        )
        .await?;
        ensure!(pvcs(&ctx).await?.len() == 2, "one claim per pod");
        wait_event(&ctx, name, "SuccessfulDelete", &["recreate update"]).await?;
        Ok(())
    })
    .await
}

/// A control plane that dies between closing a pod's gate and patching the pod for its
/// in-place update leaves `InPlaceUpdateReady=False` with no update under way (found by
/// the chaos harness: the pod stayed out of endpoints for good). The controller sets it
/// True again, as OpenKruise's `refreshCondition` does, and the pod counts ready again.
#[tokio::test]
async fn a_gate_left_closed_with_no_update_under_way_is_opened_again() -> Result<()> {
    run_in_namespace("cloneset-inplace-gate", |ctx| async move {
        let name = "web";
        let before = create_ready(&ctx, name, 1, "InPlaceIfPossible", Nodes::Kubelet).await?;
        let pod = before.keys().next().context("a pod")?.clone();
        let closed = json!({ "status": { "conditions": [{
            "type": INPLACE_UPDATE_READY, "status": "False", "reason": "StartInPlaceUpdate",
            "message": "updating in place to web-abandoned",
            "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        }]}});
        ctx.api::<Pod>()
            .patch_status(&pod, &PatchParams::default(), &Patch::Strategic(&closed))
            .await?;
        poll_until(
            &format!("{pod}'s InPlaceUpdateReady True again, and the set's pod ready"),
            ROLLOUT,
            || async {
                let gate =
                    condition_with_reason(&ctx.api::<Pod>().get(&pod).await?, INPLACE_UPDATE_READY);
                let ready = (ctx.api::<CloneSet>().get(name).await?.status)
                    .is_some_and(|s| s.ready_replicas == 1);
                Ok((ready && gate.is_some_and(|(status, _)| status == "True")).then_some(()))
            },
        )
        .await?;
        let after = views(&ctx, name).await?;
        ensure!(
            after[&pod].uid == before[&pod].uid && after[&pod].restarts == before[&pod].restarts,
            "the pod was left as it was: {:?} → {:?}",
            before[&pod],
            after[&pod]
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn non_image_change_recreates_under_in_place_if_possible() -> Result<()> {
    run_in_namespace("cloneset-inplace-env", |ctx| async move {
        let name = "web";
        let before = create_ready(&ctx, name, 2, "InPlaceIfPossible", Nodes::Kubelet).await?;
        let old_revision = revision(&ctx.api::<CloneSet>().get(name).await?);
        json_patch(
            &ctx,
            name,
            json!([{ "op": "add", "path": "/spec/template/spec/containers/0/env",
                     "value": [{ "name": "GREETING", "value": "hello" }] }]),
        )
        .await?;
        wait_new_revision(&ctx, name, &old_revision).await?;
        let after = views(&ctx, name).await?;
        ensure!(after.len() == 2, "{after:?}");
        for pod in after.values() {
            ensure!(
                before.values().all(|b| b.uid != pod.uid),
                "pod {} was not recreated",
                pod.name
            );
            ensure!(pod.restarts == 0, "pod {} restarted", pod.name);
        }
        wait_event(
            &ctx,
            name,
            "SuccessfulDelete",
            &["recreate update", "spec.containers[web].env"],
        )
        .await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn in_place_only_refuses_what_it_cannot_update_in_place() -> Result<()> {
    run_in_namespace("cloneset-inplace-only", |ctx| async move {
        let name = "web";
        let before = create_ready(&ctx, name, 2, "InPlaceOnly", Nodes::Kubelet).await?;

        // Admission (CEL) refuses a container change other than its image.
        let refused = json_patch(
            &ctx,
            name,
            json!([{ "op": "add", "path": "/spec/template/spec/containers/0/env",
                     "value": [{ "name": "GREETING", "value": "hello" }] }]),
        )
        .await;
        match refused {
            Ok(_) => bail!("the apiserver accepted an env change under InPlaceOnly"),
            Err(err) => {
                let message = err.to_string();
                ensure!(
                    message.contains("spec.template") && message.contains("InPlaceOnly"),
                    "refusal does not name the field: {message}"
                );
            }
        }

        // A pod-level field outside the containers passes admission; the controller
        // refuses it.
        json_patch(
            &ctx,
            name,
            json!([{ "op": "replace", "path": "/spec/template/spec/terminationGracePeriodSeconds",
                     "value": 2 }]),
        )
        .await?;
        let message = poll_until(
            "the FailedUpdate condition",
            Duration::from_secs(60),
            || async {
                let cs = ctx.api::<CloneSet>().get(name).await?;
                let status = cs.status.unwrap_or_default();
                let failed = status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == "FailedUpdate" && c.status == "True");
                match failed {
                    Some(c) => Ok(Some(c.message.clone())),
                    None => bail!("conditions {:?}", status.conditions),
                }
            },
        )
        .await?;
        ensure!(
            message.contains("spec.terminationGracePeriodSeconds"),
            "FailedUpdate does not name the field: {message}"
        );
        let event = wait_event(
            &ctx,
            name,
            "InPlaceOnlyRefused",
            &["spec.terminationGracePeriodSeconds"],
        )
        .await?;
        ensure!(event.type_ == "Warning", "{event:?}");

        // Give the controller a few more syncs; the pods stay as they were.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let after = views(&ctx, name).await?;
        ensure!(after.len() == 2, "{after:?}");
        for pod in after.values() {
            let old = before
                .get(&pod.name)
                .with_context(|| format!("pod {} is new", pod.name))?;
            ensure!(pod.uid == old.uid, "pod {} replaced", pod.name);
            ensure!(
                pod.image == old.image,
                "pod {} runs {}",
                pod.name,
                pod.image
            );
            ensure!(pod.restarts == old.restarts, "pod {} restarted", pod.name);
        }
        Ok(())
    })
    .await
}

/// Issue 31 item 3: under InPlaceOnly an image change made together with a claim-template
/// change updates the pods in place and keeps their claims (OpenKruise sets
/// `IgnoreVolumeClaimTemplatesHashDiff` for InPlaceOnly); only pods created later would get
/// claims from the new template.
#[tokio::test]
async fn in_place_only_updates_in_place_when_the_claim_templates_change_too() -> Result<()> {
    run_in_namespace("cloneset-inplace-only-vct", |ctx| async move {
        let name = "web";
        let before = create_ready(&ctx, name, 2, "InPlaceOnly", Nodes::Kubelet).await?;
        let old_revision = revision(&ctx.api::<CloneSet>().get(name).await?);
        let mut claims_before = BTreeMap::new();
        for pod in before.values() {
            claims_before.insert(
                pod.name.clone(),
                claim_of(&ctx, name, &pod.instance_id).await?,
            );
        }

        let v2 = ctx.cluster.image("web:v2");
        json_patch(
            &ctx,
            name,
            json!([
                { "op": "replace", "path": "/spec/template/spec/containers/0/image", "value": v2 },
                { "op": "replace",
                  "path": "/spec/volumeClaimTemplates/0/spec/resources/requests/storage",
                  "value": "2Mi" }
            ]),
        )
        .await?;
        wait_new_revision(&ctx, name, &old_revision).await?;
        let after = poll_until(
            "both pods running web:v2",
            Duration::from_secs(60),
            || async {
                let after = views(&ctx, name).await?;
                let done = after.len() == 2 && after.values().all(|p| p.image == v2);
                Ok(done.then_some(after))
            },
        )
        .await?;
        for pod in after.values() {
            let old = before
                .get(&pod.name)
                .with_context(|| format!("pod {} is new: the update recreated it", pod.name))?;
            ensure!(pod.uid == old.uid, "pod {} replaced", pod.name);
            ensure!(
                pod.restarts == old.restarts + 1,
                "{}: restartCount {} → {}",
                pod.name,
                old.restarts,
                pod.restarts
            );
            let claim = claim_of(&ctx, name, &pod.instance_id).await?;
            let old_claim = &claims_before[&pod.name];
            ensure!(
                claim.0 == old_claim.0 && claim.1 == old_claim.1,
                "{}: claim {} (UID {}) replaced by {} (UID {})",
                pod.name,
                old_claim.0,
                old_claim.1,
                claim.0,
                claim.1
            );
        }
        ensure!(
            pvcs(&ctx).await?.len() == 2,
            "one claim per pod, no new ones"
        );
        Ok(())
    })
    .await
}

async fn wait_replicas(ctx: &TestContext, name: &str, replicas: i32) -> Result<()> {
    poll_until(
        &format!("{name} to run {replicas} pods"),
        ROLLOUT,
        || async {
            let cs = ctx.api::<CloneSet>().get(name).await?;
            let status = cs.status.clone().unwrap_or_default();
            let pods = pods_of(ctx, name).await?;
            let done = cs.spec.replicas == Some(replicas)
                && status.ready_replicas == replicas
                && pods.len() == usize::try_from(replicas).unwrap_or(0);
            if done {
                Ok(Some(()))
            } else {
                bail!(
                    "spec.replicas {:?}, status {status:?}, {} pods",
                    cs.spec.replicas,
                    pods.len()
                )
            }
        },
    )
    .await
}

/// On the simulated nodes: the scale subresource is all this needs.
#[tokio::test]
async fn kubectl_scale_and_an_hpa_drive_the_scale_subresource() -> Result<()> {
    run_in_namespace("cloneset-scale-hpa", |ctx| async move {
        let name = "web";
        create_ready(&ctx, name, 2, "ReCreate", Nodes::Kwok).await?;

        ctx.kubectl(&["scale", "cloneset", name, "--replicas=1"])
            .await?;
        wait_replicas(&ctx, name, 1).await?;

        // No metrics-server: below minReplicas the HPA scales up without metrics.
        let hpa: HorizontalPodAutoscaler = serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": {
                "scaleTargetRef": { "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": name },
                "minReplicas": 3,
                "maxReplicas": 4,
            },
        }))?;
        ctx.api::<HorizontalPodAutoscaler>()
            .create(&PostParams::default(), &hpa)
            .await?;
        let conditions = poll_until(
            "the HPA to scale the CloneSet to minReplicas",
            Duration::from_secs(90),
            || async {
                let hpa = ctx.api::<HorizontalPodAutoscaler>().get(name).await?;
                let status = hpa.status.unwrap_or_default();
                let conditions = status.conditions.unwrap_or_default();
                let able = conditions
                    .iter()
                    .any(|c| c.type_ == "AbleToScale" && c.status == "True");
                if able && status.desired_replicas == 3 {
                    Ok(Some(conditions))
                } else {
                    bail!("HPA status: desired {}, {conditions:?}", status.desired_replicas)
                }
            },
        )
        .await?;
        for c in &conditions {
            eprintln!(
                "HPA condition {} = {} ({}): {}",
                c.type_,
                c.status,
                c.reason.as_deref().unwrap_or_default(),
                c.message.as_deref().unwrap_or_default()
            );
        }
        wait_replicas(&ctx, name, 3).await?;
        let cs = ctx.api::<CloneSet>().get(name).await?;
        let selector = cs.status.map(|s| s.label_selector).unwrap_or_default();
        ensure!(selector.contains(&format!("app={name}")), "labelSelector {selector:?}");
        Ok(())
    })
    .await
}

//! The CloneSet controller (running in the cluster) scaling pods on the simulated nodes:
//! pod identity and status on create, scale up / down through the spec and the scale
//! subresource, garbage collection, per-pod claims kept or dropped, pods named for
//! deletion, and a template the apiserver refuses (a quota) without a flood of creates.

use crate::cloneset_component;

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod, ResourceQuota};
use kube::ResourceExt as _;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stevedore_api::CloneSet;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use cloneset_component::{
    CONVERGE, Converged, INSTANCE_ID_LABEL, cloneset, controller_uid, create, instance_id,
    live_pods, patch, revision, wait_converged, wait_pods,
};

/// Checks what every pod of a converged set must carry.
fn check_pod_identity(name: &str, converged: &Converged) -> Result<()> {
    let cs = &converged.cloneset;
    let status = cs.status.as_ref().context("status")?;
    let uid = cs.uid().context("uid")?;
    let mut ids = BTreeSet::new();
    for pod in &converged.pods {
        let pod_name = pod.name_any();
        let id = instance_id(pod);
        ensure!(
            id.len() == 5
                && id
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
            "pod {pod_name}: instance id {id:?} is not 5 lowercase characters"
        );
        ensure!(
            pod_name == format!("{name}-{id}"),
            "pod {pod_name} is not named <set>-<instance id>"
        );
        ensure!(ids.insert(id.to_owned()), "instance id {id} used twice");
        ensure!(
            revision(pod) == status.update_revision,
            "pod {pod_name}: controller-revision-hash {} != updateRevision {}",
            revision(pod),
            status.update_revision
        );
        let owner = pod
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .with_context(|| format!("pod {pod_name} has no controller reference"))?;
        ensure!(
            owner.uid == uid && owner.kind == "CloneSet" && owner.name == name,
            "pod {pod_name}: controller reference {owner:?}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn create_scale_up_scale_down_and_delete() -> Result<()> {
    run_in_namespace("cloneset-scale-basic", |ctx| async move {
        let name = "web";
        create(&ctx, cloneset(&ctx, name, 3, json!({}))).await?;
        let converged = wait_converged(&ctx, name, 3).await?;
        check_pod_identity(name, &converged)?;
        let status = converged.cloneset.status.clone().context("status")?;
        ensure!(
            status.expected_updated_replicas == 3,
            "expectedUpdatedReplicas {}",
            status.expected_updated_replicas
        );
        ensure!(
            status.label_selector == format!("app={name}"),
            "labelSelector {:?}",
            status.label_selector
        );
        ensure!(
            status.current_revision == status.update_revision,
            "currentRevision {} != updateRevision {} after a complete rollout",
            status.current_revision,
            status.update_revision
        );
        let first: BTreeSet<String> = converged.pods.iter().map(|p| p.name_any()).collect();

        // Scale up through the spec: the first pods stay, two new ones join.
        patch(&ctx, name, json!({ "spec": { "replicas": 5 } })).await?;
        let converged = wait_converged(&ctx, name, 5).await?;
        check_pod_identity(name, &converged)?;
        let now: BTreeSet<String> = converged.pods.iter().map(|p| p.name_any()).collect();
        ensure!(
            first.is_subset(&now),
            "scaling up replaced pods: {first:?} -> {now:?}"
        );
        ensure!(
            converged
                .cloneset
                .status
                .as_ref()
                .is_some_and(|s| s.expected_updated_replicas == 5),
            "expectedUpdatedReplicas follows replicas"
        );

        // Scale down through the scale subresource, as an operator would.
        ctx.kubectl(&["scale", &format!("cloneset/{name}"), "--replicas=2"])
            .await?;
        let converged = wait_converged(&ctx, name, 2).await?;
        check_pod_identity(name, &converged)?;
        ensure!(
            converged.cloneset.spec.replicas == Some(2),
            "kubectl scale wrote spec.replicas"
        );
        let observed = converged.cloneset.status.as_ref().context("status")?;
        ensure!(
            observed.observed_generation == converged.cloneset.metadata.generation.unwrap_or(0),
            "observedGeneration"
        );

        // Deleting the set garbage-collects its pods.
        ctx.api::<CloneSet>()
            .delete(name, &DeleteParams::background())
            .await?;
        poll_until(
            "the garbage collector to delete the pods of the deleted CloneSet",
            CONVERGE,
            || async {
                let pods = cloneset_component::all_pods(&ctx, name).await?;
                if pods.is_empty() {
                    return Ok(Some(()));
                }
                bail!("pods left: {}", cloneset_component::describe(&pods))
            },
        )
        .await
    })
    .await
}

const CLAIM: &str = "data";

fn with_claims(
    ctx: &TestContext,
    name: &str,
    replicas: i32,
    disable_reuse: bool,
) -> serde_json::Value {
    cloneset(
        ctx,
        name,
        replicas,
        json!({ "spec": {
            "volumeClaimTemplates": [{
                "metadata": { "name": CLAIM },
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": { "requests": { "storage": "1Mi" } }
                }
            }],
            "scaleStrategy": { "disablePVCReuse": disable_reuse }
        } }),
    )
}

async fn claim_of(ctx: &TestContext, set: &str, id: &str) -> Result<Option<PersistentVolumeClaim>> {
    Ok(ctx
        .api::<PersistentVolumeClaim>()
        .get_opt(&format!("{CLAIM}-{set}-{id}"))
        .await?)
}

/// Checks each pod has its own claim, labelled with its instance id and owned by the set.
async fn check_claims(ctx: &TestContext, name: &str, converged: &Converged) -> Result<()> {
    let uid = converged.cloneset.uid().context("uid")?;
    for pod in &converged.pods {
        let id = instance_id(pod);
        let pvc = claim_of(ctx, name, id)
            .await?
            .with_context(|| format!("no claim {CLAIM}-{name}-{id} for pod {}", pod.name_any()))?;
        ensure!(
            pvc.labels().get(INSTANCE_ID_LABEL).map(String::as_str) == Some(id),
            "claim {} lacks instance id {id}",
            pvc.name_any()
        );
        ensure!(
            controller_uid(&pvc.metadata) == Some(uid.as_str()),
            "claim {} is not owned by the CloneSet",
            pvc.name_any()
        );
        let volume_claims: Vec<String> = pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .map(|c| c.claim_name.clone())
            .collect();
        ensure!(
            volume_claims.contains(&pvc.name_any()),
            "pod {} does not mount {}: {volume_claims:?}",
            pod.name_any(),
            pvc.name_any()
        );
    }
    let all = ctx
        .api::<PersistentVolumeClaim>()
        .list(&ListParams::default())
        .await?;
    let live = all
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count();
    ensure!(
        live == converged.pods.len(),
        "{live} claims for {} pods",
        converged.pods.len()
    );
    Ok(())
}

async fn wait_claim_gone(ctx: &TestContext, name: &str, id: &str) -> Result<()> {
    poll_until(
        &format!("claim {CLAIM}-{name}-{id} to be deleted"),
        CONVERGE,
        || async {
            match claim_of(ctx, name, id).await? {
                None => Ok(Some(())),
                Some(pvc) => bail!(
                    "still there, deletionTimestamp {:?}, finalizers {:?}",
                    pvc.metadata.deletion_timestamp,
                    pvc.metadata.finalizers
                ),
            }
        },
    )
    .await
}

#[tokio::test]
async fn claims_follow_instance_ids_and_survive_outside_deletion() -> Result<()> {
    run_in_namespace("cloneset-scale-pvc", |ctx| async move {
        let name = "db";
        create(&ctx, with_claims(&ctx, name, 2, false)).await?;
        let converged = wait_converged(&ctx, name, 2).await?;
        check_claims(&ctx, name, &converged).await?;

        // A pod deleted from outside comes back with the same instance id and claim.
        let victim = converged.pods[0].clone();
        let id = instance_id(&victim).to_owned();
        let claim_uid = claim_of(&ctx, name, &id)
            .await?
            .and_then(|c| c.uid())
            .context("claim uid")?;
        ctx.api::<Pod>()
            .delete(&victim.name_any(), &DeleteParams::default())
            .await?;
        let replacement = wait_pods(
            &ctx,
            name,
            "a replacement for the deleted pod with its instance id",
            CONVERGE,
            |pods| {
                let same_id: Vec<&Pod> = pods.iter().filter(|p| instance_id(p) == id).collect();
                Ok(match same_id.as_slice() {
                    [pod] if pod.uid() != victim.uid() => Some((*pod).clone()),
                    _ => None,
                })
            },
        )
        .await?;
        ensure!(replacement.name_any() == victim.name_any(), "same name");
        let converged = wait_converged(&ctx, name, 2).await?;
        check_claims(&ctx, name, &converged).await?;
        let reused = claim_of(&ctx, name, &id).await?.and_then(|c| c.uid());
        ensure!(
            reused.as_deref() == Some(claim_uid.as_str()),
            "the replacement got a new claim ({reused:?}), not the old one ({claim_uid})"
        );

        // Scaling down deletes the pod's claim with it.
        patch(&ctx, name, json!({ "spec": { "replicas": 1 } })).await?;
        let after = wait_converged(&ctx, name, 1).await?;
        let kept = instance_id(&after.pods[0]).to_owned();
        let gone = converged
            .pods
            .iter()
            .map(instance_id)
            .find(|i| *i != kept)
            .context("a scaled-away pod")?
            .to_owned();
        wait_claim_gone(&ctx, name, &gone).await?;
        check_claims(&ctx, name, &after).await
    })
    .await
}

#[tokio::test]
async fn disable_pvc_reuse_gives_a_new_id_and_deletes_the_old_claim() -> Result<()> {
    run_in_namespace("cloneset-scale-pvc-noreuse", |ctx| async move {
        let name = "db";
        create(&ctx, with_claims(&ctx, name, 2, true)).await?;
        let converged = wait_converged(&ctx, name, 2).await?;
        check_claims(&ctx, name, &converged).await?;

        let victim = converged.pods[0].clone();
        let old_id = instance_id(&victim).to_owned();
        let survivor = instance_id(&converged.pods[1]).to_owned();
        ctx.api::<Pod>()
            .delete(&victim.name_any(), &DeleteParams::default())
            .await?;
        wait_pods(
            &ctx,
            name,
            "a replacement with a new instance id",
            CONVERGE,
            |pods| {
                let ids: BTreeSet<&str> = pods.iter().map(instance_id).collect();
                if ids.contains(old_id.as_str()) {
                    bail!("the old instance id {old_id} was reused");
                }
                Ok((pods.len() == 2 && ids.contains(survivor.as_str())).then_some(()))
            },
        )
        .await?;
        wait_claim_gone(&ctx, name, &old_id).await?;
        let converged = wait_converged(&ctx, name, 2).await?;
        ensure!(
            converged.pods.iter().all(|p| instance_id(p) != old_id),
            "old instance id came back"
        );
        check_claims(&ctx, name, &converged).await
    })
    .await
}

#[tokio::test]
async fn pods_to_delete_and_the_specified_delete_label_replace_pods() -> Result<()> {
    run_in_namespace("cloneset-scale-podstodelete", |ctx| async move {
        let name = "web";
        create(&ctx, cloneset(&ctx, name, 3, json!({}))).await?;
        let converged = wait_converged(&ctx, name, 3).await?;

        // By name in scaleStrategy.podsToDelete.
        let named = converged.pods[0].clone();
        patch(
            &ctx,
            name,
            json!({ "spec": { "scaleStrategy": { "podsToDelete": [named.name_any()] } } }),
        )
        .await?;
        wait_pods(
            &ctx,
            name,
            "the named pod to be replaced",
            CONVERGE,
            |pods| {
                Ok((pods.len() == 3 && pods.iter().all(|p| p.uid() != named.uid())).then_some(()))
            },
        )
        .await?;
        let converged = wait_converged(&ctx, name, 3).await?;
        ensure!(
            converged.cloneset.spec.replicas == Some(3),
            "replicas unchanged"
        );
        poll_until(
            "the deleted pod's name to leave scaleStrategy.podsToDelete",
            CONVERGE,
            || async {
                let cs = ctx.api::<CloneSet>().get(name).await?;
                let list = cs.spec.scale_strategy.pods_to_delete;
                if list.is_empty() {
                    return Ok(Some(()));
                }
                bail!("podsToDelete is {list:?}")
            },
        )
        .await?;

        // By the apps.kruise.io/specified-delete label.
        let marked = converged.pods[0].clone();
        ctx.api::<Pod>()
            .patch(
                &marked.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": { "labels": {
                    "apps.kruise.io/specified-delete": "true"
                } } })),
            )
            .await?;
        wait_pods(
            &ctx,
            name,
            "the labelled pod to be replaced",
            CONVERGE,
            |pods| {
                Ok((pods.len() == 3 && pods.iter().all(|p| p.uid() != marked.uid())).then_some(()))
            },
        )
        .await?;
        let converged = wait_converged(&ctx, name, 3).await?;
        ensure!(
            converged.cloneset.spec.replicas == Some(3),
            "replicas unchanged"
        );
        Ok(())
    })
    .await
}

/// Failed creates the controller reported: the FailedCreate events on the set, counting
/// each event's repetitions.
async fn failed_create_reports(ctx: &TestContext, name: &str) -> Result<(usize, String)> {
    let events = ctx.api::<Event>().list(&ListParams::default()).await?;
    let mut total = 0;
    let mut last = String::new();
    for event in events.items {
        if event.reason.as_deref() != Some("FailedCreate")
            || event.involved_object.name.as_deref() != Some(name)
        {
            continue;
        }
        let repeats = event
            .series
            .as_ref()
            .and_then(|s| s.count)
            .or(event.count)
            .unwrap_or(1);
        total += usize::try_from(repeats.max(1)).unwrap_or(1);
        last = event.message.unwrap_or_default();
    }
    Ok((total, last))
}

#[tokio::test]
async fn a_quota_denial_backs_off_reports_failed_scale_and_recovers() -> Result<()> {
    run_in_namespace("cloneset-scale-quota", |ctx| async move {
        let quotas = ctx.api::<ResourceQuota>();
        let quota: ResourceQuota = serde_json::from_value(json!({
            "metadata": { "name": "two-pods" },
            "spec": { "hard": { "pods": "2" } }
        }))?;
        quotas.create(&PostParams::default(), &quota).await?;
        // Admission only enforces a quota once the quota controller has filled its status.
        poll_until("the quota to be tracked", Duration::from_secs(60), || async {
            let q = quotas.get("two-pods").await?;
            Ok(q.status
                .and_then(|s| s.hard)
                .is_some_and(|h| h.contains_key("pods"))
                .then_some(()))
        })
        .await?;

        let name = "web";
        create(&ctx, cloneset(&ctx, name, 10, json!({}))).await?;
        let condition = poll_until(
            "a FailedScale condition naming the quota",
            CONVERGE,
            || async {
                let cs = ctx.api::<CloneSet>().get(name).await?;
                let conditions = cs.status.map(|s| s.conditions).unwrap_or_default();
                let failed = conditions.into_iter().find(|c| c.type_ == "FailedScale");
                match failed {
                    Some(c) if c.status == "True" && c.message.contains("quota") => Ok(Some(c)),
                    other => bail!("FailedScale is {other:?}"),
                }
            },
        )
        .await?;
        ensure!(
            condition.message.contains("two-pods"),
            "the message names the quota: {}",
            condition.message
        );

        // Let the controller retry for a while; backoff keeps the attempts few.
        let watch = Duration::from_secs(15);
        tokio::time::sleep(watch).await;
        let (attempts, message) = failed_create_reports(&ctx, name).await?;
        let pods = live_pods(&ctx, name).await?;
        ensure!(pods.len() == 2, "the quota allows 2 pods, found {}", pods.len());
        ensure!(
            (1..=15).contains(&attempts),
            "{attempts} failed create reports within ~{watch:?} (a flood; expected a backoff): {message}"
        );

        quotas.delete("two-pods", &DeleteParams::default()).await?;
        let converged = wait_converged(&ctx, name, 10).await?;
        let conditions = &converged.cloneset.status.as_ref().context("status")?.conditions;
        ensure!(
            conditions.iter().all(|c| c.type_ != "FailedScale"),
            "FailedScale cleared once the pods could be created: {conditions:?}"
        );
        Ok(())
    })
    .await
}

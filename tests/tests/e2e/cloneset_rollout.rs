//! The CloneSet controller (running in the cluster) rolling a template change over pods on
//! the simulated nodes with `ReCreate`: partition (number and percent), pause, and
//! maxUnavailable observed from a pod watch for the whole rollout.

use crate::cloneset_component;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::runtime::watcher;
use serde_json::json;
use stevedore_api::CloneSet;
use stevedore_tests::pods::is_running_and_ready;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use cloneset_component::{
    CONVERGE, by_revision, cloneset, create, describe, live_pods, patch, revision, set_image,
    wait_converged,
};

/// Waits until the controller has observed the latest generation with an update revision
/// other than `old`, and the pods are `updated` on it plus `kept` on `old`, all ready.
async fn wait_split(
    ctx: &TestContext,
    name: &str,
    old: &str,
    updated: usize,
    kept: usize,
) -> Result<CloneSet> {
    let what = format!("{updated} pods on the new revision and {kept} on {old}");
    poll_until(&what, CONVERGE, || async {
        let cs = ctx.api::<CloneSet>().get(name).await?;
        let status = cs.status.clone().unwrap_or_default();
        let pods = live_pods(ctx, name).await?;
        let counts = by_revision(&pods);
        let new_rev = status.update_revision.as_str();
        let ok = status.observed_generation == cs.metadata.generation.unwrap_or(0)
            && new_rev != old
            && pods.len() == updated + kept
            && pods.iter().all(is_running_and_ready)
            && counts.get(new_rev).copied().unwrap_or(0) == updated
            && counts.get(old).copied().unwrap_or(0) == kept
            && usize::try_from(status.updated_replicas).ok() == Some(updated)
            && usize::try_from(status.updated_ready_replicas).ok() == Some(updated);
        if ok {
            return Ok(Some(cs));
        }
        bail!(
            "updateRevision {new_rev}, updatedReplicas {}, pods by revision {counts:?}: {}",
            status.updated_replicas,
            describe(&pods)
        )
    })
    .await
}

#[tokio::test]
async fn partition_keeps_old_pods_until_lowered_and_takes_percentages() -> Result<()> {
    run_in_namespace("cloneset-rollout-partition", |ctx| async move {
        let name = "web";
        let spec = json!({ "spec": { "updateStrategy": { "partition": 2, "maxUnavailable": 2 } } });
        create(&ctx, cloneset(&ctx, name, 4, spec)).await?;
        let v1 = wait_converged(&ctx, name, 4).await?;
        let rev1 = v1.cloneset.status.context("status")?.update_revision;

        set_image(&ctx, name, "web:v2").await?;
        let cs = wait_split(&ctx, name, &rev1, 2, 2).await?;
        let status = cs.status.context("status")?;
        let rev2 = status.update_revision.clone();
        ensure!(
            status.expected_updated_replicas == 2,
            "expectedUpdatedReplicas {}",
            status.expected_updated_replicas
        );
        ensure!(
            status.current_revision == rev1,
            "currentRevision {} stays {rev1} while the partition holds pods back",
            status.current_revision
        );
        // The partition holds: nothing more moves.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let pods = live_pods(&ctx, name).await?;
        let counts = by_revision(&pods);
        ensure!(
            counts.get(&rev2) == Some(&2) && counts.get(&rev1) == Some(&2),
            "the split moved while the partition held: {counts:?}"
        );

        patch(
            &ctx,
            name,
            json!({ "spec": { "updateStrategy": { "partition": 0 } } }),
        )
        .await?;
        let done = wait_converged(&ctx, name, 4).await?;
        let status = done.cloneset.status.context("status")?;
        ensure!(status.update_revision == rev2, "update revision kept");
        ensure!(
            status.current_revision == rev2,
            "currentRevision {} follows a finished rollout",
            status.current_revision
        );

        // "50%" of 4 keeps 2 pods on the current revision.
        patch(
            &ctx,
            name,
            json!({ "spec": { "updateStrategy": { "partition": "50%" } } }),
        )
        .await?;
        set_image(&ctx, name, "web:v1").await?;
        let cs = wait_split(&ctx, name, &rev2, 2, 2).await?;
        let status = cs.status.context("status")?;
        ensure!(
            status.expected_updated_replicas == 2,
            "expectedUpdatedReplicas {} for 50% of 4",
            status.expected_updated_replicas
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn paused_updates_nothing_but_still_scales() -> Result<()> {
    run_in_namespace("cloneset-rollout-paused", |ctx| async move {
        let name = "web";
        create(&ctx, cloneset(&ctx, name, 2, json!({}))).await?;
        let v1 = wait_converged(&ctx, name, 2).await?;
        let rev1 = v1.cloneset.status.context("status")?.update_revision;

        let image = ctx.cluster.image("web:v2");
        patch(
            &ctx,
            name,
            json!({ "spec": {
                "updateStrategy": { "paused": true },
                "template": { "spec": { "containers": [{ "name": "web", "image": image }] } }
            } }),
        )
        .await?;
        let rev2 = poll_until("the new update revision", CONVERGE, || async {
            let cs = ctx.api::<CloneSet>().get(name).await?;
            let status = cs.status.unwrap_or_default();
            let seen = status.observed_generation == cs.metadata.generation.unwrap_or(0);
            Ok((seen && status.update_revision != rev1).then_some(status.update_revision))
        })
        .await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let pods = live_pods(&ctx, name).await?;
        ensure!(
            pods.len() == 2 && pods.iter().all(|p| revision(p) == rev1),
            "a paused CloneSet updated pods: {}",
            describe(&pods)
        );

        // Scaling still works while paused; the new pod is on the update revision.
        patch(&ctx, name, json!({ "spec": { "replicas": 3 } })).await?;
        cloneset_component::wait_pods(
            &ctx,
            name,
            "a third pod, on the update revision, while paused",
            CONVERGE,
            |pods| {
                let counts = by_revision(pods);
                let ready = pods.iter().all(is_running_and_ready);
                Ok(
                    (ready && counts.get(&rev1) == Some(&2) && counts.get(&rev2) == Some(&1))
                        .then_some(()),
                )
            },
        )
        .await?;

        patch(
            &ctx,
            name,
            json!({ "spec": { "updateStrategy": { "paused": false } } }),
        )
        .await?;
        let done = wait_converged(&ctx, name, 3).await?;
        ensure!(
            done.pods.iter().all(|p| revision(p) == rev2),
            "unpausing rolled every pod"
        );
        Ok(())
    })
    .await
}

/// The most pods missing or not ready (out of `replicas`) at any event of a pod watch.
#[derive(Default)]
struct Unavailability {
    pods: BTreeMap<String, Pod>,
    synced: bool,
    max_missing: usize,
    worst: String,
}

impl Unavailability {
    fn observe(&mut self, replicas: usize) {
        if !self.synced {
            return;
        }
        let serving = self
            .pods
            .values()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && is_running_and_ready(p))
            .count();
        let missing = replicas.saturating_sub(serving);
        if missing > self.max_missing {
            self.max_missing = missing;
            let pods: Vec<Pod> = self.pods.values().cloned().collect();
            self.worst = describe(&pods);
        }
    }
}

#[tokio::test]
async fn max_unavailable_bounds_a_recreate_rollout() -> Result<()> {
    run_in_namespace("cloneset-rollout-maxunavailable", |ctx| async move {
        let name = "web";
        let replicas = 4;
        const REPLICAS: usize = 4;
        let spec = json!({ "spec": { "updateStrategy": { "maxUnavailable": 1 } } });
        create(&ctx, cloneset(&ctx, name, replicas, spec)).await?;
        let v1 = wait_converged(&ctx, name, replicas).await?;
        let rev1 = v1.cloneset.status.context("status")?.update_revision;

        let seen = Arc::new(Mutex::new(Unavailability::default()));
        let config = watcher::Config::default().labels(&format!("app={name}"));
        let stream = watcher(ctx.api::<Pod>(), config);
        let recorder = seen.clone();
        let watch = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let Ok(event) = event else { continue };
                let mut seen = recorder.lock().unwrap_or_else(|e| e.into_inner());
                match event {
                    watcher::Event::Init => seen.pods.clear(),
                    watcher::Event::InitApply(pod) | watcher::Event::Apply(pod) => {
                        seen.pods.insert(pod.uid().unwrap_or_default(), pod);
                    }
                    watcher::Event::Delete(pod) => {
                        seen.pods.remove(&pod.uid().unwrap_or_default());
                    }
                    watcher::Event::InitDone => seen.synced = true,
                }
                seen.observe(REPLICAS);
            }
        });
        poll_until("the pod watch to sync", Duration::from_secs(30), || async {
            let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            Ok((seen.synced && seen.pods.len() == 4).then_some(()))
        })
        .await?;

        set_image(&ctx, name, "web:v2").await?;
        let done = wait_converged(&ctx, name, replicas).await;
        watch.abort();
        let done = done?;
        ensure!(
            done.pods.iter().all(|p| revision(p) != rev1),
            "every pod recreated on the new revision"
        );
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        ensure!(
            seen.max_missing >= 1,
            "the watch never saw a pod missing: a ReCreate rollout must delete pods"
        );
        ensure!(
            seen.max_missing <= 1,
            "{} pods missing or not ready at once with maxUnavailable 1: {}",
            seen.max_missing,
            seen.worst
        );
        Ok(())
    })
    .await
}

//! The one pre-download rule of every pod-set kind (`predownload::workload::pre_pulls`),
//! on an Advanced StatefulSet on the simulated (kwok) nodes: a paused in-place rollout
//! still pre-pulls its new image — an ImagePullJob controlled by the set, for the new
//! image, appears while the pause keeps every pod on the old one — as OpenKruise's
//! CloneSet, Advanced StatefulSet and Advanced DaemonSet do (none of them checks
//! `paused`; the resume then finds the image on the nodes).

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stevedore_controlplane::api::{ImagePullJob, StatefulSet};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

const REPLICAS: usize = 4;

/// Four pods at once on the simulated nodes, updated in place, the rollout paused.
fn paused_set(ctx: &TestContext) -> Result<StatefulSet> {
    let object = json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "StatefulSet",
        "metadata": { "name": "web" },
        "spec": {
            "replicas": REPLICAS,
            "serviceName": "web",
            "podManagementPolicy": "Parallel",
            "selector": { "matchLabels": { "app": "web" } },
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": { "podUpdatePolicy": "InPlaceIfPossible", "paused": true }
            },
            "template": {
                "metadata": { "labels": { "app": "web" } },
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
    serde_json::from_value(object).context("a valid StatefulSet")
}

/// The images of the set's pods.
async fn pod_images(ctx: &TestContext) -> Result<Vec<String>> {
    let pods = ctx
        .api::<Pod>()
        .list(&ListParams::default().labels("app=web"))
        .await?;
    Ok((pods.items.iter())
        .filter_map(|p| p.spec.as_ref()?.containers.first()?.image.clone())
        .collect())
}

#[tokio::test]
async fn a_paused_in_place_rollout_pre_pulls_its_new_image() -> Result<()> {
    run_in_namespace("sts-predownload", |ctx| async move {
        let sets = ctx.api::<StatefulSet>();
        let set = sets
            .create(&PostParams::default(), &paused_set(&ctx)?)
            .await?;
        let (v1, v2) = (ctx.cluster.image("web:v1"), ctx.cluster.image("web:v2"));
        poll_until("4 pods on v1", Duration::from_secs(60), || {
            let (ctx, v1) = (&ctx, v1.clone());
            async move {
                let images = pod_images(ctx).await?;
                Ok((images.len() == REPLICAS && images.iter().all(|i| *i == v1)).then_some(()))
            }
        })
        .await?;

        let template = json!({ "spec": { "template": { "spec": {
            "containers": [{ "name": "web", "image": v2 }] } } } });
        sets.patch("web", &PatchParams::default(), &Patch::Merge(template))
            .await?;

        let uid = set.uid().unwrap_or_default();
        let jobs = ctx.api::<ImagePullJob>();
        let job = poll_until(
            "an ImagePullJob of the paused set for web:v2",
            Duration::from_secs(60),
            || {
                let (jobs, uid, v2) = (jobs.clone(), uid.clone(), v2.clone());
                async move {
                    let list = jobs.list(&ListParams::default()).await?.items;
                    Ok(list.into_iter().find(|job| {
                        let controlled = (job.owner_references().iter())
                            .any(|o| o.controller == Some(true) && o.uid == uid);
                        controlled && job.spec.image == v2
                    }))
                }
            },
        )
        .await?;
        let images = pod_images(&ctx).await?;
        ensure!(
            images.len() == REPLICAS && images.iter().all(|i| *i == v1),
            "the pause keeps every pod on v1 while {} pre-pulls: {images:?}",
            job.name_any()
        );
        Ok(())
    })
    .await
}

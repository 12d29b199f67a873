//! Image pre-download for a CloneSet's in-place rollout, on simulated nodes whose agents
//! really pull: once the first updated pod is ready (min-updated-ready-pods 1), the
//! control plane creates an ImagePullJob owned by the CloneSet whose entries land on the
//! nodes of the pods still on the old revision — and only there — where the agents pull
//! the new image (status Succeeded with an image ID) while those pods are still waiting
//! behind the partition. When the rollout converges the job and its entries are gone.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stevedore_api::imagelist::ImagePullPhase;
use stevedore_api::{CloneSet, ImageList, ImagePullJob};
use stevedore_tests::kept_watch::{Kept, keep_watching};
use stevedore_tests::pods::condition;
use stevedore_tests::sim::SimAgents;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use crate::cloneset_support;
use cloneset_support::{image_of, node_of, pods_of, sim_cloneset};

const V1: &str = "web:v1";
const V2: &str = "web:v2";
const NODES: usize = 4;

fn cloneset(ctx: &TestContext, prefix: &str) -> Result<CloneSet> {
    // One pod per node; one pod updates first, the other three wait behind the partition.
    let strategy = json!({ "type": "InPlaceIfPossible", "partition": 3, "maxUnavailable": 1 });
    let mut object = sim_cloneset(ctx, prefix, NODES as i32, strategy);
    object["metadata"]["annotations"] = json!({
        "apps.kruise.io/image-predownload-parallelism": "2",
        "apps.kruise.io/image-predownload-min-updated-ready-pods": "1"
    });
    Ok(serde_json::from_value(object)?)
}

fn updated_and_ready(pod: &Pod, want: &str) -> bool {
    image_of(pod) == want
        && condition(pod, "Ready").as_deref() == Some("True")
        && condition(pod, "InPlaceUpdateReady").as_deref() == Some("True")
        && !cloneset_support::in_place_update_pending(pod)
}

/// What a watch on the simulated nodes' ImageLists saw of one image.
#[derive(Default, Debug)]
struct Seen {
    /// Nodes whose ImageList spec had the image.
    entry: BTreeSet<String>,
    /// Nodes whose ImageList status had the image Succeeded with an image ID.
    succeeded: BTreeSet<String>,
}

/// Follows every ImageList of nodes `<prefix>-*` and keeps what happened to `image`.
fn watch_image(ctx: &TestContext, prefix: &str, image: String) -> Kept<Seen> {
    let lists: Api<ImageList> = Api::all(ctx.client.clone());
    let prefix = format!("{prefix}-");
    keep_watching(lists, move |seen: &mut Seen, list| {
        let name = list.name_any();
        if !name.starts_with(&prefix) {
            return;
        }
        if list.spec.images.contains_key(&image) {
            seen.entry.insert(name.clone());
        }
        let pulled = list
            .status
            .as_ref()
            .and_then(|s| s.images.get(&image))
            .is_some_and(|s| s.phase == ImagePullPhase::Succeeded && !s.image_id.is_empty());
        if pulled {
            seen.succeeded.insert(name);
        }
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn new_images_are_pulled_on_the_nodes_of_pods_still_to_update() -> Result<()> {
    run_in_namespace("cs-predownload", |ctx| async move {
        let prefix = format!("{}-n", ctx.namespace);
        let sim = SimAgents::up(ctx.cluster, &prefix, NODES)?;
        let sets = ctx.api::<CloneSet>();
        let jobs = ctx.api::<ImagePullJob>();
        sets.create(&PostParams::default(), &cloneset(&ctx, &prefix)?)
            .await?;
        let v1 = ctx.cluster.image(V1);
        let v2 = ctx.cluster.image(V2);
        poll_until("4 pods on v1, ready, one per node", Duration::from_secs(90), || {
            let (ctx, v1) = (&ctx, v1.clone());
            async move {
                let pods = pods_of(ctx, "web").await?;
                let nodes: BTreeSet<String> = pods.iter().map(|p| node_of(p).to_owned()).collect();
                Ok((pods.len() == NODES
                    && nodes.len() == NODES
                    && pods.iter().all(|p| updated_and_ready(p, &v1)))
                .then_some(()))
            }
        })
        .await?;
        let seen = watch_image(&ctx, &prefix, v2.clone());

        sets.patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "template": { "spec": {
                "containers": [{ "name": "web", "image": v2 }] } } } })),
        )
        .await?;

        // The pre-download job finishes on the three nodes of the old pods.
        let job = poll_until(
            "the CloneSet's pre-download ImagePullJob to finish on 3 nodes",
            Duration::from_secs(120),
            || {
                let jobs = jobs.clone();
                async move {
                    let list = jobs.list(&ListParams::default()).await?.items;
                    Ok(list.into_iter().find(|job| {
                        job.status.as_ref().is_some_and(|s| {
                            s.completion_time.is_some() && s.desired == 3 && s.succeeded == 3
                        })
                    }))
                }
            },
        )
        .await?;
        let cs = sets.get("web").await?;
        let owner = job
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .context("the job has no controller")?;
        ensure!(
            owner.kind == "CloneSet" && owner.uid == cs.uid().unwrap_or_default(),
            "the job should be controlled by the CloneSet: {owner:?}"
        );
        let update_revision = cs
            .status
            .as_ref()
            .map(|s| s.update_revision.clone())
            .unwrap_or_default();
        ensure!(
            job.name_any() == format!("{update_revision}-web") && job.spec.image == v2,
            "job {} pulls {} (want {update_revision}-web pulling {v2})",
            job.name_any(),
            job.spec.image
        );

        let pods_now = pods_of(&ctx, "web").await?;
        let old: BTreeSet<String> = pods_now
            .iter()
            .filter(|p| image_of(p) == v1)
            .map(|p| node_of(p).to_owned())
            .collect();
        let updated: BTreeSet<String> = pods_now
            .iter()
            .filter(|p| image_of(p) == v2)
            .map(|p| node_of(p).to_owned())
            .collect();
        ensure!(
            old.len() == 3 && updated.len() == 1,
            "the partition should hold 3 pods on v1 while pre-download runs: old {old:?}, updated {updated:?}"
        );
        {
            let seen = seen.lock()?;
            ensure!(
                seen.succeeded == old,
                "the new image should be Succeeded on exactly the old pods' nodes {old:?}; saw {:?}",
                seen.succeeded
            );
            ensure!(
                seen.entry.is_disjoint(&updated),
                "the updated pod's node {updated:?} should get no pre-download entry; entries on {:?}",
                seen.entry
            );
        }
        let revision = ctx
            .api::<ControllerRevision>()
            .get(&update_revision)
            .await?;
        ensure!(
            revision.labels().get("apps.kruise.io/image-predownload-created").map(String::as_str)
                == Some("true"),
            "the update revision should be marked as pre-downloaded: {:?}",
            revision.labels()
        );
        let events = ctx.api::<Event>().list(&ListParams::default()).await?.items;
        ensure!(
            events.iter().any(|e| e.reason.as_deref() == Some("PreDownloadImage")
                && e.message.as_deref().is_some_and(|m| m.contains(&v2))),
            "no PreDownloadImage event naming {v2}"
        );

        // Roll the rest; on convergence the job goes, and with it every entry.
        sets.patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "updateStrategy": { "partition": 0 } } })),
        )
        .await?;
        poll_until("all pods on v2 and no pre-download job left", Duration::from_secs(120), || {
            let (ctx, jobs, v2) = (&ctx, jobs.clone(), v2.clone());
            async move {
                let pods = pods_of(ctx, "web").await?;
                let done = pods.len() == NODES && pods.iter().all(|p| updated_and_ready(p, &v2));
                let left = jobs.list(&ListParams::default()).await?.items.len();
                Ok((done && left == 0).then_some(()))
            }
        })
        .await?;
        let lists: Api<ImageList> = Api::all(ctx.client.clone());
        poll_until("the pre-download entries to leave the ImageLists", Duration::from_secs(60), || {
            let (lists, sim, v2) = (lists.clone(), &sim, v2.clone());
            async move {
                let mut holding = BTreeMap::new();
                for i in 0..NODES {
                    let list = lists.get(&sim.node(i)).await?;
                    if list.spec.images.contains_key(&v2) {
                        holding.insert(sim.node(i), ());
                    }
                }
                Ok(holding.is_empty().then_some(()))
            }
        })
        .await?;
        sets.delete("web", &Default::default()).await?;
        drop(sim);
        Ok(())
    })
    .await
}

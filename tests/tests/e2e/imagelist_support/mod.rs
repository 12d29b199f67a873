//! Shared by the ImageList suites: ImageLists as a test writes and reads them, and the
//! cluster's containerd as a test checks what was pulled into it.

#![allow(dead_code, reason = "each suite uses its own subset of these helpers")]

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use stevedore_api::ImageList;
use stevedore_api::imagelist::ImageStatus;

use stevedore_tests::sim::SimAgents;
use stevedore_tests::{ClusterInfo, TestContext, poll_until};

/// Applies `images` to `node`'s ImageList as field manager `manager`: the manager's
/// entries become exactly these, other writers' entries are left alone.
pub async fn apply(client: &kube::Client, node: &str, manager: &str, images: Value) -> Result<()> {
    let lists: Api<ImageList> = Api::all(client.clone());
    let body = json!({
        "apiVersion": "stevedore.dev/v1alpha1",
        "kind": "ImageList",
        "metadata": { "name": node },
        "spec": { "images": images }
    });
    lists
        .patch(
            node,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&body),
        )
        .await?;
    Ok(())
}

/// Waits for the distributor to have made `node`'s ImageList.
pub async fn list_exists(client: &kube::Client, node: &str) -> Result<()> {
    let lists: Api<ImageList> = Api::all(client.clone());
    poll_until(
        &format!("the ImageList of node {node}"),
        Duration::from_secs(60),
        || {
            let lists = lists.clone();
            async move { Ok(lists.get_opt(node).await?.map(|_| ())) }
        },
    )
    .await
}

/// The status of `image` in `node`'s ImageList, if it has one.
pub async fn image_status(
    client: &kube::Client,
    node: &str,
    image: &str,
) -> Result<Option<ImageStatus>> {
    let lists: Api<ImageList> = Api::all(client.clone());
    let list = lists.get(node).await?;
    Ok(list.status.and_then(|s| s.images.get(image).cloned()))
}

fn ctr(cluster: &ClusterInfo, args: &[&str]) -> Result<std::process::Output> {
    Command::new("ctr")
        .arg("--address")
        .arg(&cluster.containerd_sock)
        .args(["-n", "k8s.io"])
        .args(args)
        .output()
        .context("running ctr")
}

/// Removes the image records `names` from containerd and waits for garbage collection,
/// so content only they held is gone; absent records are fine.
pub fn remove_from_containerd(cluster: &ClusterInfo, names: &[String]) -> Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    let mut args = vec!["images", "rm", "--sync"];
    args.extend(names.iter().map(String::as_str));
    let output = ctr(cluster, &args)?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(
        output.status.success() || stderr.contains("not found"),
        "ctr images rm {names:?}: {stderr}"
    );
    Ok(())
}

/// The names of every image record in containerd.
pub fn containerd_images(cluster: &ClusterInfo) -> Result<Vec<String>> {
    let output = ctr(cluster, &["images", "ls", "-q"])?;
    ensure!(
        output.status.success(),
        "ctr images ls: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

pub fn in_containerd(cluster: &ClusterInfo, image: &str) -> Result<bool> {
    Ok(containerd_images(cluster)?.iter().any(|name| name == image))
}

/// Whether containerd holds all of `image`'s content (`ctr images check`).
pub fn complete_in_containerd(cluster: &ClusterInfo, image: &str) -> Result<bool> {
    let output = ctr(cluster, &["images", "check", &format!("name=={image}")])?;
    ensure!(
        output.status.success(),
        "ctr images check: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let out = String::from_utf8_lossy(&output.stdout);
    Ok(out.contains("complete") && !out.contains("incomplete"))
}

/// The reason of the control plane's pull-failure Events.
pub const FAILED_PULL_REASON: &str = "FailedPullImage";

/// The pull-failure Events on `node` about `image` (Events about cluster-scoped objects
/// live in `default`).
pub async fn failure_events(client: &kube::Client, node: &str, image: &str) -> Result<Vec<Event>> {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let selector =
        format!("involvedObject.kind=Node,involvedObject.name={node},reason={FAILED_PULL_REASON}");
    let listed = events
        .list(&ListParams::default().fields(&selector))
        .await?;
    Ok(listed
        .items
        .into_iter()
        .filter(|e| e.message.as_deref().is_some_and(|m| m.contains(image)))
        .collect())
}

/// The failure messages recorded more than once, each as "<times>× <message>" (an Event's
/// series counts as repeats): a retry or a replay failing the same way must add none. A
/// later attempt failing another way (the registry answering otherwise under load) is an
/// Event of its own, and no repeat.
pub fn repeated_failures(events: &[Event]) -> Vec<String> {
    let mut recorded: std::collections::BTreeMap<&str, i32> = Default::default();
    for event in events {
        let note = event.message.as_deref().unwrap_or_default();
        // "Failed to pull image "<image>" (<n> attempts): <message>"
        let message = note.split_once("): ").map_or(note, |(_, message)| message);
        *recorded.entry(message).or_default() += times_recorded(event);
    }
    (recorded.into_iter())
        .filter(|(_, times)| *times > 1)
        .map(|(message, times)| format!("{times}× {message}"))
        .collect()
}

/// How many times an Event was recorded: its series count, or its legacy count.
pub fn times_recorded(event: &Event) -> i32 {
    let series = event.series.as_ref().and_then(|s| s.count).unwrap_or(1);
    series.max(event.count.unwrap_or(1))
}

/// One simulated node (a real agent process) whose ImageList asks, as field manager
/// `manager`, for an image no registry has: the set-up of the pull-failure suites.
pub struct MissingImage {
    /// The simulated node; it goes down when this is dropped.
    pub sim: SimAgents,
    pub node: String,
    pub image: String,
    manager: String,
}

impl MissingImage {
    /// Brings up one simulated node named after `prefix` and the test's run, waits for its
    /// ImageList, and asks it for a missing image that fails for good after
    /// `backoff_limit` retries.
    pub async fn on_sim_node(
        ctx: &TestContext,
        prefix: &str,
        manager: &str,
        backoff_limit: i32,
    ) -> Result<Self> {
        let run = ctx.namespace.rsplit('-').next().unwrap_or_default();
        let sim = SimAgents::up(ctx.cluster, &format!("{prefix}-{run}"), 1)?;
        let node = sim.node(0);
        let image = ctx.cluster.image(&format!("{prefix}-missing-{run}:v1"));
        let missing = Self {
            sim,
            node,
            image,
            manager: manager.to_owned(),
        };
        list_exists(&ctx.client, &missing.node).await?;
        missing.ask(&ctx.client, backoff_limit).await?;
        Ok(missing)
    }

    /// Asks for the image again with `backoff_limit` (a spec change the agent is sent).
    pub async fn ask(&self, client: &kube::Client, backoff_limit: i32) -> Result<()> {
        let images = json!({ self.image.clone(): { "backoffLimit": backoff_limit } });
        apply(client, &self.node, &self.manager, images).await
    }

    /// Takes the entry out of the ImageList and the simulated node down.
    pub async fn remove(self, client: &kube::Client) -> Result<()> {
        apply(client, &self.node, &self.manager, json!({})).await
    }
}

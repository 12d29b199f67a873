//! Shared by the CloneSet component suites: a CloneSet whose pods land on the simulated
//! (kwok) nodes, and bounded waits on what the in-cluster controller makes of it.
//!
//! kwok marks pods Running and Ready without running containers, so every test here
//! exercises the controller against the real apiserver, scheduler and garbage collector
//! at the speed of the API alone. Pods use `ReCreate`: in-place updates need a node agent,
//! which simulated nodes do not have.

#![allow(dead_code)] // each suite uses its own subset

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::CloneSet;
use stevedore_tests::pods::is_running_and_ready;
use stevedore_tests::{TestContext, poll_until};

pub const INSTANCE_ID_LABEL: &str = "apps.kruise.io/cloneset-instance-id";
pub const REVISION_LABEL: &str = "controller-revision-hash";
pub const STATE_LABEL: &str = "lifecycle.apps.kruise.io/state";
/// How long the controller gets to converge after a change (it may be failing over).
pub const CONVERGE: Duration = Duration::from_secs(90);

/// A CloneSet of `replicas` pods of web:v1 on the kwok nodes, `ReCreate` updates, with
/// `overrides` merged over it (RFC 7386: `null` removes a field).
pub fn cloneset(ctx: &TestContext, name: &str, replicas: i32, overrides: Value) -> Value {
    let mut object = json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": { "name": name },
        "spec": {
            "replicas": replicas,
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
            },
            "updateStrategy": { "type": "ReCreate" }
        }
    });
    merge(&mut object, overrides);
    object
}

/// RFC 7386 merge of `patch` into `target`.
pub fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(&key);
                } else {
                    merge(target.entry(key).or_insert(Value::Null), value);
                }
            }
        }
        (target, patch) => *target = patch,
    }
}

pub async fn create(ctx: &TestContext, object: Value) -> Result<CloneSet> {
    let cloneset: CloneSet = serde_json::from_value(object).context("a valid CloneSet")?;
    Ok(ctx
        .api::<CloneSet>()
        .create(&PostParams::default(), &cloneset)
        .await?)
}

/// Merge-patches the CloneSet `name` with `patch` (a whole-object patch).
pub async fn patch(ctx: &TestContext, name: &str, patch: Value) -> Result<CloneSet> {
    Ok(ctx
        .api::<CloneSet>()
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?)
}

/// Sets the container image of the template to the test image `tag` (`web:v2`).
pub async fn set_image(ctx: &TestContext, name: &str, tag: &str) -> Result<CloneSet> {
    let image = ctx.cluster.image(tag);
    // A merge patch replaces the one-container list whole; the base has nothing else in it.
    Ok(ctx
        .api::<CloneSet>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "template": { "spec": {
                "containers": [{ "name": "web", "image": image }]
            } } } })),
        )
        .await?)
}

/// Every pod carrying the set's `app` label, terminating ones included.
pub async fn all_pods(ctx: &TestContext, name: &str) -> Result<Vec<Pod>> {
    let lp = ListParams::default().labels(&format!("app={name}"));
    Ok(ctx.api::<Pod>().list(&lp).await?.items)
}

/// The set's pods that are not being deleted.
pub async fn live_pods(ctx: &TestContext, name: &str) -> Result<Vec<Pod>> {
    Ok(all_pods(ctx, name)
        .await?
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

pub fn label<'p>(pod: &'p Pod, key: &str) -> Option<&'p str> {
    pod.labels().get(key).map(String::as_str)
}

pub fn revision(pod: &Pod) -> &str {
    label(pod, REVISION_LABEL).unwrap_or_default()
}

pub fn instance_id(pod: &Pod) -> &str {
    label(pod, INSTANCE_ID_LABEL).unwrap_or_default()
}

/// The controller ownerReference's uid, if any.
pub fn controller_uid(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// A one-line summary of pods for timeout messages.
pub fn describe(pods: &[Pod]) -> String {
    let mut lines: Vec<String> = pods
        .iter()
        .map(|p| {
            format!(
                "{}[rev={} ready={} state={} deleting={}]",
                p.name_any(),
                revision(p),
                is_running_and_ready(p),
                label(p, STATE_LABEL).unwrap_or("-"),
                p.metadata.deletion_timestamp.is_some()
            )
        })
        .collect();
    lines.sort();
    lines.join(", ")
}

/// What `wait_converged` returns: the set and its pods once they agree.
pub struct Converged {
    pub cloneset: CloneSet,
    pub pods: Vec<Pod>,
}

/// Waits until the controller has observed the latest generation, `replicas` pods exist,
/// all Running and Ready on the update revision, and the status counts say so.
pub async fn wait_converged(ctx: &TestContext, name: &str, replicas: i32) -> Result<Converged> {
    let what = format!("CloneSet {name} to converge on {replicas} ready, updated pods");
    poll_until(&what, CONVERGE, || async {
        let cs = ctx.api::<CloneSet>().get(name).await?;
        let pods = live_pods(ctx, name).await?;
        let status = cs.status.clone().unwrap_or_default();
        let generation = cs.metadata.generation.unwrap_or(0);
        let count = i32::try_from(pods.len()).unwrap_or(i32::MAX);
        let pods_ok = count == replicas
            && pods
                .iter()
                .all(|p| is_running_and_ready(p) && revision(p) == status.update_revision);
        let status_ok = status.observed_generation == generation
            && status.replicas == replicas
            && status.ready_replicas == replicas
            && status.available_replicas == replicas
            && status.updated_replicas == replicas
            && status.updated_ready_replicas == replicas
            && !status.update_revision.is_empty();
        if pods_ok && status_ok {
            return Ok(Some(Converged { cloneset: cs, pods }));
        }
        bail!(
            "generation {generation}, status {}; pods: {}",
            serde_json::to_string(&status).unwrap_or_default(),
            describe(&pods)
        )
    })
    .await
}

/// Polls the live pods until `check` accepts them; `check` explains a refusal via `Err`.
pub async fn wait_pods<T>(
    ctx: &TestContext,
    name: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&[Pod]) -> Result<Option<T>>,
) -> Result<T> {
    poll_until(what, timeout, || async {
        let pods = live_pods(ctx, name).await?;
        check(&pods).with_context(|| describe(&pods))
    })
    .await
}

/// Counts pods by revision label.
pub fn by_revision(pods: &[Pod]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for pod in pods {
        *counts.entry(revision(pod).to_owned()).or_insert(0) += 1;
    }
    counts
}

//! `rollout restart`, `set image|env|resources`, `scale` and `scaledown`: read the
//! workload, compute the change with the pure functions beside this file, write it back
//! conditional on the resourceVersion read, and say how the pods will take it.

mod conflict;
pub mod replicas;
pub mod strategy;
pub mod template;

use anyhow::{Result, anyhow};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;

use crate::apiserver;
use crate::cli::{Output, SetCommand};
use crate::workload::{Kind, WorkloadRef};
use crate::workload_api::{dynamic_api, report};
use conflict::Tries;
use strategy::Change;

async fn read(client: &Client, namespace: &str, target: &WorkloadRef) -> Result<Value> {
    let object = dynamic_api(client, namespace, target.kind)
        .get(&target.name)
        .await
        .map_err(|e| apiserver::error(format!("reading {target} in namespace {namespace}"), e))?;
    Ok(serde_json::to_value(object)?)
}

async fn write(client: &Client, namespace: &str, target: &WorkloadRef, patch: Value) -> Result<()> {
    dynamic_api(client, namespace, target.kind)
        .patch(&target.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| apiserver::error(format!("updating {target}"), e))?;
    Ok(())
}

/// Reads `target` (unless `tries` holds the caller's read), computes its patch from what
/// was read (`None`: nothing to write) and writes it, conditional on the resourceVersion
/// read. A controller writes the object often (its status, at every sync), so a conflict
/// reads it again and computes the patch anew, as kubectl does. Returns the object the
/// last patch was computed from, and whether it was written.
async fn update<F>(
    client: &Client,
    namespace: &str,
    target: &WorkloadRef,
    mut tries: Tries,
    mut compute: F,
) -> Result<(Value, bool)>
where
    F: FnMut(&Value) -> Result<Option<Value>>,
{
    loop {
        let object = match tries.already_read() {
            Some(object) => object,
            None => read(client, namespace, target).await?,
        };
        let Some(patch) = compute(&object)? else {
            return Ok((object, false));
        };
        let written = dynamic_api(client, namespace, target.kind)
            .patch(&target.name, &PatchParams::default(), &Patch::Merge(patch))
            .await;
        match written {
            Ok(_) => return Ok((object, true)),
            Err(kube::Error::Api(status)) if status.code == 409 && tries.again_after_conflict() => {
            }
            Err(e) => return Err(apiserver::error(format!("updating {target}"), e)),
        }
    }
}

/// `rollout restart`: a new restartedAt annotation on the pod template.
pub async fn restart(
    client: &Client,
    namespace: &str,
    target: &WorkloadRef,
    out: Output,
) -> Result<u8> {
    let object = read(client, namespace, target).await?;
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    write(client, namespace, target, template::restart_patch(&now)).await?;
    let verdict = strategy::verdict(strategy::policy(target.kind, &object), Change::Restart);
    report(
        out,
        target,
        "restart",
        true,
        format!("{target} restarted. {verdict}"),
    )
}

/// The edit of one `set` command on the pod spec, and what it changes.
fn edit_pod_spec(
    command: &SetCommand,
    pod_spec: &mut Value,
) -> Result<(Change, Vec<String>), String> {
    match command {
        SetCommand::Image { images, .. } => {
            let pairs = template::parse_pairs(images, "container=image")?;
            Ok((Change::Image, template::set_images(pod_spec, &pairs)?))
        }
        SetCommand::Env {
            env, containers, ..
        } => {
            let edits = template::parse_env(env)?;
            Ok((
                Change::Env,
                template::set_env(pod_spec, containers, &edits)?,
            ))
        }
        SetCommand::Resources {
            containers,
            limits,
            requests,
            ..
        } => {
            let limits = template::parse_pairs(limits.as_slice(), "resource=quantity (--limits)")?;
            let requests =
                template::parse_pairs(requests.as_slice(), "resource=quantity (--requests)")?;
            let changed = template::set_resources(pod_spec, containers, &limits, &requests)?;
            Ok((Change::Resources, changed))
        }
    }
}

/// `set image|env|resources`.
pub async fn set(client: &Client, namespace: &str, command: SetCommand, out: Output) -> Result<u8> {
    let target = command.workload().clone();
    let mut outcome = None;
    let (object, written) = update(client, namespace, &target, Tries::new(None), |object| {
        let mut pod_spec = object
            .pointer("/spec/template/spec")
            .cloned()
            .unwrap_or_default();
        let (change, changed) = edit_pod_spec(&command, &mut pod_spec)
            .map_err(|e| anyhow!("cannot change {target}: {e}"))?;
        let resource_version = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let patch =
            (!changed.is_empty()).then(|| template::containers_patch(&pod_spec, resource_version));
        outcome = Some((change, changed));
        Ok(patch)
    })
    .await?;
    let action = command.action();
    let Some((change, changed)) = outcome.filter(|_| written) else {
        return report(
            out,
            &target,
            action,
            false,
            format!("{target} unchanged: every container already has it"),
        );
    };
    let verdict = strategy::verdict(strategy::policy(target.kind, &object), change);
    let message = format!(
        "{target} {action} updated ({}). {verdict}",
        changed.join(", ")
    );
    report(out, &target, action, true, message)
}

/// `scale --replicas N [--current-replicas M]`.
pub async fn scale(
    client: &Client,
    namespace: &str,
    target: &WorkloadRef,
    (replicas, current_replicas): (i32, Option<i32>),
    out: Output,
) -> Result<u8> {
    replicas::scalable(target.kind).map_err(|e| anyhow!("cannot scale {target}: {e}"))?;
    update(client, namespace, target, Tries::new(None), |object| {
        let patch = replicas::scale_patch(target.kind, object, replicas, current_replicas)
            .map_err(|e| anyhow!("cannot scale {target}: {e}"))?;
        Ok(Some(patch))
    })
    .await?;
    report(
        out,
        target,
        "scale",
        true,
        format!("{target} scaled to {replicas}"),
    )
}

/// `scaledown <cloneset> --pods a,b`: CloneSet's specified delete.
pub async fn scaledown(
    client: &Client,
    namespace: &str,
    cloneset: &str,
    pods: &str,
    out: Output,
) -> Result<u8> {
    let target = WorkloadRef::cloneset(cloneset).map_err(|e| anyhow!(e))?;
    let pods = replicas::pod_names(pods).map_err(|e| anyhow!("cannot scale down {target}: {e}"))?;
    let object = read(client, namespace, &target).await?;
    let uid = object
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let pod_api = Api::<Pod>::namespaced(client.clone(), namespace);
    for pod in &pods {
        let found = pod_api.get(pod).await.map_err(|e| {
            apiserver::error(format!("reading pod {pod} in namespace {namespace}"), e)
        })?;
        if !replicas::owned_by(&serde_json::to_value(found)?, uid) {
            return Err(anyhow!(
                "cannot scale down {target}: pod {pod} is not one of its pods"
            ));
        }
    }
    let mut planned = None;
    // The uid check's read is the first try's object: one GET fewer.
    let tries = Tries::new(Some(object));
    let (_, written) = update(client, namespace, &target, tries, |object| {
        let plan = replicas::scaledown(object, &pods)
            .map_err(|e| anyhow!("cannot scale down {target}: {e}"))?;
        let patch = (!plan.added.is_empty()).then(|| replicas::scaledown_patch(object, &plan));
        planned = Some(plan);
        Ok(patch)
    })
    .await?;
    let Some(plan) = planned.filter(|_| written) else {
        let message = format!("{target} already deletes pods {}", pods.join(", "));
        return report(out, &target, "scaledown", false, message);
    };
    let message = format!(
        "{target} scaled down to {} replicas, deleting pods {}",
        plan.replicas,
        plan.added.join(", ")
    );
    report(out, &target, "scaledown", true, message)
}

impl WorkloadRef {
    /// `scaledown`'s argument: a CloneSet's name, or `<cloneset kind>/<name>`.
    pub fn cloneset(text: &str) -> Result<Self, String> {
        let target: Self = if text.contains('/') {
            text.parse()?
        } else {
            Self {
                kind: Kind::CloneSet,
                name: text.to_owned(),
            }
        };
        if target.kind != Kind::CloneSet {
            return Err(format!(
                "scaledown deletes chosen pods of a CloneSet only, not of {target}"
            ));
        }
        Ok(target)
    }
}

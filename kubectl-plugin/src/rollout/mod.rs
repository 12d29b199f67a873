//! `rollout`: status (live), pause, resume, undo and history of the pod-set kinds.

pub mod history;
mod status;

use anyhow::{Context as _, Result, bail};
use futures::{Stream, StreamExt as _};
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use stevedore_api::{CloneSet, DaemonSet, StatefulSet};

use crate::cli::{Output, RolloutCommand};
use crate::output;
use crate::rollout_state::RolloutState;
use crate::workload::{self, Kind, WorkloadRef};
use crate::workload_api::{dynamic_api, report};

pub use status::status;

/// A workload as read once: its rollout and what a conditional write needs.
struct Fetched {
    state: RolloutState,
    uid: String,
    resource_version: String,
}

fn fetched<K: Resource>(object: &K, state: RolloutState) -> Fetched {
    Fetched {
        state,
        uid: object.meta().uid.clone().unwrap_or_default(),
        resource_version: object.meta().resource_version.clone().unwrap_or_default(),
    }
}

async fn fetch(client: &Client, namespace: &str, target: &WorkloadRef) -> Result<Fetched> {
    let name = target.name.as_str();
    let missing = || format!("reading {target} in namespace {namespace}");
    Ok(match target.kind {
        Kind::CloneSet => {
            let o = Api::<CloneSet>::namespaced(client.clone(), namespace)
                .get(name)
                .await
                .with_context(missing)?;
            fetched(&o, workload::cloneset_state(&o))
        }
        Kind::StatefulSet => {
            let o = Api::<StatefulSet>::namespaced(client.clone(), namespace)
                .get(name)
                .await
                .with_context(missing)?;
            fetched(&o, workload::statefulset_state(&o))
        }
        Kind::DaemonSet => {
            let o = Api::<DaemonSet>::namespaced(client.clone(), namespace)
                .get(name)
                .await
                .with_context(missing)?;
            fetched(&o, workload::daemonset_state(&o))
        }
    })
}

type StateStream =
    std::pin::Pin<Box<dyn Stream<Item = Result<Option<RolloutState>, watcher::Error>> + Send>>;

/// The workload's rollout each time the object changes (`None`: it is gone).
fn watch_states(client: &Client, namespace: &str, target: &WorkloadRef) -> StateStream {
    let name = target.name.as_str();
    match target.kind {
        Kind::CloneSet => {
            watcher::watch_object(Api::<CloneSet>::namespaced(client.clone(), namespace), name)
                .map(|r| r.map(|o| o.as_ref().map(workload::cloneset_state)))
                .boxed()
        }
        Kind::StatefulSet => watcher::watch_object(
            Api::<StatefulSet>::namespaced(client.clone(), namespace),
            name,
        )
        .map(|r| r.map(|o| o.as_ref().map(workload::statefulset_state)))
        .boxed(),
        Kind::DaemonSet => watcher::watch_object(
            Api::<DaemonSet>::namespaced(client.clone(), namespace),
            name,
        )
        .map(|r| r.map(|o| o.as_ref().map(workload::daemonset_state)))
        .boxed(),
    }
}

/// Runs a rollout command; the process's exit code.
pub async fn run(
    client: &Client,
    namespace: &str,
    command: RolloutCommand,
    out: Output,
) -> Result<u8> {
    match command {
        RolloutCommand::Status { workload, timeout } => {
            status(client, namespace, &workload, timeout, out).await
        }
        RolloutCommand::Pause { workload } => {
            set_paused(client, namespace, &workload, true, out).await
        }
        RolloutCommand::Resume { workload } => {
            set_paused(client, namespace, &workload, false, out).await
        }
        RolloutCommand::Undo {
            workload,
            to_revision,
        } => undo(client, namespace, &workload, to_revision, out).await,
        RolloutCommand::History { workload } => {
            show_history(client, namespace, &workload, out).await
        }
        RolloutCommand::Restart { workload } => {
            crate::change::restart(client, namespace, &workload, out).await
        }
    }
}

async fn set_paused(
    client: &Client,
    namespace: &str,
    target: &WorkloadRef,
    paused: bool,
    out: Output,
) -> Result<u8> {
    let current = fetch(client, namespace, target).await?;
    let (action, verb) = if paused {
        ("pause", "paused")
    } else {
        ("resume", "resumed")
    };
    if current.state.paused == paused {
        let message = if paused {
            format!("{target} already paused")
        } else {
            format!("{target} is not paused")
        };
        return report(out, target, action, false, message);
    }
    dynamic_api(client, namespace, target.kind)
        .patch(
            &target.name,
            &PatchParams::default(),
            &Patch::Merge(target.kind.paused_patch(paused)),
        )
        .await
        .with_context(|| format!("setting paused={paused} on {target}"))?;
    report(out, target, action, true, format!("{target} {verb}"))
}

async fn owned_revisions(
    client: &Client,
    namespace: &str,
    owner_uid: &str,
) -> Result<Vec<ControllerRevision>> {
    let revisions = Api::<ControllerRevision>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing ControllerRevisions in namespace {namespace}"))?;
    Ok(history::owned_revisions(revisions.items, owner_uid))
}

async fn undo(
    client: &Client,
    namespace: &str,
    target: &WorkloadRef,
    to_revision: i64,
    out: Output,
) -> Result<u8> {
    let current = fetch(client, namespace, target).await?;
    let revisions = owned_revisions(client, namespace, &current.uid).await?;
    let chosen = match history::undo_target(&revisions, &current.state.update_revision, to_revision)
    {
        Ok(chosen) => chosen,
        Err(refused @ history::UndoRefused::AlreadyCurrent(_)) => {
            return report(out, target, "undo", false, format!("{target} {refused}"));
        }
        Err(refused) => bail!("cannot roll back {target}: {refused}"),
    };
    let patch = history::undo_patch(chosen, &current.resource_version)
        .map_err(|e| anyhow::anyhow!("cannot roll back {target}: {e}"))?;
    let patch: json_patch::Patch = serde_json::from_value(patch)?;
    dynamic_api(client, namespace, target.kind)
        .patch(
            &target.name,
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await
        .with_context(|| format!("restoring revision {} of {target}", chosen.revision))?;
    report(
        out,
        target,
        "undo",
        true,
        format!("{target} rolled back to revision {}", chosen.revision),
    )
}

async fn show_history(
    client: &Client,
    namespace: &str,
    target: &WorkloadRef,
    out: Output,
) -> Result<u8> {
    let current = fetch(client, namespace, target).await?;
    let revisions = owned_revisions(client, namespace, &current.uid).await?;
    let rows = history::history_rows(&revisions, &current.state.update_revision);
    if output::structured(out, &rows)? {
        return Ok(0);
    }
    output::line(&format!("{target}"))?;
    output::line(&output::table(
        &["REVISION", "NAME", "IMAGES", "CHANGE-CAUSE"],
        rows.iter().map(|r| {
            vec![
                format!("{}{}", r.revision, if r.current { " (update)" } else { "" }),
                r.name.clone(),
                r.images.join(","),
                if r.change_cause.is_empty() {
                    "<none>".to_owned()
                } else {
                    r.change_cause.clone()
                },
            ]
        }),
    ))?;
    Ok(0)
}

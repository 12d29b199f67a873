//! A workload's revision history from its ControllerRevisions, and the choice and patch
//! of `rollout undo` (pure: the revisions and the workload in, rows or a patch out).

use k8s_openapi::api::apps::v1::ControllerRevision;
use serde::Serialize;

/// The annotation kubectl records a change's cause in.
const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";

/// One revision as `rollout history` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRow {
    pub revision: i64,
    pub name: String,
    /// The images of the revision's pod template, `container=image`.
    pub images: Vec<String>,
    pub change_cause: String,
    /// The workload's update revision (the one its pods are moving to).
    pub current: bool,
}

/// The revisions owned (as controller) by the object with `owner_uid`, oldest first.
pub fn owned_revisions(
    revisions: Vec<ControllerRevision>,
    owner_uid: &str,
) -> Vec<ControllerRevision> {
    let mut owned: Vec<ControllerRevision> = revisions
        .into_iter()
        .filter(|r| {
            r.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == owner_uid)
        })
        .collect();
    owned.sort_by_key(|r| r.revision);
    owned
}

/// The pod template a revision restores: `spec.template` of its data without the
/// strategic-merge `$patch` directive OpenKruise stores it with.
pub fn revision_template(revision: &ControllerRevision) -> Option<serde_json::Value> {
    let mut template = revision.data.as_ref()?.0.pointer("/spec/template")?.clone();
    template.as_object_mut()?.remove("$patch");
    Some(template)
}

fn images(template: Option<&serde_json::Value>) -> Vec<String> {
    template
        .and_then(|t| t.pointer("/spec/containers"))
        .and_then(|c| c.as_array())
        .into_iter()
        .flatten()
        .map(|c| {
            let field = |name: &str| c.get(name).and_then(|v| v.as_str()).unwrap_or("");
            format!("{}={}", field("name"), field("image"))
        })
        .collect()
}

/// Whether the revision named `name` is `revision` as a workload's status names it: the
/// full name (CloneSet, StatefulSet) or the hash after the owner's name (DaemonSet's
/// `daemonSetHash`).
pub fn is_revision(name: &str, revision: &str) -> bool {
    !revision.is_empty()
        && (name == revision
            || name
                .strip_suffix(revision)
                .is_some_and(|owner| owner.ends_with('-')))
}

/// The history rows, oldest first, marking `update_revision`.
pub fn history_rows(revisions: &[ControllerRevision], update_revision: &str) -> Vec<HistoryRow> {
    revisions
        .iter()
        .map(|r| {
            let name = r.metadata.name.clone().unwrap_or_default();
            HistoryRow {
                revision: r.revision,
                images: images(revision_template(r).as_ref()),
                change_cause: r
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(CHANGE_CAUSE))
                    .cloned()
                    .unwrap_or_default(),
                current: is_revision(&name, update_revision),
                name,
            }
        })
        .collect()
}

/// Why `rollout undo` does nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UndoRefused {
    #[error("no rollout history found")]
    NoHistory,
    #[error("no revision before the current one to roll back to")]
    NoPrevious,
    #[error("revision {0} is not in the history (see `rollout history`)")]
    NotFound(i64),
    #[error("skipped rollback: the update revision already is revision {0}")]
    AlreadyCurrent(i64),
    #[error("revision {0} holds no pod template to restore")]
    NoTemplate(i64),
}

/// The revision `rollout undo --to-revision` restores (`to_revision` 0: the one before
/// the newest, as kubectl), never the workload's own update revision.
pub fn undo_target<'a>(
    revisions: &'a [ControllerRevision],
    update_revision: &str,
    to_revision: i64,
) -> Result<&'a ControllerRevision, UndoRefused> {
    if revisions.is_empty() {
        return Err(UndoRefused::NoHistory);
    }
    let target = if to_revision == 0 {
        let mut newest_first = revisions.iter().rev();
        newest_first.next();
        newest_first.next().ok_or(UndoRefused::NoPrevious)?
    } else {
        revisions
            .iter()
            .find(|r| r.revision == to_revision)
            .ok_or(UndoRefused::NotFound(to_revision))?
    };
    if is_revision(
        target.metadata.name.as_deref().unwrap_or(""),
        update_revision,
    ) {
        return Err(UndoRefused::AlreadyCurrent(target.revision));
    }
    Ok(target)
}

/// The JSON patch that puts `target`'s template back, conditional on the object's
/// `resource_version` (a concurrent edit makes it fail rather than be overwritten).
pub fn undo_patch(
    target: &ControllerRevision,
    resource_version: &str,
) -> Result<serde_json::Value, UndoRefused> {
    let template = revision_template(target).ok_or(UndoRefused::NoTemplate(target.revision))?;
    Ok(serde_json::json!([
        { "op": "test", "path": "/metadata/resourceVersion", "value": resource_version },
        { "op": "replace", "path": "/spec/template", "value": template },
    ]))
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;

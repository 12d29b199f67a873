//! What a CloneSet sync checks before it acts: the selector selects the CloneSet's own
//! template (otherwise nothing is created, claimed or released), and a new revision's pod
//! is accepted by the apiserver before a rollout disrupts a pod (`workload::update_guard`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};

use super::controller::{CloneSetController, SyncError, reference};
use super::pods::{RevisionSpec, fresh_instance_id, new_pod};
use super::status::{FAILED_SCALE, refused_status};
use crate::api::CloneSet;
use crate::controller::ObjectKey;
use crate::controller::api_error::api_error;
use crate::controller::runner::Outcome;
use crate::controller::status_patch::status_merge_patch;
use crate::workload::selector::{SelectorMismatch, selector_selects_template};

/// The reason Kubernetes' Deployment and DaemonSet controllers give an empty selector.
pub const SELECTING_ALL: &str = "SelectingAll";
/// The reason for a selector that misses the template's labels; the shared executor gives
/// the same reason to a pod it will not create because the selector misses a label the
/// controller set on it.
pub use crate::workload::selector::SELECTOR_MISMATCH;

/// The template's labels against the selector, as the shared rule sees them.
pub fn check_selector(cloneset: &CloneSet) -> Result<(), SelectorMismatch> {
    let empty = Default::default();
    let labels = cloneset
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref())
        .unwrap_or(&empty);
    selector_selects_template(&cloneset.spec.selector, labels)
}

/// The condition reason for `mismatch`.
pub fn mismatch_reason(mismatch: &SelectorMismatch) -> &'static str {
    match mismatch {
        SelectorMismatch::Empty => SELECTING_ALL,
        _ => SELECTOR_MISMATCH,
    }
}

/// Reports a CloneSet whose selector does not select its template, and does nothing else:
/// its pods would not be its own, and it would create more without end. The condition and
/// the Warning event are written when they change; the CloneSet is looked at again when
/// it changes (its spec is the only fix), not on a timer.
pub async fn refuse_mismatched_selector(
    ctl: &CloneSetController,
    key: &ObjectKey,
    cloneset: &CloneSet,
    mismatch: &SelectorMismatch,
) -> Result<Outcome, SyncError> {
    let message = format!(
        "{mismatch}; no pods are created, adopted or released until the selector selects the template's labels"
    );
    let reason = mismatch_reason(mismatch);
    let status = refused_status(
        cloneset,
        FAILED_SCALE,
        reason,
        message.clone(),
        Timestamp::now(),
    );
    if cloneset.status.as_ref() == Some(&status) {
        return Ok(Outcome::Done);
    }
    tracing::warn!(%mismatch, "the selector does not select the template; nothing is done");
    let api: Api<CloneSet> = Api::namespaced(ctl.parts.client.clone(), &key.namespace);
    api.patch_status(
        &key.name,
        &PatchParams::default(),
        &Patch::Merge(status_merge_patch(cloneset.status.as_ref(), &status)),
    )
    .await
    .map_err(api_error("writing status"))?;
    ctl.parts
        .events
        .warning(&reference(cloneset), reason, "Create", message)
        .await;
    Ok(Outcome::Done)
}

/// A pod of `revision` as the rollout would create it: what the update guard
/// (`workload::update_guard`) dry-runs.
pub fn update_revision_pod(cloneset: &CloneSet, revision: &str, spec: &RevisionSpec) -> Pod {
    let instance_id = fresh_instance_id(&BTreeSet::new(), &mut super::random::random_u64);
    new_pod(cloneset, revision, spec, &instance_id)
}

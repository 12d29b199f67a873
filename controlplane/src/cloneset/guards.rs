//! What a CloneSet sync checks before it acts: the selector selects the CloneSet's own
//! template (otherwise nothing is created, claimed or released), and a new revision's pod
//! is accepted by the apiserver before a rollout disrupts a pod (`template_check`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::time::Instant;

use super::controller::{CloneSetController, SyncError, reference};
use super::pods::{RevisionSpec, fresh_instance_id, new_pod};
use super::status::{FAILED_SCALE, FAILED_UPDATE, refused_status};
use crate::api::CloneSet;
use crate::controller::ObjectKey;
use crate::controller::api_error::{api_error, api_message, status_code};
use crate::controller::runner::Outcome;
use crate::controller::status_patch::status_merge_patch;
use crate::workload::actions::{DeleteReason, Plan, PodChange};
use crate::workload::selector::{SelectorMismatch, selector_selects_template};
use crate::workload::template_check::Verdict;

/// The reason Kubernetes' Deployment and DaemonSet controllers give an empty selector.
pub const SELECTING_ALL: &str = "SelectingAll";
/// The reason for a selector that misses the template's labels.
pub const SELECTOR_MISMATCH: &str = "SelectorMismatch";

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
    let api: Api<CloneSet> = Api::namespaced(ctl.client.clone(), &key.namespace);
    api.patch_status(
        &key.name,
        &PatchParams::default(),
        &Patch::Merge(status_merge_patch(cloneset.status.as_ref(), &status)),
    )
    .await
    .map_err(api_error("writing status"))?;
    ctl.events
        .warning(&reference(cloneset), reason, "Create", message)
        .await;
    Ok(Outcome::Done)
}

/// Whether `plan` disrupts a pod to move it to the update revision: a recreate delete, or
/// the start of an in-place update (its PreparingUpdate hook included).
pub fn disrupts_for_update(plan: &Plan) -> bool {
    plan.deletes
        .iter()
        .any(|d| d.reason == DeleteReason::RecreateUpdate)
        || plan.pod_changes.iter().any(is_update_start)
}

/// Takes the update disruptions out of `plan`; creates, scale-down and the rest stay.
pub fn hold_update_disruptions(plan: &mut Plan) {
    plan.deletes
        .retain(|d| d.reason != DeleteReason::RecreateUpdate);
    plan.pod_changes.retain(|c| !is_update_start(c));
}

fn is_update_start(change: &PodChange) -> bool {
    change.reason.starts_update()
}

/// The apiserver's verdict on the update revision's pod, from the cache or a dry-run create.
pub async fn template_verdict(
    ctl: &CloneSetController,
    key: &ObjectKey,
    cloneset: &CloneSet,
    revision: &str,
    spec: &RevisionSpec,
) -> Verdict {
    let now = Instant::now();
    if let Some(verdict) = ctl.template_checks.cached(key, revision, now) {
        return verdict;
    }
    let pod = new_pod(
        cloneset,
        revision,
        spec,
        &fresh_instance_id(&BTreeSet::new(), &mut super::random::random_u64),
    );
    let pods: Api<Pod> = Api::namespaced(ctl.client.clone(), &key.namespace);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let result = pods.create(&dry_run, &pod).await;
    let verdict = Verdict::of(
        result
            .map(|_| ())
            .map_err(|err| (status_code(&err), api_message(&err))),
    );
    ctl.template_checks.record(key, revision, &verdict, now);
    if let Verdict::Refused(message) = &verdict {
        ctl.events
            .warning(
                &reference(cloneset),
                FAILED_UPDATE,
                "Update",
                refused_message(revision, message),
            )
            .await;
    }
    verdict
}

/// Why the update's disruptions are held, for the FailedUpdate condition; `None` when the
/// verdict lets the rollout go on.
pub fn hold_message(verdict: &Verdict, revision: &str) -> Option<String> {
    match verdict {
        Verdict::Accepted | Verdict::QuotaExceeded => None,
        Verdict::Refused(message) => Some(refused_message(revision, message)),
        Verdict::Unknown(message) => Some(format!(
            "could not check revision {revision} with a dry-run create, so no pod is updated yet: {message}"
        )),
    }
}

fn refused_message(revision: &str, apiserver: &str) -> String {
    format!("the apiserver refuses pods of revision {revision}, so no pod is updated: {apiserver}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::actions::{ChangeReason, Create, Delete};

    fn delete(pod: &str, reason: DeleteReason) -> Delete {
        Delete {
            pod: pod.to_owned(),
            uid: String::new(),
            pvcs: Vec::new(),
            reason,
            detail: String::new(),
        }
    }

    fn change(pod: &str, reason: ChangeReason) -> PodChange {
        PodChange {
            pod: pod.to_owned(),
            uid: String::new(),
            node: None,
            conditions: Vec::new(),
            patch: None,
            resize: None,
            resource_version: None,
            reason,
        }
    }

    #[test]
    fn holds_only_the_disruptions_of_the_update() {
        let mut plan = Plan {
            creates: vec![Create {
                instance_id: "c".into(),
                revision: "web-2".into(),
            }],
            deletes: vec![
                delete("a", DeleteReason::RecreateUpdate),
                delete("b", DeleteReason::ScaleDown),
                delete("s", DeleteReason::Specified),
            ],
            pod_changes: vec![
                change("d", ChangeReason::InPlaceStart),
                change("e", ChangeReason::PreparingUpdate),
                change("f", ChangeReason::InPlaceDone),
            ],
            ..Plan::default()
        };
        assert!(disrupts_for_update(&plan));
        hold_update_disruptions(&mut plan);
        assert!(!disrupts_for_update(&plan));
        let deletes: Vec<&str> = plan.deletes.iter().map(|d| d.pod.as_str()).collect();
        assert_eq!(deletes, ["b", "s"]);
        let changes: Vec<&str> = plan.pod_changes.iter().map(|c| c.pod.as_str()).collect();
        assert_eq!(changes, ["f"]);
        assert_eq!(plan.creates.len(), 1, "creates are never held");
    }
}

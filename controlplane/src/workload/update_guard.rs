//! The guard before a rollout disrupts its first pod, for every pod-set kind: the update
//! revision's pod is created with a server-side dry run (`template_check` keeps the
//! verdict per set and revision); while the apiserver refuses it, or could not be asked,
//! every update disruption of the plan is held, and the kind reports why.

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use super::actions::{DeleteReason, Plan, PodChange};
use super::set_controller::PodSetParts;
use super::template_check::Verdict;
use crate::controller::ObjectKey;
use crate::controller::api_error::{api_message, status_code};

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
/// A refusal is also published as a Warning event with `reason` on `reference`.
pub async fn template_verdict(
    parts: &PodSetParts,
    key: &ObjectKey,
    reference: &ObjectReference,
    reason: &str,
    revision: &str,
    pod: &Pod,
) -> Verdict {
    let now = Instant::now();
    if let Some(verdict) = parts.template_checks.cached(key, revision, now) {
        return verdict;
    }
    let pods: Api<Pod> = Api::namespaced(parts.client.clone(), &key.namespace);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let result = pods.create(&dry_run, pod).await;
    let verdict = Verdict::of(
        result
            .map(|_| ())
            .map_err(|err| (status_code(&err), api_message(&err))),
    );
    parts.template_checks.record(key, revision, &verdict, now);
    if let Verdict::Refused(message) = &verdict {
        let note = refused_message(revision, message);
        parts
            .events
            .warning(reference, reason, "Update", note)
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

/// Holds every update disruption of `planned` unless the apiserver accepts the update
/// revision's pod (built by `pod` only when the plan disrupts one); `Some(message)` says
/// why it held them, for the kind's condition.
pub async fn hold_refused_update(
    parts: &PodSetParts,
    key: &ObjectKey,
    reference: &ObjectReference,
    reason: &str,
    revision: &str,
    pod: impl FnOnce() -> Option<Pod>,
    planned: &mut Plan,
) -> Option<String> {
    if !disrupts_for_update(planned) {
        return None;
    }
    let pod = pod()?;
    let verdict = template_verdict(parts, key, reference, reason, revision, &pod).await;
    let message = hold_message(&verdict, revision)?;
    hold_update_disruptions(planned);
    Some(message)
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
            agent_restarts: Vec::new(),
            failure: None,
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

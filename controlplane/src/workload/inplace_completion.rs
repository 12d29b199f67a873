//! When an in-place update is done, and what the reconciler does about it on each sync.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::Timestamp;

use super::{
    GRACE_ANNOTATION, GraceStep, INPLACE_UPDATE_READY, InPlaceError, InPlaceUpdateState, PodPatch,
    STATE_ANNOTATION, annotations, container_statuses, grace_step, has_readiness_gate,
};

/// Whether the kubelet has finished restarting the changed containers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    Done,
    /// Not yet; the reason names the container and what is missing.
    Pending(String),
}

/// A spec image as the kubelet reports it: a reference without a tag or digest gets
/// `:latest` (OpenKruise's rule, which only looks for a `:` anywhere in the reference).
fn normalized_image(image: &str) -> String {
    if image.contains(':') {
        image.to_owned()
    } else {
        format!("{image}:latest")
    }
}

/// Each changed container (those in `lastContainerStatuses`) must run a different image ID
/// than before — or, when the new tag resolves to the same digest (OpenKruise #2297), report
/// the new spec image — and be running, started at or after the update timestamp (both are
/// whole seconds, so "at" counts) and ready.
pub fn check_completion(
    state: &InPlaceUpdateState,
    spec_images: &BTreeMap<String, String>,
    statuses: &[ContainerStatus],
) -> Completion {
    if state.has_next_batch() {
        return Completion::Pending("containers remain for the next update batch".to_owned());
    }
    let updated_at = state.update_timestamp.0;
    for (name, before) in &state.last_container_statuses {
        let Some(status) = statuses.iter().find(|s| &s.name == name) else {
            return Completion::Pending(format!("container {name} has no status yet"));
        };
        let new_image_id = !status.image_id.is_empty() && status.image_id != before.image_id;
        let same_digest_new_tag = status.image_id == before.image_id
            && spec_images
                .get(name)
                .is_some_and(|spec| normalized_image(spec) == status.image);
        if !new_image_id && !same_digest_new_tag {
            return Completion::Pending(format!(
                "container {name} still runs image ID {}",
                before.image_id
            ));
        }
        let started = status
            .state
            .as_ref()
            .and_then(|s| s.running.as_ref())
            .map(|r| r.started_at.as_ref().map(|t| t.0));
        match started {
            None => return Completion::Pending(format!("container {name} is not running")),
            Some(None) => {
                return Completion::Pending(format!("container {name} has no start time"));
            }
            Some(Some(at)) if at < updated_at => {
                return Completion::Pending(format!(
                    "container {name} has not restarted since the update"
                ));
            }
            Some(Some(_)) => {}
        }
        if !status.ready {
            return Completion::Pending(format!("container {name} is not ready"));
        }
    }
    Completion::Done
}

/// What one sync does for a pod's in-place update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefreshStep {
    /// No in-place update in progress.
    Nothing,
    /// A grace period is running or just ended, see [`GraceStep`].
    Grace(GraceStep),
    /// The update is still under way; wait for the next pod event.
    Wait(String),
    /// Done: set `InPlaceUpdateReady=True` (reason InPlaceUpdateDone) through the agent when
    /// `set_ready`, then apply `cleanup` (removes the state annotation).
    Finish { set_ready: bool, cleanup: PodPatch },
}

/// OpenKruise `Refresh`: finish a grace period, else check completion and restore the gate.
pub fn plan_refresh(pod: &Pod, now: Timestamp) -> Result<RefreshStep, InPlaceError> {
    match grace_step(pod, now)? {
        GraceStep::NotInGrace => {}
        step => return Ok(RefreshStep::Grace(step)),
    }
    if annotations(pod).is_some_and(|a| a.contains_key(GRACE_ANNOTATION)) {
        // A grace annotation without a state annotation cannot finish: drop it.
        return Ok(RefreshStep::Grace(GraceStep::Drop));
    }
    let Some(state_json) = annotations(pod).and_then(|a| a.get(STATE_ANNOTATION)) else {
        return Ok(RefreshStep::Nothing);
    };
    let state = InPlaceUpdateState::parse(state_json)?;
    let spec_images: BTreeMap<String, String> = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| Some((c.name.clone(), c.image.clone()?)))
        .collect();
    match check_completion(&state, &spec_images, container_statuses(pod)) {
        Completion::Pending(reason) => Ok(RefreshStep::Wait(reason)),
        Completion::Done => {
            let gate_true = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == INPLACE_UPDATE_READY))
                .is_some_and(|c| c.status == "True");
            let mut cleanup = PodPatch::default();
            cleanup
                .annotations
                .insert(STATE_ANNOTATION.to_owned(), None);
            Ok(RefreshStep::Finish {
                set_ready: has_readiness_gate(pod) && !gate_true,
                cleanup,
            })
        }
    }
}

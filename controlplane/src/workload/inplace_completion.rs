//! When an in-place update is done, and what the reconciler does about it on each sync.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod, ResourceRequirements};
use k8s_openapi::jiff::Timestamp;

use super::resize::{self, ResizeStatus};
use super::{
    Batches, GRACE_ANNOTATION, GraceStep, INPLACE_UPDATE_READY, InPlaceError,
    InPlaceUpdateContainerStatus, InPlaceUpdateState, PodPatch, STATE_ANNOTATION, annotations,
    batches, container_statuses, grace_step, has_readiness_gate, start_next_batch,
};

/// Whether the kubelet has finished restarting and resizing the changed containers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    Done,
    /// Not yet; the reason names the container and what is missing.
    Pending(String),
    /// The kubelet reports the resize infeasible on this node: it never completes here.
    Infeasible(String),
}

/// What the node reports about a pod, as the completion check reads it.
#[derive(Clone, Debug, Default)]
pub struct PodObservation<'a> {
    /// Container name → the spec's image.
    pub spec_images: BTreeMap<String, String>,
    /// Container name → the spec's resources (after a resize, the new ones).
    pub spec_resources: BTreeMap<String, ResourceRequirements>,
    pub statuses: &'a [ContainerStatus],
    pub resize: ResizeStatus,
}

impl<'a> PodObservation<'a> {
    pub fn of(pod: &'a Pod) -> Self {
        let containers = || pod.spec.iter().flat_map(|s| &s.containers);
        Self {
            spec_images: containers()
                .filter_map(|c| Some((c.name.clone(), c.image.clone()?)))
                .collect(),
            spec_resources: containers()
                .filter_map(|c| Some((c.name.clone(), c.resources.clone()?)))
                .collect(),
            statuses: container_statuses(pod),
            resize: resize::resize_status(pod),
        }
    }
}

/// The digest of an image reference or an image ID (`repo@sha256:…` or `sha256:…`).
fn digest(reference: &str) -> Option<&str> {
    let at = reference.rfind("sha256:")?;
    Some(&reference[at..])
}

/// Each changed container (those in `lastContainerStatuses`) must be running and ready;
/// one whose image changed must have restarted since the update (a new container,
/// started at or after the update timestamp — whole seconds, so "at" counts) and run a
/// new image ID — or the same one when the new reference resolves to the same digest
/// (OpenKruise #2297; containerd 1.6 reports the image's first tag as `status.image`, so
/// that string cannot tell): then the restart is the evidence, unless the spec names a
/// digest the container does not run. One that was resized must report the spec's
/// resources, and the pod must carry no resize condition.
pub fn check_completion(state: &InPlaceUpdateState, pod: &PodObservation<'_>) -> Completion {
    if state.has_next_batch() {
        return Completion::Pending("containers remain for the next update batch".to_owned());
    }
    let resized = state
        .last_container_statuses
        .values()
        .any(|c| c.resources.is_some());
    if let (true, ResizeStatus::Infeasible(message)) = (resized, &pod.resize) {
        return Completion::Infeasible(message.clone());
    }
    for (name, before) in &state.last_container_statuses {
        if let Err(reason) = container_done(state, name, before, pod) {
            return Completion::Pending(reason);
        }
    }
    match (resized, &pod.resize) {
        (true, ResizeStatus::Busy(reason)) => Completion::Pending(reason.clone()),
        _ => Completion::Done,
    }
}

fn container_done(
    state: &InPlaceUpdateState,
    name: &str,
    before: &InPlaceUpdateContainerStatus,
    pod: &PodObservation<'_>,
) -> Result<(), String> {
    let Some(status) = pod.statuses.iter().find(|s| s.name == name) else {
        return Err(format!("container {name} has no status yet"));
    };
    let started = status
        .state
        .as_ref()
        .and_then(|s| s.running.as_ref())
        .map(|r| r.started_at.as_ref().map(|t| t.0));
    let started = match started {
        None => return Err(format!("container {name} is not running")),
        Some(None) => return Err(format!("container {name} has no start time")),
        Some(Some(at)) => at,
    };
    if before.image_changed() {
        let new_container = before.container_id.is_empty()
            || status.container_id.as_deref() != Some(before.container_id.as_str());
        let restarted = new_container && started >= state.update_timestamp.0;
        if status.image_id.is_empty() {
            // A runtime that reports no image ID (kwok's simulated kubelet) leaves only the
            // status image string and a start after the update to go by.
            let runs_spec_image = pod
                .spec_images
                .get(name)
                .is_some_and(|image| *image == status.image);
            if !(restarted && runs_spec_image) {
                return Err(format!("container {name} reports no image ID yet"));
            }
        } else if !restarted {
            return Err(format!(
                "container {name} has not restarted since the update (image ID {})",
                status.image_id
            ));
        }
        let spec_digest = pod.spec_images.get(name).and_then(|i| digest(i));
        if status.image_id == before.image_id
            && spec_digest.is_some_and(|d| digest(&status.image_id) != Some(d))
        {
            return Err(format!(
                "container {name} still runs image ID {}",
                before.image_id
            ));
        }
    }
    if before.resources.is_some() {
        let spec = pod.spec_resources.get(name);
        if let Some(what) = resize::unapplied_resource(spec, status.resources.as_ref()) {
            return Err(format!("container {name} still runs with {what}"));
        }
    }
    if !status.ready {
        return Err(format!("container {name} is not ready"));
    }
    Ok(())
}

/// What one sync does for a pod's in-place update.
#[derive(Clone, Debug, PartialEq)]
pub enum RefreshStep {
    /// No in-place update in progress.
    Nothing,
    /// A grace period is running or just ended, see [`GraceStep`].
    Grace(GraceStep),
    /// The update is still under way; wait for the next pod event.
    Wait(String),
    /// The kubelet cannot resize the pod on its node (its message): recreate the pod
    /// under InPlaceIfPossible, report it under InPlaceOnly.
    Infeasible(String),
    /// Done: set `InPlaceUpdateReady=True` (reason InPlaceUpdateDone) through the agent when
    /// `set_ready`, then apply `cleanup` (the state annotation, kept and marked finished).
    Finish { set_ready: bool, cleanup: PodPatch },
    /// Ask the node's agent to restart `containers` (their env reads changed metadata),
    /// then apply `record`, the state without them, so they are asked for once.
    RestartContainers {
        containers: Vec<String>,
        record: PodPatch,
    },
    /// The running batch is running and ready: patch the next one.
    NextBatch(PodPatch),
    /// A container of the running batch failed, so the later batches wait: report it
    /// (FailedUpdate) and apply `record`, which notes it was reported.
    BatchFailed {
        container: String,
        message: String,
        record: PodPatch,
    },
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
    let mut state = InPlaceUpdateState::parse(state_json)?;
    if state.completed() {
        return Ok(RefreshStep::Nothing);
    }
    let mut queued = state.batches();
    if !queued.agent_restarts.is_empty() {
        let containers = std::mem::take(&mut queued.agent_restarts);
        state.set_batches(&queued)?;
        let mut record = PodPatch::default();
        record
            .annotations
            .insert(STATE_ANNOTATION.to_owned(), Some(state.to_annotation()?));
        return Ok(RefreshStep::RestartContainers { containers, record });
    }
    if !queued.waiting().is_empty() {
        return batch_step(state, queued, pod, now);
    }
    match check_completion(&state, &PodObservation::of(pod)) {
        Completion::Pending(reason) => Ok(RefreshStep::Wait(reason)),
        Completion::Infeasible(message) => Ok(RefreshStep::Infeasible(message)),
        Completion::Done => {
            let gate_true = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == INPLACE_UPDATE_READY))
                .is_some_and(|c| c.status == "True");
            // The state stays (OpenKruise never removes it), marked finished.
            state.mark_completed();
            let mut cleanup = PodPatch::default();
            cleanup
                .annotations
                .insert(STATE_ANNOTATION.to_owned(), Some(state.to_annotation()?));
            Ok(RefreshStep::Finish {
                set_ready: has_readiness_gate(pod) && !gate_true,
                cleanup,
            })
        }
    }
}

/// The running batch failed, is still under way, or is done and the next one starts
/// (OpenKruise `preCheckBeforeNext`: every container of the running batch ready).
fn batch_step(
    mut state: InPlaceUpdateState,
    mut queued: Batches,
    pod: &Pod,
    now: Timestamp,
) -> Result<RefreshStep, InPlaceError> {
    let observed = PodObservation::of(pod);
    // A resize the kubelet can never apply here holds the later batches forever.
    let resized = (state.last_container_statuses.values()).any(|c| c.resources.is_some());
    if let (true, ResizeStatus::Infeasible(message)) = (resized, &observed.resize) {
        return Ok(RefreshStep::Infeasible(message.clone()));
    }
    let running: Vec<String> = match &queued.pre_check_before_next {
        Some(check) => check.containers_required_ready.clone(),
        None => state.last_container_statuses.keys().cloned().collect(),
    };
    let failed = running.iter().find_map(|name| {
        let status = observed.statuses.iter().find(|s| &s.name == name)?;
        Some((name.clone(), batches::container_failure(status)?))
    });
    let waiting = (queued.waiting().into_iter())
        .collect::<Vec<_>>()
        .join(", ");
    if let Some((container, reason)) = failed {
        let message = format!(
            "container {container} failed its in-place update ({reason}), so {waiting} are not updated"
        );
        if queued.failed_container == container {
            return Ok(RefreshStep::Wait(message));
        }
        queued.failed_container = container.clone();
        state.set_batches(&queued)?;
        let mut record = PodPatch::default();
        record
            .annotations
            .insert(STATE_ANNOTATION.to_owned(), Some(state.to_annotation()?));
        return Ok(RefreshStep::BatchFailed {
            container,
            message,
            record,
        });
    }
    for (name, before) in &state.last_container_statuses {
        if let Err(reason) = container_done(&state, name, before, &observed) {
            return Ok(RefreshStep::Wait(format!(
                "{reason}; {waiting} wait for it"
            )));
        }
    }
    queued.failed_container.clear();
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice());
    let priorities =
        batches::container_priorities(containers.unwrap_or_default(), annotations(pod));
    let mut patch = PodPatch::default();
    start_next_batch(&mut queued, &priorities, pod, &mut state, &mut patch, now);
    state.set_batches(&queued)?;
    patch
        .annotations
        .insert(STATE_ANNOTATION.to_owned(), Some(state.to_annotation()?));
    Ok(RefreshStep::NextBatch(patch))
}

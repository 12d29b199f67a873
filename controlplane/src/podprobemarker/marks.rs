//! What a pod should carry for its probes' states (pure): the condition each probe's
//! `podConditionType` names (`True` while Succeeded, `False` while Failed), and the
//! labels and annotations of the markerPolicy of the state it is in, with those of its
//! other state's policy removed (as OpenKruise: a Failed probe with no Failed policy
//! loses the Succeeded policy's marks). An Unknown state changes nothing: a probe not
//! yet run, or that could not run, neither marks nor unmarks a pod.
//!
//! The result holds only what differs from the pod, so a pod already right is never
//! patched.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use crate::api::nodepodprobe::{ContainerProbeState, probe_key};
use crate::api::podprobemarker::{PodContainerProbe, ProbeState};

/// A condition to write on the pod's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionMark {
    pub type_: String,
    /// `True` or `False`.
    pub status: &'static str,
    pub message: String,
    pub last_probe_time: Option<Time>,
    /// Whether the status moves (so `lastTransitionTime` is now), or only the message.
    pub transition: bool,
}

/// What to change on one pod; `None` in a map means remove the key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodMarks {
    pub conditions: Vec<ConditionMark>,
    pub labels: BTreeMap<String, Option<String>>,
    pub annotations: BTreeMap<String, Option<String>>,
}

impl PodMarks {
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty() && self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// One probe of the pod: the marker it comes from and its spec.
pub struct MarkedProbe<'a> {
    pub marker: &'a str,
    pub probe: &'a PodContainerProbe,
}

/// The changes `pod` needs for `probes` given the `states` its node's agent reported.
pub fn pod_marks(
    pod: &Pod,
    probes: &[MarkedProbe<'_>],
    states: &[ContainerProbeState],
) -> PodMarks {
    let mut marks = PodMarks::default();
    for MarkedProbe { marker, probe } in probes {
        let key = probe_key(marker, &probe.name);
        let Some(state) = states.iter().find(|s| s.name == key) else {
            continue;
        };
        if state.state == ProbeState::Unknown {
            continue;
        }
        if let Some(type_) = &probe.pod_condition_type {
            marks.conditions.extend(condition_mark(pod, type_, state));
        }
        policy_marks(pod, probe, state.state, &mut marks);
    }
    marks
}

fn condition_mark(pod: &Pod, type_: &str, state: &ContainerProbeState) -> Option<ConditionMark> {
    let status = if state.state == ProbeState::Succeeded {
        "True"
    } else {
        "False"
    };
    let current = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|all| all.iter().find(|c| c.type_ == type_));
    let message = state.message.clone();
    if current.is_some_and(|c| c.status == status && c.message.as_deref().unwrap_or("") == message)
    {
        return None;
    }
    Some(ConditionMark {
        type_: type_.to_owned(),
        status,
        message,
        last_probe_time: state.last_probe_time.clone(),
        transition: current.is_none_or(|c| c.status != status),
    })
}

fn policy_marks(pod: &Pod, probe: &PodContainerProbe, state: ProbeState, marks: &mut PodMarks) {
    let wanted = probe.marker_policy.iter().find(|p| p.state == state);
    let others = probe.marker_policy.iter().filter(|p| p.state != state);
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    for other in others {
        let keep = |key: &String,
                    of: fn(
            &crate::api::podprobemarker::ProbeMarkerPolicy,
        ) -> &BTreeMap<String, String>| {
            wanted.is_some_and(|w| of(w).contains_key(key))
        };
        for key in other.labels.keys().filter(|k| labels.contains_key(*k)) {
            if !keep(key, |p| &p.labels) {
                marks.labels.insert(key.clone(), None);
            }
        }
        for key in other
            .annotations
            .keys()
            .filter(|k| annotations.contains_key(*k))
        {
            if !keep(key, |p| &p.annotations) {
                marks.annotations.insert(key.clone(), None);
            }
        }
    }
    let Some(wanted) = wanted else {
        return;
    };
    for (key, value) in &wanted.labels {
        if labels.get(key) != Some(value) {
            marks.labels.insert(key.clone(), Some(value.clone()));
        }
    }
    for (key, value) in &wanted.annotations {
        if annotations.get(key) != Some(value) {
            marks.annotations.insert(key.clone(), Some(value.clone()));
        }
    }
}

/// The merge patch of the pod's labels and annotations (`null` removes a key), with the
/// pod's UID as a precondition; `None` when neither changes.
pub fn metadata_patch(uid: &str, marks: &PodMarks) -> Option<Value> {
    if marks.labels.is_empty() && marks.annotations.is_empty() {
        return None;
    }
    let mut metadata = json!({ "uid": uid });
    if !marks.labels.is_empty() {
        metadata["labels"] = json!(marks.labels);
    }
    if !marks.annotations.is_empty() {
        metadata["annotations"] = json!(marks.annotations);
    }
    Some(json!({ "metadata": metadata }))
}

/// The strategic-merge patch of `pods/status` setting the conditions (merged by type, so
/// the pod's other conditions stay), with the pod's UID as a precondition; `None` when
/// no condition changes. `lastTransitionTime` moves to `now` only with the status.
pub fn status_patch(uid: &str, marks: &PodMarks, now: &Time) -> Option<Value> {
    if marks.conditions.is_empty() {
        return None;
    }
    let conditions: Vec<Value> = marks
        .conditions
        .iter()
        .map(|mark| {
            let mut condition = json!({
                "type": mark.type_,
                "status": mark.status,
                "message": mark.message,
            });
            if let Some(probed) = &mark.last_probe_time {
                condition["lastProbeTime"] = json!(probed);
            }
            if mark.transition {
                condition["lastTransitionTime"] = json!(now);
            }
            condition
        })
        .collect();
    Some(json!({ "metadata": { "uid": uid }, "status": { "conditions": conditions } }))
}

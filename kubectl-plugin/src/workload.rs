//! The workloads `rollout` acts on: the kind named on the command line, and what each
//! kind's object says about its rollout, read into one [`RolloutState`].

use kube::ResourceExt as _;
use stevedore_api::daemonset::DaemonSetUpdateStrategyType;
use stevedore_api::statefulset::StatefulSetUpdateStrategyType;
use stevedore_api::{CloneSet, DaemonSet, StatefulSet};

use crate::rollout_state::RolloutState;

/// The pod-set kinds with rollouts (OpenKruise's, group apps.kruise.io).
#[allow(
    clippy::enum_variant_names,
    reason = "the variants are the kinds' own names"
)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    CloneSet,
    StatefulSet,
    DaemonSet,
}

/// `<kind>/<name>` as given on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadRef {
    pub kind: Kind,
    pub name: String,
}

/// `daemonsets.v1alpha1.apps.kruise.io` → `daemonsets`: the group and a version, as kubectl
/// (and kubectl-kruise) accept them, name the same kind.
pub fn strip_group_and_version(word: &str) -> &str {
    let word = word.strip_suffix(".apps.kruise.io").unwrap_or(word);
    ["v1alpha1", "v1beta1"]
        .iter()
        .find_map(|version| word.strip_suffix(&format!(".{version}")))
        .unwrap_or(word)
}

impl Kind {
    /// The kind for a name as kubectl and kubectl-kruise accept it: singular, plural,
    /// OpenKruise's short name (`clone`, `asts`, `ads`/`daemon`) or
    /// `<plural>.apps.kruise.io`. `cs`, `sts` and `ds` are not among them: kubectl gives
    /// them to ComponentStatus and the native StatefulSet and DaemonSet.
    pub fn parse(word: &str) -> Option<Self> {
        let word = word.to_ascii_lowercase();
        let word = strip_group_and_version(&word);
        match word {
            "cloneset" | "clonesets" | "clone" => Some(Self::CloneSet),
            "statefulset" | "statefulsets" | "asts" | "advancedstatefulset" => {
                Some(Self::StatefulSet)
            }
            "daemonset" | "daemonsets" | "ads" | "daemon" | "advanceddaemonset" => {
                Some(Self::DaemonSet)
            }
            _ => None,
        }
    }

    /// The resource as kubectl prints it, e.g. `cloneset.apps.kruise.io`.
    pub fn resource(self) -> &'static str {
        match self {
            Self::CloneSet => "cloneset.apps.kruise.io",
            Self::StatefulSet => "statefulset.apps.kruise.io",
            Self::DaemonSet => "daemonset.apps.kruise.io",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::CloneSet => "CloneSet",
            Self::StatefulSet => "StatefulSet",
            Self::DaemonSet => "DaemonSet",
        }
    }

    /// Where the kind keeps its `paused` switch.
    pub fn paused_patch(self, paused: bool) -> serde_json::Value {
        match self {
            Self::CloneSet => {
                serde_json::json!({ "spec": { "updateStrategy": { "paused": paused } } })
            }
            Self::StatefulSet | Self::DaemonSet => serde_json::json!({
                "spec": { "updateStrategy": { "rollingUpdate": { "paused": paused } } }
            }),
        }
    }
}

impl std::str::FromStr for WorkloadRef {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (kind, name) = text.split_once('/').ok_or_else(|| {
            format!("\"{text}\" is not <kind>/<name>, e.g. cloneset/web or asts/db")
        })?;
        let kind = Kind::parse(kind).ok_or_else(|| {
            format!(
                "\"{kind}\" is not a kind with rollouts; use cloneset (clone), statefulset (asts) or daemonset (ads)"
            )
        })?;
        if name.is_empty() || name.contains('/') {
            return Err(format!("\"{text}\" does not name one object"));
        }
        Ok(Self {
            kind,
            name: name.to_owned(),
        })
    }
}

impl std::fmt::Display for WorkloadRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind.resource(), self.name)
    }
}

/// One condition of any of the three kinds, as the rollout reads it.
struct ConditionView<'a> {
    type_: &'a str,
    status: &'a str,
    reason: &'a str,
    message: &'a str,
}

/// The conditions of any of the kinds' statuses (the same four fields under three types).
macro_rules! condition_views {
    ($object:expr) => {
        $object
            .status
            .iter()
            .flat_map(|s| s.conditions.iter())
            .map(|c| ConditionView {
                type_: &c.type_,
                status: &c.status,
                reason: &c.reason,
                message: &c.message,
            })
            .collect::<Vec<_>>()
    };
}

/// The message of a rollout that cannot go on by itself: the Progressing condition at
/// ProgressDeadlineExceeded (the controller's own sentence).
fn deadline_message(conditions: &[ConditionView<'_>]) -> Option<String> {
    conditions
        .iter()
        .find(|c| c.type_ == "Progressing" && c.reason == "ProgressDeadlineExceeded")
        .map(|c| c.message.to_owned())
}

/// The messages of the sync's problem conditions (FailedUpdate, FailedScale, ...), shown
/// beside the progress: they may clear by themselves (a budget lets a pod go).
fn problem_message(conditions: &[ConditionView<'_>]) -> Option<String> {
    let messages: Vec<&str> = conditions
        .iter()
        .filter(|c| c.type_.starts_with("Failed") && c.status == "True" && !c.message.is_empty())
        .map(|c| c.message)
        .collect();
    (!messages.is_empty()).then(|| messages.join(" "))
}

pub fn cloneset_state(cloneset: &CloneSet) -> RolloutState {
    let spec = &cloneset.spec;
    let status = cloneset.status.clone().unwrap_or_default();
    let conditions = condition_views!(cloneset);
    RolloutState {
        kind: Kind::CloneSet.name(),
        namespace: cloneset.namespace().unwrap_or_default(),
        name: cloneset.name_any(),
        generation: cloneset.metadata.generation.unwrap_or(0),
        observed_generation: status.observed_generation,
        desired: spec.desired_replicas(),
        target_updated: status.expected_updated_replicas,
        pods: status.replicas,
        updated: status.updated_replicas,
        updated_ready: Some(status.updated_ready_replicas),
        ready: status.ready_replicas,
        available: status.available_replicas,
        current_revision: status.current_revision.clone(),
        update_revision: status.update_revision.clone(),
        paused: spec.update_strategy.paused,
        on_delete: spec.update_strategy.on_delete(),
        stalled: deadline_message(&conditions),
        problem: problem_message(&conditions),
    }
}

pub fn statefulset_state(set: &StatefulSet) -> RolloutState {
    let spec = &set.spec;
    let status = set.status.clone().unwrap_or_default();
    let strategy = spec.update_strategy.clone().unwrap_or_default();
    let rolling = strategy.rolling_update.clone().unwrap_or_default();
    let desired = spec.replicas.unwrap_or(1);
    let partition = rolling.partition.unwrap_or(0).clamp(0, desired.max(0));
    let conditions = condition_views!(set);
    RolloutState {
        kind: Kind::StatefulSet.name(),
        namespace: set.namespace().unwrap_or_default(),
        name: set.name_any(),
        generation: set.metadata.generation.unwrap_or(0),
        observed_generation: status.observed_generation,
        desired,
        target_updated: desired - partition,
        pods: status.replicas,
        updated: status.updated_replicas,
        updated_ready: Some(status.updated_ready_replicas),
        ready: status.ready_replicas,
        available: status.available_replicas,
        current_revision: status.current_revision.clone(),
        update_revision: status.update_revision.clone(),
        paused: rolling.paused,
        on_delete: strategy.type_ == Some(StatefulSetUpdateStrategyType::OnDelete),
        stalled: deadline_message(&conditions),
        problem: problem_message(&conditions),
    }
}

pub fn daemonset_state(set: &DaemonSet) -> RolloutState {
    let status = set.status.clone().unwrap_or_default();
    let strategy = set.spec.update_strategy.clone().unwrap_or_default();
    let rolling = strategy.rolling_update.clone().unwrap_or_default();
    let desired = status.desired_number_scheduled;
    let partition = rolling.partition.unwrap_or(0).clamp(0, desired.max(0));
    let conditions = condition_views!(set);
    RolloutState {
        kind: Kind::DaemonSet.name(),
        namespace: set.namespace().unwrap_or_default(),
        name: set.name_any(),
        generation: set.metadata.generation.unwrap_or(0),
        observed_generation: status.observed_generation,
        desired,
        target_updated: desired - partition,
        pods: status.current_number_scheduled + status.number_misscheduled,
        updated: status.updated_number_scheduled,
        // The DaemonSet status counts no updated-and-ready pods; availability stands in.
        updated_ready: None,
        ready: status.number_ready,
        available: status.number_available,
        current_revision: String::new(),
        update_revision: status.daemon_set_hash.clone(),
        paused: rolling.paused.unwrap_or(false),
        on_delete: strategy.type_ == Some(DaemonSetUpdateStrategyType::OnDelete),
        stalled: deadline_message(&conditions),
        problem: problem_message(&conditions),
    }
}

//! Why pods stay on an older revision after a sync's update step: the rule that holds
//! them and the pods it names. Workloads turn it into a condition, so `kubectl describe`
//! answers "why is my rollout not moving?" without reading the controller's logs.

use k8s_openapi::jiff::Timestamp;

use crate::controller::conditions::{StatusCondition, set_condition};

/// The condition every pod-set kind writes while pods stay on an older revision: its
/// reason names the rule, its message the field and the pods.
pub const UPDATE_HELD: &str = "UpdateHeld";

/// The rule that keeps pods on an older revision for now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpdateHold {
    /// The rollout is paused: none of the `waiting` pods is updated.
    Paused { waiting: usize },
    /// `updateStrategy.type: OnDelete`: the `waiting` pods move only when deleted.
    OnDelete { waiting: usize },
    /// The partition keeps these pods on their revision; every other pod is updated.
    Partition { kept: Vec<String> },
    /// The pods that may be unavailable during the update (`limit`) are: these pods are
    /// not available or being updated; `waiting` more pods follow as they become available.
    MaxUnavailable {
        limit: i32,
        unavailable: Vec<String>,
        waiting: usize,
    },
}

/// What the update step found, for the workload's condition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum UpdateHoldSeen {
    /// The update step did not run this sync (the scale step acted or halted first): the
    /// condition keeps what the last evaluation said, so it does not flap between syncs.
    #[default]
    NotEvaluated,
    /// Every pod is on the update revision or moving to it.
    Clear,
    Held(UpdateHold),
}

/// The spec fields a workload's messages name (they differ between kinds).
#[derive(Clone, Copy, Debug)]
pub struct StrategyFields {
    pub paused: &'static str,
    pub partition: &'static str,
    /// What lets the pods the partition keeps update.
    pub partition_hint: &'static str,
    pub max_unavailable: &'static str,
}

/// Sets or removes UpdateHeld after what the update step found; a sync whose update step
/// did not run leaves it as it was.
pub fn set_update_hold<C: StatusCondition>(
    conditions: &mut Vec<C>,
    seen: &UpdateHoldSeen,
    fields: &StrategyFields,
    now: Timestamp,
) {
    match seen {
        UpdateHoldSeen::NotEvaluated => {}
        UpdateHoldSeen::Clear => conditions.retain(|c| c.condition_type() != UPDATE_HELD),
        UpdateHoldSeen::Held(hold) => set_condition(
            conditions,
            UPDATE_HELD,
            true,
            hold.reason(),
            hold.message(fields),
            now,
        ),
    }
}

/// Pod names quoted in a message before "and N more".
const NAMES_SHOWN: usize = 5;

impl UpdateHold {
    /// The condition's reason: the rule, in one word.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Paused { .. } => "Paused",
            Self::OnDelete { .. } => "OnDelete",
            Self::Partition { .. } => "Partition",
            Self::MaxUnavailable { .. } => "MaxUnavailable",
        }
    }

    /// A sentence naming the rule, the field that sets it and the pods it holds.
    pub fn message(&self, fields: &StrategyFields) -> String {
        match self {
            Self::Paused { waiting } => format!(
                "{} is true: no pod is updated until it is set to false ({} to go)",
                fields.paused,
                pods(*waiting)
            ),
            Self::OnDelete { waiting } => format!(
                "updateStrategy.type is OnDelete: a pod moves to the update revision only when deleted ({} to go)",
                pods(*waiting)
            ),
            Self::Partition { kept } => format!(
                "{} keeps {} on their revision ({}); {}",
                fields.partition,
                pods(kept.len()),
                names(kept),
                fields.partition_hint
            ),
            Self::MaxUnavailable {
                limit,
                unavailable,
                waiting,
            } => format!(
                "{} allows {} unavailable during the update, and {} not available or being updated ({}); still to update: {}",
                fields.max_unavailable,
                pods(usize::try_from(*limit).unwrap_or(0)),
                are(unavailable.len()),
                names(unavailable),
                pods(*waiting)
            ),
        }
    }
}

fn pods(count: usize) -> String {
    match count {
        1 => "1 pod".to_owned(),
        n => format!("{n} pods"),
    }
}

fn are(count: usize) -> String {
    match count {
        1 => "1 is".to_owned(),
        n => format!("{n} are"),
    }
}

/// The first few names, then how many more.
fn names(all: &[String]) -> String {
    let shown = all.iter().take(NAMES_SHOWN).cloned().collect::<Vec<_>>();
    match all.len().saturating_sub(NAMES_SHOWN) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELDS: StrategyFields = StrategyFields {
        paused: "spec.updateStrategy.rollingUpdate.paused",
        partition: "spec.updateStrategy.rollingUpdate.partition",
        partition_hint: "lower it to update them",
        max_unavailable: "spec.updateStrategy.rollingUpdate.maxUnavailable",
    };

    fn owned(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn each_hold_names_its_rule_its_field_and_its_pods() {
        let cases = [
            (
                UpdateHold::Paused { waiting: 3 },
                "Paused",
                "spec.updateStrategy.rollingUpdate.paused is true: no pod is updated until it is set to false (3 pods to go)",
            ),
            (
                UpdateHold::OnDelete { waiting: 1 },
                "OnDelete",
                "updateStrategy.type is OnDelete: a pod moves to the update revision only when deleted (1 pod to go)",
            ),
            (
                UpdateHold::Partition {
                    kept: owned(&["web-0", "web-1"]),
                },
                "Partition",
                "spec.updateStrategy.rollingUpdate.partition keeps 2 pods on their revision (web-0, web-1); lower it to update them",
            ),
            (
                UpdateHold::MaxUnavailable {
                    limit: 1,
                    unavailable: owned(&["web-4"]),
                    waiting: 3,
                },
                "MaxUnavailable",
                "spec.updateStrategy.rollingUpdate.maxUnavailable allows 1 pod unavailable during the update, and 1 is not available or being updated (web-4); still to update: 3 pods",
            ),
        ];
        for (hold, reason, message) in cases {
            assert_eq!(hold.reason(), reason);
            assert_eq!(hold.message(&FIELDS), message);
        }
    }

    #[test]
    fn long_lists_quote_five_names_and_count_the_rest() {
        let kept: Vec<String> = (0..8).map(|i| format!("web-{i}")).collect();
        let message = UpdateHold::Partition { kept }.message(&FIELDS);
        assert!(
            message.contains("(web-0, web-1, web-2, web-3, web-4 and 3 more)"),
            "{message}"
        );
    }
}

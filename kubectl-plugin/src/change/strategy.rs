//! Whether a template change reaches the pods in place: the workload's update policy
//! read from the object, and the sentence `set` and `rollout restart` print about it.

use serde_json::Value;

use crate::workload::Kind;

/// How the workload replaces pods for a new template revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// New pods replace old ones (CloneSet ReCreate, Advanced StatefulSet ReCreate,
    /// Advanced DaemonSet Standard or Surging).
    Recreate,
    InPlaceIfPossible,
    InPlaceOnly,
    /// Pods take the new template only when they are deleted.
    OnDelete,
}

/// What a command changes in the template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The restartedAt annotation (template metadata only).
    Restart,
    Image,
    Env,
    Resources,
}

fn text<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.pointer(pointer).and_then(Value::as_str)
}

/// The update policy as the object states it, with OpenKruise's defaults for what it
/// leaves out.
pub fn policy(kind: Kind, object: &Value) -> Policy {
    let strategy_type = text(object, "/spec/updateStrategy/type");
    if strategy_type == Some("OnDelete") {
        return Policy::OnDelete;
    }
    let in_place = match kind {
        Kind::CloneSet => strategy_type,
        Kind::StatefulSet => text(object, "/spec/updateStrategy/rollingUpdate/podUpdatePolicy"),
        Kind::DaemonSet => text(object, "/spec/updateStrategy/rollingUpdate/type"),
    };
    match in_place {
        Some("InPlaceIfPossible") => Policy::InPlaceIfPossible,
        Some("InPlaceOnly") => Policy::InPlaceOnly,
        _ => Policy::Recreate,
    }
}

/// The sentence about how the pods will take `change` under `policy`.
pub fn verdict(policy: Policy, change: Change) -> &'static str {
    use Change::*;
    use Policy::*;
    match (policy, change) {
        (OnDelete, _) => {
            "Pods take the change only when they are deleted (updateStrategy OnDelete)."
        }
        (Recreate, _) => "Pods are recreated with the change (the update strategy recreates pods).",
        (InPlaceIfPossible | InPlaceOnly, Image) => {
            "Pods are updated in place: only the changed containers restart with the new image."
        }
        (InPlaceIfPossible | InPlaceOnly, Restart) => {
            "The annotation reaches the pods in place and their containers keep running; to restart containers, use `kubectl stevedore create crr`."
        }
        (InPlaceIfPossible, Resources) => {
            "Pods are resized in place where only cpu/memory requests or limits change and the pod's QoS class stays; otherwise they are recreated."
        }
        (InPlaceOnly, Resources) => {
            "Pods are resized in place where only cpu/memory requests or limits change and the pod's QoS class stays; any other resource change is refused under InPlaceOnly."
        }
        (InPlaceIfPossible, Env) => "Pods are recreated: an env change cannot be applied in place.",
        (InPlaceOnly, Env) => {
            "Under InPlaceOnly only images and resources may change: the control plane refuses this change."
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn policies_as_each_kind_states_them() {
        let cases = [
            (Kind::CloneSet, json!({}), Policy::Recreate),
            (
                Kind::CloneSet,
                json!({ "updateStrategy": { "type": "InPlaceIfPossible" } }),
                Policy::InPlaceIfPossible,
            ),
            (
                Kind::CloneSet,
                json!({ "updateStrategy": { "type": "InPlaceOnly" } }),
                Policy::InPlaceOnly,
            ),
            (
                Kind::CloneSet,
                json!({ "updateStrategy": { "type": "OnDelete" } }),
                Policy::OnDelete,
            ),
            (
                Kind::StatefulSet,
                json!({ "updateStrategy": { "type": "RollingUpdate" } }),
                Policy::Recreate,
            ),
            (
                Kind::StatefulSet,
                json!({ "updateStrategy": { "rollingUpdate": { "podUpdatePolicy": "InPlaceIfPossible" } } }),
                Policy::InPlaceIfPossible,
            ),
            (
                Kind::StatefulSet,
                json!({ "updateStrategy": { "type": "OnDelete" } }),
                Policy::OnDelete,
            ),
            (
                Kind::DaemonSet,
                json!({ "updateStrategy": { "rollingUpdate": { "type": "Surging" } } }),
                Policy::Recreate,
            ),
            (
                Kind::DaemonSet,
                json!({ "updateStrategy": { "rollingUpdate": { "type": "InPlaceIfPossible" } } }),
                Policy::InPlaceIfPossible,
            ),
        ];
        for (kind, spec, expected) in cases {
            let object = json!({ "spec": spec });
            assert_eq!(policy(kind, &object), expected, "{kind:?} {object}");
        }
    }

    #[test]
    fn verdicts_say_in_place_only_for_what_can_be() {
        let cases = [
            (Policy::InPlaceIfPossible, Change::Image, "in place"),
            (Policy::InPlaceOnly, Change::Image, "in place"),
            (Policy::Recreate, Change::Image, "recreated"),
            (Policy::InPlaceIfPossible, Change::Env, "recreated"),
            (Policy::InPlaceOnly, Change::Env, "refuses"),
            (
                Policy::InPlaceIfPossible,
                Change::Resources,
                "resized in place",
            ),
            (Policy::InPlaceIfPossible, Change::Restart, "keep running"),
            (Policy::OnDelete, Change::Restart, "when they are deleted"),
        ];
        for (policy, change, words) in cases {
            let sentence = verdict(policy, change);
            assert!(
                sentence.contains(words),
                "{policy:?} {change:?}: {sentence}"
            );
        }
    }
}

//! The `SidecarSetUpgradable` pod condition (pure), as OpenKruise sets it: whether each
//! SidecarSet injected into a pod can still upgrade its sidecars in place. Kubernetes lets
//! only a container's `image` change, so a SidecarSet changed in another field (its
//! version without images differs from the pod's) cannot: that pod keeps its sidecars
//! until it is recreated, and the condition says so.
//!
//! The message is a JSON object of SidecarSet name → upgradable, shared by every
//! SidecarSet of the pod (each sets its own entry, keeping the others'); the condition is
//! True only while every entry is true.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

/// The condition's type, as OpenKruise names it.
pub const SIDECARSET_UPGRADABLE: &str = "SidecarSetUpgradable";
/// The reason while every SidecarSet of the pod can upgrade it.
pub const REASON_ALL_UPGRADABLE: &str = "AllSidecarsetUpgradable";
/// The reason while some SidecarSet changed more than its images.
pub const REASON_IMMUTABLE_FIELD: &str = "UpdateImmutableField";

/// The pod's `SidecarSetUpgradable` condition, if it has one.
pub fn current(conditions: &[PodCondition]) -> Option<&PodCondition> {
    conditions.iter().find(|c| c.type_ == SIDECARSET_UPGRADABLE)
}

/// The condition once SidecarSet `set_name` records `upgradable` in it; `None` when that
/// changes nothing. An old message that is not such an object counts as empty (it is
/// overwritten rather than blocking the pod). `lastTransitionTime` moves to `now` only
/// when the status flips (or the condition is new).
pub fn next_condition(
    old: Option<&PodCondition>,
    set_name: &str,
    upgradable: bool,
    now: &Time,
) -> Option<PodCondition> {
    let mut entries: BTreeMap<String, bool> = (old.and_then(|c| c.message.as_deref()))
        .and_then(|message| serde_json::from_str(message).ok())
        .unwrap_or_default();
    entries.insert(set_name.to_owned(), upgradable);
    let all_upgradable = entries.values().all(|&upgradable| upgradable);
    let (status, reason) = if all_upgradable {
        ("True", REASON_ALL_UPGRADABLE)
    } else {
        ("False", REASON_IMMUTABLE_FIELD)
    };
    // A map of strings to booleans always serializes.
    let message = serde_json::to_string(&entries).unwrap_or_default();
    let unchanged = old.is_some_and(|c| {
        c.status == status
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message.as_str())
    });
    if unchanged {
        return None;
    }
    let kept_transition = old
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone());
    Some(PodCondition {
        type_: SIDECARSET_UPGRADABLE.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message),
        last_transition_time: kept_transition.or_else(|| Some(now.clone())),
        last_probe_time: old.and_then(|c| c.last_probe_time.clone()),
        ..PodCondition::default()
    })
}

/// The strategic-merge patch of `pods/status` writing `condition` (merged by type: the
/// pod's other conditions stay), with the pod's UID as a precondition so a pod recreated
/// under its name is not marked.
pub fn status_patch(uid: &str, condition: &PodCondition) -> Value {
    json!({ "metadata": { "uid": uid }, "status": { "conditions": [condition] } })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn time(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).expect("a timestamp"))
    }

    fn condition(status: &str, reason: &str, message: &str, since: i64) -> PodCondition {
        PodCondition {
            type_: SIDECARSET_UPGRADABLE.to_owned(),
            status: status.to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            last_transition_time: Some(time(since)),
            ..PodCondition::default()
        }
    }

    /// (status, reason, message, lastTransitionTime seconds) of the new condition.
    fn summary(new: Option<PodCondition>) -> Option<(String, String, String, i64)> {
        new.map(|c| {
            (
                c.status,
                c.reason.unwrap_or_default(),
                c.message.unwrap_or_default(),
                c.last_transition_time.map_or(0, |t| t.0.as_second()),
            )
        })
    }

    fn expected(
        status: &str,
        reason: &str,
        message: &str,
        since: i64,
    ) -> Option<(String, String, String, i64)> {
        Some((status.into(), reason.into(), message.into(), since))
    }

    #[test]
    fn each_set_records_its_entry_and_the_status_follows_all_of_them() {
        let immutable = REASON_IMMUTABLE_FIELD;
        let all = REASON_ALL_UPGRADABLE;
        let cases = [
            (
                "no condition yet, not upgradable",
                None,
                ("log", false),
                expected("False", immutable, r#"{"log":false}"#, 100),
            ),
            (
                "no condition yet, upgraded: recorded True",
                None,
                ("log", true),
                expected("True", all, r#"{"log":true}"#, 100),
            ),
            (
                "another set's entry kept, the status stays False since 10",
                Some(condition("False", immutable, r#"{"mesh":false}"#, 10)),
                ("log", false),
                expected("False", immutable, r#"{"log":false,"mesh":false}"#, 10),
            ),
            (
                "True only when every entry is true",
                Some(condition(
                    "False",
                    immutable,
                    r#"{"log":false,"mesh":false}"#,
                    10,
                )),
                ("log", true),
                expected("False", immutable, r#"{"log":true,"mesh":false}"#, 10),
            ),
            (
                "the last false entry turning true flips it",
                Some(condition(
                    "False",
                    immutable,
                    r#"{"log":true,"mesh":false}"#,
                    10,
                )),
                ("mesh", true),
                expected("True", all, r#"{"log":true,"mesh":true}"#, 100),
            ),
            (
                "a false entry flips a True condition",
                Some(condition("True", all, r#"{"mesh":true}"#, 10)),
                ("log", false),
                expected("False", immutable, r#"{"log":false,"mesh":true}"#, 100),
            ),
            (
                "an unparseable message counts as empty",
                Some(condition("False", immutable, "not json", 10)),
                ("log", false),
                expected("False", immutable, r#"{"log":false}"#, 10),
            ),
            (
                "unchanged: nothing to write",
                Some(condition("False", immutable, r#"{"log":false}"#, 10)),
                ("log", false),
                None,
            ),
            (
                "unchanged when already True",
                Some(condition("True", all, r#"{"log":true}"#, 10)),
                ("log", true),
                None,
            ),
        ];
        for (case, old, (set, upgradable), want) in cases {
            let got = next_condition(old.as_ref(), set, upgradable, &time(100));
            assert_eq!(summary(got), want, "{case}");
        }
    }

    #[test]
    fn a_wrong_reason_alone_is_rewritten() {
        let old = condition("False", "SomethingElse", r#"{"log":false}"#, 10);
        let new = next_condition(Some(&old), "log", false, &time(100)).expect("a change");
        assert_eq!(new.reason.as_deref(), Some(REASON_IMMUTABLE_FIELD));
    }

    #[test]
    fn the_patch_merges_the_condition_by_type_under_the_pods_uid() {
        let new = next_condition(None, "log", false, &time(100)).expect("a condition");
        let patch = status_patch("uid-1", &new);
        assert_eq!(patch["metadata"]["uid"], "uid-1");
        let written = &patch["status"]["conditions"][0];
        assert_eq!(
            (&written["type"], &written["status"], &written["message"]),
            (
                &json!("SidecarSetUpgradable"),
                &json!("False"),
                &json!(r#"{"log":false}"#)
            )
        );
        assert!(written["lastTransitionTime"].is_string(), "{written}");
    }
}

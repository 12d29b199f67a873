//! The JSON merge patch that writes a whole status. A merge patch keeps every field it
//! leaves out, and a status type leaves out what is empty or unset (an emptied condition
//! list, a count that went back to none): such a field must be spelled out as `null`, or the
//! old value stays, the status never matches what the sync computed, and every sync writes
//! it again.
//!
//! The `Undecodable` condition is never part of it: only the decode layer's writer sets
//! and removes it (`undecodable_condition`). A kind's status is computed from a copy that
//! decoded, carrying over the conditions that copy had, so it would keep a stale one
//! forever, or bring back one that writer just removed.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::undecodable_condition::UNDECODABLE;

/// `{"status": new}`, with `null` for every field `old` has that `new` leaves out, and
/// without the `Undecodable` condition.
pub fn status_merge_patch<S: Serialize>(old: Option<&S>, new: &S) -> Value {
    let mut body = json!(new);
    if let Value::Object(fields) = &mut body {
        leave_out_undecodable(fields);
    }
    if let (Some(old), Value::Object(fields)) = (old.map(|o| json!(o)), &mut body)
        && let Value::Object(old_fields) = old
    {
        remove_missing(&old_fields, fields);
    }
    json!({ "status": body })
}

/// Takes the `Undecodable` condition out of `status.conditions`; a list left empty is
/// left out, so `remove_missing` spells it out as null when the old status had one.
fn leave_out_undecodable(status: &mut Map<String, Value>) {
    let Some(Value::Array(conditions)) = status.get_mut("conditions") else {
        return;
    };
    conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some(UNDECODABLE));
    if conditions.is_empty() {
        status.remove("conditions");
    }
}

fn remove_missing(old: &Map<String, Value>, new: &mut Map<String, Value>) {
    for key in old.keys() {
        if !new.contains_key(key) {
            new.insert(key.clone(), Value::Null);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    use super::*;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Status {
        replicas: i32,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        conditions: Vec<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        collision_count: Option<i32>,
    }

    #[test]
    fn fields_the_new_status_leaves_out_are_removed() {
        let cases = [
            (
                Some(Status {
                    replicas: 1,
                    conditions: vec!["FailedUpdate"],
                    collision_count: Some(1),
                }),
                Status {
                    replicas: 2,
                    conditions: vec![],
                    collision_count: None,
                },
                json!({ "status": { "replicas": 2, "conditions": null, "collisionCount": null } }),
            ),
            (
                Some(Status {
                    replicas: 1,
                    conditions: vec![],
                    collision_count: None,
                }),
                Status {
                    replicas: 1,
                    conditions: vec!["Progressing"],
                    collision_count: None,
                },
                json!({ "status": { "replicas": 1, "conditions": ["Progressing"] } }),
            ),
            (
                None,
                Status {
                    replicas: 3,
                    conditions: vec![],
                    collision_count: None,
                },
                json!({ "status": { "replicas": 3 } }),
            ),
        ];
        for (old, new, want) in cases {
            assert_eq!(status_merge_patch(old.as_ref(), &new), want);
        }
    }

    /// Whatever the kind's status carried over, its write never holds `Undecodable`: a
    /// stale one goes, and a list of only that one is removed.
    #[test]
    fn the_undecodable_condition_is_never_written_by_a_kinds_status() {
        #[derive(Serialize)]
        struct Condition {
            #[serde(rename = "type")]
            type_: &'static str,
        }
        #[derive(Serialize)]
        struct Status {
            replicas: i32,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            conditions: Vec<Condition>,
        }
        let status = |replicas, types: &[&'static str]| Status {
            replicas,
            conditions: types.iter().map(|&type_| Condition { type_ }).collect(),
        };
        let cases = [
            (
                Some(status(1, &[UNDECODABLE])),
                status(2, &[UNDECODABLE]),
                json!({ "status": { "replicas": 2, "conditions": null } }),
            ),
            (
                Some(status(1, &["FailedUpdate", UNDECODABLE])),
                status(1, &[UNDECODABLE, "FailedScale"]),
                json!({ "status": { "replicas": 1, "conditions": [{ "type": "FailedScale" }] } }),
            ),
            (
                None,
                status(1, &[UNDECODABLE]),
                json!({ "status": { "replicas": 1 } }),
            ),
            (
                None,
                status(1, &["Progressing"]),
                json!({ "status": { "replicas": 1, "conditions": [{ "type": "Progressing" }] } }),
            ),
        ];
        for (old, new, want) in cases {
            assert_eq!(status_merge_patch(old.as_ref(), &new), want);
        }
    }

    #[test]
    fn applied_as_a_merge_patch_the_old_condition_is_gone() {
        let old = Status {
            replicas: 1,
            conditions: vec!["FailedUpdate"],
            collision_count: None,
        };
        let new = Status {
            replicas: 1,
            conditions: vec![],
            collision_count: None,
        };
        let mut stored = json!({ "status": old });
        json_patch_merge(&mut stored, &status_merge_patch(Some(&old), &new));
        assert_eq!(stored, json!({ "status": { "replicas": 1 } }));
    }

    /// RFC 7386, as the apiserver applies a merge patch.
    fn json_patch_merge(target: &mut Value, patch: &Value) {
        let Value::Object(fields) = patch else {
            *target = patch.clone();
            return;
        };
        if !target.is_object() {
            *target = json!({});
        }
        let Value::Object(target_fields) = target else {
            return;
        };
        for (key, value) in fields {
            if value.is_null() {
                target_fields.remove(key);
            } else {
                json_patch_merge(
                    target_fields.entry(key.clone()).or_insert(Value::Null),
                    value,
                );
            }
        }
    }
}

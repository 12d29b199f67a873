//! The JSON merge patch that writes a whole status. A merge patch keeps every field it
//! leaves out, and a status type leaves out what is empty or unset (an emptied condition
//! list, a count that went back to none): such a field must be spelled out as `null`, or the
//! old value stays, the status never matches what the sync computed, and every sync writes
//! it again.

use serde::Serialize;
use serde_json::{Map, Value, json};

/// `{"status": new}`, with `null` for every field `old` has that `new` leaves out.
pub fn status_merge_patch<S: Serialize>(old: Option<&S>, new: &S) -> Value {
    let mut body = json!(new);
    if let (Some(old), Value::Object(fields)) = (old.map(|o| json!(o)), &mut body)
        && let Value::Object(old_fields) = old
    {
        remove_missing(&old_fields, fields);
    }
    json!({ "status": body })
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

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

use std::fmt::Debug;

use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::api_error::{ApiError, api_error};
use super::undecodable_condition::UNDECODABLE;

/// Writes `new` as the status of the object `name` with [`status_merge_patch`], unless the
/// status is `new` already: the object as the apiserver wrote it, or `None` when there was
/// nothing to write.
pub async fn write_changed_status<K, S>(
    api: &Api<K>,
    name: &str,
    old: Option<&S>,
    new: &S,
) -> Result<Option<K>, ApiError>
where
    K: Clone + DeserializeOwned + Debug,
    S: Serialize + PartialEq,
{
    if old == Some(new) {
        return Ok(None);
    }
    let patch = Patch::Merge(status_merge_patch(old, new));
    (api.patch_status(name, &PatchParams::default(), &patch)
        .await)
        .map(Some)
        .map_err(api_error("writing status"))
}

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

#[cfg(test)]
mod write_tests {
    use k8s_openapi::api::core::v1::{Pod, PodStatus};
    use serde_json::json;

    use super::*;
    use crate::workload::scripted_api::{ScriptedApi, failure};

    fn status(phase: &str, message: Option<&str>) -> PodStatus {
        PodStatus {
            phase: Some(phase.to_owned()),
            message: message.map(str::to_owned),
            ..PodStatus::default()
        }
    }

    fn written_pod() -> serde_json::Value {
        json!({ "apiVersion": "v1", "kind": "Pod",
                "metadata": { "name": "web", "namespace": "ns", "resourceVersion": "7" } })
    }

    #[tokio::test]
    async fn an_unchanged_status_is_not_written() {
        let server = ScriptedApi::new(Vec::new());
        let api: Api<Pod> = Api::namespaced(server.client(), "ns");
        let old = status("Running", None);
        let written = write_changed_status(&api, "web", Some(&old), &old.clone()).await;
        assert!(matches!(written, Ok(None)));
        assert!(server.sent().is_empty(), "{:?}", server.sent());
    }

    #[tokio::test]
    async fn a_changed_status_is_merge_patched_and_the_written_object_returned() {
        let server = ScriptedApi::new(vec![(200, written_pod())]);
        let api: Api<Pod> = Api::namespaced(server.client(), "ns");
        let (old, new) = (status("Pending", Some("waiting")), status("Running", None));
        let written = write_changed_status(&api, "web", Some(&old), &new).await;
        let written = written.expect("written").expect("a write");
        assert_eq!(written.metadata.resource_version.as_deref(), Some("7"));
        let sent = server.sent();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].method, "PATCH");
        assert!(
            sent[0]
                .uri
                .starts_with("/api/v1/namespaces/ns/pods/web/status"),
            "{}",
            sent[0].uri
        );
        assert_eq!(sent[0].content_type, "application/merge-patch+json");
        assert_eq!(
            sent[0].body,
            json!({ "status": { "phase": "Running", "message": null } })
        );
    }

    #[tokio::test]
    async fn a_refused_write_says_what_was_written_and_the_apiserver_message() {
        let server = ScriptedApi::new(vec![(422, failure(422, "status.phase is invalid"))]);
        let api: Api<Pod> = Api::namespaced(server.client(), "ns");
        let new = status("Running", None);
        let refused = write_changed_status(&api, "web", None, &new).await;
        let refused = refused.expect_err("refused");
        assert_eq!(
            refused.to_string(),
            "writing status: status.phase is invalid"
        );
    }
}

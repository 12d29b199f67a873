//! `patchPodMetadata` (pure): the annotations a SidecarSet sets on the pods it injects,
//! under its policy: Retain keeps a pod's own value, Overwrite replaces it, MergePatchJson
//! merges JSON objects (the SidecarSet's keys win).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::sidecarset::{PatchPolicy, SidecarSetPatchPodMetadata};

/// Why an annotation cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    #[error(
        "the SidecarSet {set} merges the annotation {key} as JSON (patchPolicy MergePatchJson), but {which} value is not a JSON object"
    )]
    NotAnObject {
        set: String,
        key: String,
        which: &'static str,
    },
}

/// Applies `patches` of the SidecarSet `set` to `annotations`.
pub fn patch_annotations(
    annotations: &mut BTreeMap<String, String>,
    patches: &[SidecarSetPatchPodMetadata],
    set: &str,
) -> Result<(), MetadataError> {
    for patch in patches {
        for (key, value) in &patch.annotations {
            let merged = match (patch.patch_policy.unwrap_or_default(), annotations.get(key)) {
                (PatchPolicy::Retain, Some(_)) => continue,
                (PatchPolicy::MergePatchJson, Some(own)) => merge_json(own, value, set, key)?,
                _ => value.clone(),
            };
            annotations.insert(key.clone(), merged);
        }
    }
    Ok(())
}

fn merge_json(own: &str, added: &str, set: &str, key: &str) -> Result<String, MetadataError> {
    let object = |text: &str, which| match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(MetadataError::NotAnObject {
            set: set.to_owned(),
            key: key.to_owned(),
            which,
        }),
    };
    let mut merged = object(own, "the pod's")?;
    merged.extend(object(added, "the SidecarSet's")?);
    Ok(Value::Object(merged).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(policy: PatchPolicy, value: &str) -> SidecarSetPatchPodMetadata {
        SidecarSetPatchPodMetadata {
            annotations: [("k".to_owned(), value.to_owned())].into(),
            patch_policy: Some(policy),
        }
    }

    #[test]
    fn each_policy_meets_the_pod_s_own_value_as_openkruise() {
        let cases = [
            (PatchPolicy::Retain, None, "new", Ok(Some("new"))),
            (PatchPolicy::Retain, Some("own"), "new", Ok(Some("own"))),
            (PatchPolicy::Overwrite, Some("own"), "new", Ok(Some("new"))),
            (
                PatchPolicy::MergePatchJson,
                None,
                r#"{"b":2}"#,
                Ok(Some(r#"{"b":2}"#)),
            ),
            (
                PatchPolicy::MergePatchJson,
                Some(r#"{"a":1,"b":1}"#),
                r#"{"b":2}"#,
                Ok(Some(r#"{"a":1,"b":2}"#)),
            ),
            (
                PatchPolicy::MergePatchJson,
                Some("plain"),
                r#"{"b":2}"#,
                Err("the pod's"),
            ),
            (
                PatchPolicy::MergePatchJson,
                Some("{}"),
                "plain",
                Err("the SidecarSet's"),
            ),
        ];
        for (policy, own, value, expected) in cases {
            let mut annotations: BTreeMap<String, String> = own
                .map(|v| ("k".to_owned(), v.to_owned()))
                .into_iter()
                .collect();
            let result = patch_annotations(&mut annotations, &[patch(policy, value)], "log");
            match expected {
                Ok(after) => {
                    assert_eq!(result, Ok(()), "{policy:?} {own:?}");
                    assert_eq!(
                        annotations.get("k").map(String::as_str),
                        after,
                        "{policy:?} {own:?}"
                    );
                }
                Err(which) => {
                    let err = result.expect_err("refused");
                    assert!(err.to_string().contains(which), "{err}");
                    assert!(err.to_string().contains("SidecarSet log"), "{err}");
                }
            }
        }
    }
}

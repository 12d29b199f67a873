//! What injection leaves on a pod for the rest of SidecarSet to read (pure): the
//! annotations recording the injected SidecarSets and their versions, the variable
//! marking a container as a sidecar, and the reading of a recorded JSON map. Kept below
//! `inject`, `env`, `hot` and the upgrade so that each reads them without reading the
//! others.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The annotation recording each injected SidecarSet's version (JSON map by name).
pub const HASH_ANNOTATION: &str = "kruise.io/sidecarset-hash";
/// The same versions with the sidecar images left out.
pub const HASH_WITHOUT_IMAGE_ANNOTATION: &str = "kruise.io/sidecarset-hash-without-image";
/// The names of the SidecarSets injected, sorted, comma-separated.
pub const INJECTED_LIST_ANNOTATION: &str = "kruise.io/sidecarset-injected-list";
/// The variable marking a container as a sidecar (its value `true`).
pub const INJECTED_ENV: &str = "IS_INJECTED";

/// The JSON map a pod records under `key` (a pod made from an injected pod's copy
/// already has one); what does not read as a JSON object is started afresh.
pub fn recorded(annotations: &BTreeMap<String, String>, key: &str) -> Map<String, Value> {
    (annotations.get(key))
        .and_then(|value| serde_json::from_str::<Value>(value).ok())
        .and_then(|value| value.as_object().cloned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_recorded_json_object_is_read_back() {
        let cases = [
            ("absent", None, Map::new()),
            ("not JSON", Some("log"), Map::new()),
            ("JSON but not an object", Some("[1]"), Map::new()),
            (
                "an object",
                Some(r#"{"log":"v1"}"#),
                Map::from_iter([("log".to_owned(), Value::from("v1"))]),
            ),
        ];
        for (case, value, expected) in cases {
            let annotations: BTreeMap<String, String> = value
                .map(|v| (HASH_ANNOTATION.to_owned(), v.to_owned()))
                .into_iter()
                .collect();
            assert_eq!(recorded(&annotations, HASH_ANNOTATION), expected, "{case}");
        }
    }
}

//! Cleaning `scaleStrategy.podsToDelete` of names whose pods no longer exist, without
//! losing a name someone added meanwhile. The clean list is computed from the CloneSet
//! the sync read; the patch carries that read's resourceVersion, so the apiserver refuses
//! it (409) if the spec changed since, and the retry drops the same names from the list
//! as it is now. A plain merge patch of the list would silently undo a concurrent add.

use std::collections::BTreeSet;

use serde_json::{Value, json};

/// How often a clean-up refused by a concurrent write is re-read and tried again before
/// it is left to the next sync.
pub const MAX_ATTEMPTS: usize = 3;

/// The names in `listed` (the list the plan read) that the plan's `kept` list drops.
pub fn dropped(listed: &[String], kept: &[String]) -> BTreeSet<String> {
    listed
        .iter()
        .filter(|name| !kept.contains(name))
        .cloned()
        .collect()
}

/// `current` without the `dropped` names; `None` when there is nothing to drop.
pub fn without(current: &[String], dropped: &BTreeSet<String>) -> Option<Vec<String>> {
    let kept: Vec<String> = current
        .iter()
        .filter(|name| !dropped.contains(*name))
        .cloned()
        .collect();
    (kept.len() != current.len()).then_some(kept)
}

/// A JSON merge patch writing `list`, valid only while the CloneSet is still at
/// `resource_version` (the version the list was computed from).
pub fn clean_patch(resource_version: Option<&str>, list: &[String]) -> Value {
    let mut patch = json!({ "spec": { "scaleStrategy": { "podsToDelete": list } } });
    if let Some(rv) = resource_version {
        patch["metadata"] = json!({ "resourceVersion": rv });
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_patch_is_conditional_on_the_version_it_was_computed_from() {
        let patch = clean_patch(Some("4711"), &names(&["web-a"]));
        assert_eq!(
            patch,
            json!({
                "metadata": { "resourceVersion": "4711" },
                "spec": { "scaleStrategy": { "podsToDelete": ["web-a"] } }
            })
        );
    }

    #[test]
    fn a_retry_keeps_names_added_meanwhile() {
        // The sync read [a, gone] and planned [a]: "gone" has no pod.
        let dropped = dropped(&names(&["web-a", "web-gone"]), &names(&["web-a"]));
        assert_eq!(dropped, BTreeSet::from(["web-gone".to_owned()]));
        // Meanwhile a user added web-b (the patch was refused with 409); the re-read
        // list loses only the dropped name.
        let reread = names(&["web-a", "web-gone", "web-b"]);
        assert_eq!(without(&reread, &dropped), Some(names(&["web-a", "web-b"])));
        // Someone else cleaned it already: nothing to write.
        assert_eq!(without(&names(&["web-a", "web-b"]), &dropped), None);
    }
}

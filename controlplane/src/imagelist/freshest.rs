//! Which copy of a node's ImageList a status write starts from: the shared cache, or the
//! object the session's own last write returned.
//!
//! A session writes status when it acknowledges a new spec (with the pull results that
//! arrived in the 50 ms before) and again as later results arrive, often within a second; the cache has usually not yet shown the
//! first write then, so a write computed from it is conditional on a resourceVersion
//! that is already gone and conflicts (218 of 1,118 writes in the 100-node fan-out of
//! `tests/bench/imagelist.sh`). Starting from whichever copy is newer avoids that without
//! giving up the condition: a write from anyone else still makes ours conflict and be
//! recomputed.

use crate::api::ImageList;

/// The newer of `cached` and `written` by resourceVersion. The apiserver's resource
/// versions are etcd revisions, comparable as integers (Kubernetes documents this since
/// 1.34 for its own storage); when either does not parse, the cache wins, as it would
/// without this step.
pub fn freshest(cached: Option<&ImageList>, written: Option<&ImageList>) -> Option<ImageList> {
    match (cached, written) {
        (None, _) => None,
        (Some(cached), None) => Some(cached.clone()),
        (Some(cached), Some(written)) => {
            let newer = written.metadata.uid == cached.metadata.uid
                && matches!(
                    (revision(cached), revision(written)),
                    (Some(c), Some(w)) if w > c
                );
            Some(if newer { written } else { cached }.clone())
        }
    }
}

fn revision(list: &ImageList) -> Option<u64> {
    list.metadata.resource_version.as_deref()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn list(uid: &str, resource_version: &str) -> ImageList {
        ImageList {
            metadata: ObjectMeta {
                name: Some("node-a".to_owned()),
                uid: Some(uid.to_owned()),
                resource_version: Some(resource_version.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Default::default(),
            status: None,
        }
    }

    #[test]
    fn the_newer_copy_wins_and_the_cache_breaks_ties_and_doubts() {
        let cases = [
            // (cached, written, expected resourceVersion, why)
            (Some(("u1", "10")), None, Some("10"), "nothing written yet"),
            (
                Some(("u1", "10")),
                Some(("u1", "12")),
                Some("12"),
                "cache behind our write",
            ),
            (
                Some(("u1", "15")),
                Some(("u1", "12")),
                Some("15"),
                "someone wrote after us",
            ),
            (
                Some(("u1", "12")),
                Some(("u1", "12")),
                Some("12"),
                "cache caught up",
            ),
            (
                Some(("u2", "3")),
                Some(("u1", "12")),
                Some("3"),
                "list recreated: new UID",
            ),
            (
                Some(("u1", "x")),
                Some(("u1", "12")),
                Some("x"),
                "unparsable: trust the cache",
            ),
            (
                None,
                Some(("u1", "12")),
                None,
                "list gone from the cache: nothing to write",
            ),
        ];
        for (cached, written, expected, why) in cases {
            let cached = cached.map(|(u, rv)| list(u, rv));
            let written = written.map(|(u, rv)| list(u, rv));
            let got = freshest(cached.as_ref(), written.as_ref());
            assert_eq!(
                got.and_then(|l| l.metadata.resource_version).as_deref(),
                expected,
                "{why}"
            );
        }
    }
}

//! How a pod names the revision it runs (OpenKruise's `revisionadapter`): the one place
//! that reads and writes `controller-revision-hash`, so rollout counts, deletion ranking,
//! in-place grace, status and history pruning can never disagree about which pods are
//! updated.
//!
//! Reading accepts both forms — the revision name (`<set>-<hash>`) and the bare hash — as
//! OpenKruise's `EqualToRevisionHash` does, so a set whose pods were labelled either way
//! (or by the other form before a switch) still finds them. Writing is what varies per
//! workload: [`RevisionAdapter::FullName`] or [`RevisionAdapter::ShortHash`].

use std::collections::BTreeMap;

/// Pod label naming the ControllerRevision the pod was created from or updated to.
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller-revision-hash";
/// Pod label holding only the hash part, as Deployments write it; OpenKruise writes both.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// The part after the last dash: OpenKruise's short hash, written to `pod-template-hash`
/// (and to `controller-revision-hash` in the short form).
pub fn short_hash(revision: &str) -> &str {
    revision.rsplit('-').next().unwrap_or(revision)
}

/// What a workload writes into `controller-revision-hash`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RevisionAdapter {
    /// The revision name, `<set>-<hash>` (OpenKruise's default).
    #[default]
    FullName,
    /// Only the hash (OpenKruise's CloneSetShortHash gate), for names that must stay short.
    ShortHash,
}

impl RevisionAdapter {
    /// The pod's `controller-revision-hash` label, as written.
    pub fn pod_revision(labels: &BTreeMap<String, String>) -> Option<&str> {
        labels
            .get(CONTROLLER_REVISION_HASH_LABEL)
            .map(String::as_str)
    }

    /// Whether a `controller-revision-hash` value names `revision`, in either form.
    pub fn label_names(label: Option<&str>, revision: &str) -> bool {
        match label {
            Some(label) => label == revision || short_hash(label) == short_hash(revision),
            None => false,
        }
    }

    /// Whether a pod with these labels is on `revision`.
    pub fn is_on(labels: &BTreeMap<String, String>, revision: &str) -> bool {
        Self::label_names(Self::pod_revision(labels), revision)
    }

    /// The value this workload writes into `controller-revision-hash` for `revision`.
    pub fn hash_label_value(self, revision: &str) -> String {
        match self {
            Self::FullName => revision.to_owned(),
            Self::ShortHash => short_hash(revision).to_owned(),
        }
    }

    /// Every revision label a pod of `revision` carries (OpenKruise `WriteRevisionHash`):
    /// `controller-revision-hash` in this workload's form and `pod-template-hash`.
    pub fn pod_labels(self, revision: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                CONTROLLER_REVISION_HASH_LABEL.to_owned(),
                self.hash_label_value(revision),
            ),
            (
                POD_TEMPLATE_HASH_LABEL.to_owned(),
                short_hash(revision).to_owned(),
            ),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_writes_its_label_and_the_short_hash() {
        assert_eq!(
            RevisionAdapter::FullName.pod_labels("web-abc12"),
            BTreeMap::from([
                (
                    CONTROLLER_REVISION_HASH_LABEL.to_owned(),
                    "web-abc12".to_owned()
                ),
                (POD_TEMPLATE_HASH_LABEL.to_owned(), "abc12".to_owned()),
            ])
        );
        assert_eq!(
            RevisionAdapter::ShortHash.pod_labels("web-abc12"),
            BTreeMap::from([
                (
                    CONTROLLER_REVISION_HASH_LABEL.to_owned(),
                    "abc12".to_owned()
                ),
                (POD_TEMPLATE_HASH_LABEL.to_owned(), "abc12".to_owned()),
            ])
        );
        // What a writer wrote, every reader finds.
        for adapter in [RevisionAdapter::FullName, RevisionAdapter::ShortHash] {
            assert!(RevisionAdapter::is_on(
                &adapter.pod_labels("web-abc12"),
                "web-abc12"
            ));
        }
    }
}

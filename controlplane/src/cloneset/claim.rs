//! Adoption and release (Kubernetes' `ControllerRefManager`): a set owns the pods it
//! controls; it adopts orphans its selector matches and releases pods that stop matching.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::workload::ownership::{controller_of, is_controlled_by};
use crate::workload::selector::selector_matches;

/// What to do about one object in the set's namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Controlled by the set and still matching: part of the set.
    Owned,
    /// An orphan that matches: add the controller reference.
    Adopt,
    /// Controlled by the set but no longer matching: remove the controller reference.
    Release,
    /// Not the set's business.
    Ignore,
}

/// Decides the claim of `meta` by the set with `uid` and `selector`. The set does not adopt
/// while it is being deleted, nor adopt objects that are themselves being deleted. An
/// invalid selector matches nothing.
pub fn claim(meta: &ObjectMeta, uid: &str, selector: &LabelSelector, set_deleting: bool) -> Claim {
    let empty = Default::default();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let matches = !selector_is_empty(selector) && selector_matches(selector, labels) == Some(true);
    if is_controlled_by(meta, uid) {
        if matches || meta.deletion_timestamp.is_some() {
            Claim::Owned
        } else {
            Claim::Release
        }
    } else if controller_of(meta).is_none()
        && matches
        && !set_deleting
        && meta.deletion_timestamp.is_none()
    {
        Claim::Adopt
    } else {
        Claim::Ignore
    }
}

/// Kubernetes refuses to let an empty selector match everything in a workload.
fn selector_is_empty(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref().is_none_or(|l| l.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|e| e.is_empty())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn meta(app: &str, controller_uid: Option<&str>, deleting: bool) -> ObjectMeta {
        ObjectMeta {
            labels: Some(BTreeMap::from([("app".to_owned(), app.to_owned())])),
            owner_references: controller_uid.map(|uid| {
                vec![OwnerReference {
                    uid: uid.to_owned(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]
            }),
            deletion_timestamp: deleting.then_some(Time(Timestamp::UNIX_EPOCH)),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn adopts_releases_and_ignores_like_the_ref_manager() {
        let selector = LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
            match_expressions: None,
        };
        let table = [
            (meta("web", Some("me"), false), false, Claim::Owned),
            (meta("db", Some("me"), false), false, Claim::Release),
            (meta("db", Some("me"), true), false, Claim::Owned),
            (meta("web", None, false), false, Claim::Adopt),
            (meta("web", None, false), true, Claim::Ignore),
            (meta("web", None, true), false, Claim::Ignore),
            (meta("web", Some("other"), false), false, Claim::Ignore),
            (meta("db", None, false), false, Claim::Ignore),
        ];
        for (i, (m, deleting, want)) in table.into_iter().enumerate() {
            assert_eq!(claim(&m, "me", &selector, deleting), want, "case {i}");
        }
        assert_eq!(
            claim(
                &meta("web", None, false),
                "me",
                &LabelSelector::default(),
                false
            ),
            Claim::Ignore,
            "an empty selector adopts nothing"
        );
    }
}

//! Adoption and release (Kubernetes' `ControllerRefManager`), for any workload kind and
//! any kind it owns: a set owns the objects it controls; it adopts orphans its selector
//! matches and releases objects that stop matching. `claim` decides, `claim_objects`
//! writes the owner references.

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt as _};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::controller::api_error::{ApiError, api_error};
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

/// The strategic-merge patch that adopts an object: `owner` becomes its controller, and
/// the patch only applies to the object with `uid` (not one recreated under its name).
pub fn adopt_patch(owner: &OwnerReference, uid: Option<&str>) -> Value {
    json!({ "metadata": { "ownerReferences": [owner], "uid": uid } })
}

/// The strategic-merge patch that releases an object from the owner with `owner_uid`.
pub fn release_patch(owner_uid: &str, uid: Option<&str>) -> Value {
    json!({ "metadata": {
        "ownerReferences": [{ "$patch": "delete", "uid": owner_uid }],
        "uid": uid,
    } })
}

/// Claims `candidates` (objects in the workload's namespace) for the workload `owner`
/// with `selector`: returns those it controls, adopting matching orphans on the way and
/// releasing the ones it no longer selects.
pub async fn claim_objects<K>(
    api: &Api<K>,
    candidates: impl IntoIterator<Item = Arc<K>>,
    owner: &OwnerReference,
    selector: &LabelSelector,
) -> Result<Vec<Arc<K>>, ApiError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let noun = K::kind(&()).to_lowercase();
    let mut owned = Vec::new();
    for object in candidates {
        let name = object.name_any();
        let uid = object.meta().uid.as_deref();
        let adopt = match claim(object.meta(), &owner.uid, selector, false) {
            Claim::Owned => {
                owned.push(object);
                continue;
            }
            Claim::Ignore => continue,
            Claim::Adopt => true,
            Claim::Release => false,
        };
        let (patch, action) = if adopt {
            (adopt_patch(owner, uid), "adopting")
        } else {
            (release_patch(&owner.uid, uid), "releasing")
        };
        let written = api
            .patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map_err(api_error(format!("{action} {noun} {name}")))?;
        if adopt {
            owned.push(Arc::new(written));
        }
    }
    Ok(owned)
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
    fn adoption_and_release_patches_are_bound_to_the_objects_uid() {
        let owner = OwnerReference {
            api_version: "apps.kruise.io/v1alpha1".into(),
            kind: "CloneSet".into(),
            name: "web".into(),
            uid: "set-uid".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        assert_eq!(
            adopt_patch(&owner, Some("pod-uid")),
            serde_json::json!({ "metadata": {
                "ownerReferences": [{
                    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web",
                    "uid": "set-uid", "controller": true, "blockOwnerDeletion": true,
                }],
                "uid": "pod-uid",
            } })
        );
        assert_eq!(
            release_patch("set-uid", Some("pod-uid")),
            serde_json::json!({ "metadata": {
                "ownerReferences": [{ "$patch": "delete", "uid": "set-uid" }],
                "uid": "pod-uid",
            } })
        );
    }

    #[tokio::test]
    async fn claiming_patches_only_orphans_to_adopt_and_pods_to_release() {
        use k8s_openapi::api::core::v1::Pod;

        use crate::workload::scripted_api::ScriptedApi;

        let pod = |name: &str, app: &str, controller_uid: Option<&str>| {
            let mut meta = meta(app, controller_uid, false);
            meta.name = Some(name.to_owned());
            meta.uid = Some(format!("{name}-uid"));
            Arc::new(Pod {
                metadata: meta,
                ..Pod::default()
            })
        };
        let owner = OwnerReference {
            api_version: "apps.kruise.io/v1alpha1".into(),
            kind: "CloneSet".into(),
            name: "web".into(),
            uid: "me".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let mut adopted = (*pod("orphan", "web", Some("me"))).clone();
        adopted.metadata.owner_references = Some(vec![owner.clone()]);
        let api = ScriptedApi::new(vec![
            (200, serde_json::json!(adopted)),
            (200, serde_json::json!(*pod("strayed", "db", None))),
        ]);
        let selector = LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
            match_expressions: None,
        };
        let candidates = [
            pod("mine", "web", Some("me")),
            pod("orphan", "web", None),
            pod("strayed", "db", Some("me")),
            pod("theirs", "web", Some("other")),
        ];
        let pods: Api<Pod> = Api::namespaced(api.client(), "default");
        let owned = claim_objects(&pods, candidates, &owner, &selector)
            .await
            .expect("claimed");
        let names: Vec<String> = owned.iter().map(|p| p.name_any()).collect();
        assert_eq!(names, ["mine", "orphan"]);
        let sent = api.sent();
        assert!(
            sent.iter()
                .all(|s| s.content_type == "application/strategic-merge-patch+json")
        );
        let patched: Vec<(&str, &str, &Value)> = sent
            .iter()
            .map(|s| (s.method.as_str(), s.uri.as_str(), &s.body))
            .collect();
        assert_eq!(
            patched,
            [
                (
                    "PATCH",
                    "/api/v1/namespaces/default/pods/orphan?",
                    &adopt_patch(&owner, Some("orphan-uid"))
                ),
                (
                    "PATCH",
                    "/api/v1/namespaces/default/pods/strayed?",
                    &release_patch("me", Some("strayed-uid"))
                ),
            ]
        );
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

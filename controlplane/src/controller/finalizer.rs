//! A finalizer that holds a deleted object until its controller has cleaned up after it
//! (kube-runtime's `finalizer`): the state is decided first, purely, from the object's
//! metadata; the patches that add and remove the finalizer are conditional on the
//! resourceVersion they were computed from, so a concurrent change of the list is never
//! overwritten.

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::api_error::{ApiError, api_error};

/// Where an object stands with respect to one finalizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalizerState {
    /// Live, without the finalizer: add it before acting on anything.
    Add,
    /// Live and held: sync it as usual.
    Apply,
    /// Deleted while held: clean up, then remove the finalizer.
    Cleanup,
    /// Deleted and no longer held: nothing is left to do.
    Released,
}

impl FinalizerState {
    pub fn of(meta: &ObjectMeta, finalizer: &str) -> Self {
        let held = has_finalizer(meta, finalizer);
        match (meta.deletion_timestamp.is_some(), held) {
            (false, false) => Self::Add,
            (false, true) => Self::Apply,
            (true, true) => Self::Cleanup,
            (true, false) => Self::Released,
        }
    }
}

fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|f| f == finalizer)
}

/// The merge patch that adds `finalizer` to the object's list.
pub fn add_patch(meta: &ObjectMeta, finalizer: &str) -> Value {
    let mut finalizers = meta.finalizers.clone().unwrap_or_default();
    finalizers.push(finalizer.to_owned());
    list_patch(meta, &finalizers)
}

/// The merge patch that removes `finalizer` from the object's list.
pub fn remove_patch(meta: &ObjectMeta, finalizer: &str) -> Value {
    let finalizers: Vec<String> = (meta.finalizers.iter().flatten())
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    list_patch(meta, &finalizers)
}

fn list_patch(meta: &ObjectMeta, finalizers: &[String]) -> Value {
    json!({ "metadata": {
        "finalizers": finalizers,
        "resourceVersion": meta.resource_version,
    } })
}

/// Adds `finalizer` to the object `name`; the object as written.
pub async fn add<K>(
    api: &Api<K>,
    name: &str,
    meta: &ObjectMeta,
    finalizer: &str,
) -> Result<K, ApiError>
where
    K: Clone + DeserializeOwned + Debug,
{
    let patch = Patch::Merge(add_patch(meta, finalizer));
    api.patch(name, &PatchParams::default(), &patch)
        .await
        .map_err(api_error("adding the finalizer"))
}

/// Removes `finalizer` from the object `name`; an object already gone is fine.
pub async fn remove<K>(
    api: &Api<K>,
    name: &str,
    meta: &ObjectMeta,
    finalizer: &str,
) -> Result<(), ApiError>
where
    K: Clone + DeserializeOwned + Debug,
{
    let patch = Patch::Merge(remove_patch(meta, finalizer));
    match api.patch(name, &PatchParams::default(), &patch).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(err) => Err(api_error("removing the finalizer")(err)),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    const MINE: &str = "example.dev/cleanup";

    fn meta(finalizers: &[&str], deleting: bool) -> ObjectMeta {
        ObjectMeta {
            finalizers: Some(finalizers.iter().map(|f| (*f).to_owned()).collect()),
            deletion_timestamp: deleting.then_some(Time(Timestamp::UNIX_EPOCH)),
            resource_version: Some("12".into()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn the_state_follows_deletion_and_the_finalizer() {
        let table = [
            (meta(&[], false), FinalizerState::Add),
            (meta(&["other"], false), FinalizerState::Add),
            (meta(&["other", MINE], false), FinalizerState::Apply),
            (meta(&[MINE], true), FinalizerState::Cleanup),
            (meta(&["other"], true), FinalizerState::Released),
            (ObjectMeta::default(), FinalizerState::Add),
        ];
        for (i, (meta, want)) in table.into_iter().enumerate() {
            assert_eq!(FinalizerState::of(&meta, MINE), want, "case {i}");
        }
    }

    #[test]
    fn patches_keep_other_finalizers_and_are_conditional() {
        assert_eq!(
            add_patch(&meta(&["other"], false), MINE),
            json!({ "metadata": { "finalizers": ["other", MINE], "resourceVersion": "12" } })
        );
        assert_eq!(
            remove_patch(&meta(&["other", MINE], true), MINE),
            json!({ "metadata": { "finalizers": ["other"], "resourceVersion": "12" } })
        );
        assert_eq!(
            remove_patch(&meta(&[MINE], true), MINE),
            json!({ "metadata": { "finalizers": [], "resourceVersion": "12" } }),
            "an emptied list is written as empty, not left out"
        );
    }
}

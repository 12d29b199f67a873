//! A SidecarSet's versions as ControllerRevisions (pure), as OpenKruise keeps them: in
//! the control plane's namespace (a SidecarSet has none), named `<set>-<hash of the data>`,
//! labelled `kruise.io/sidecarset-name` (and `apps.kruise.io/sidecarset-custom-version`
//! copied from the SidecarSet), the data a patch that replaces the injected fields; the
//! newest `revisionHistoryLimit` (default 10) kept besides the latest. Injection restores
//! the revision `injectionStrategy.revision` names (`restore`, `pick`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use crate::api::SidecarSet;
use crate::api::sidecarset::{CUSTOM_VERSION_LABEL, InjectRevisionPolicy};
use crate::workload::revision::{hash_revision_data, revision_name};
use crate::workload::selector::selector_matches;

/// The label naming the SidecarSet a revision belongs to.
pub const SIDECARSET_NAME_LABEL: &str = "kruise.io/sidecarset-name";

/// The spec fields a revision records and restores: what injection writes into pods.
const RECORDED_FIELDS: [&str; 5] = [
    "containers",
    "initContainers",
    "volumes",
    "imagePullSecrets",
    "patchPodMetadata",
];

/// The fields a revision records: what injection writes into pods.
pub fn revision_data(set: &SidecarSet) -> Value {
    let spec = serde_json::to_value(&set.spec).unwrap_or_default();
    let mut recorded = serde_json::Map::new();
    recorded.insert("$patch".to_owned(), json!("replace"));
    for field in RECORDED_FIELDS {
        if let Some(value) = spec.get(field) {
            recorded.insert(field.to_owned(), value.clone());
        }
    }
    json!({ "spec": recorded })
}

/// The revision of `set`'s current spec, in `namespace`, numbered `number`.
pub fn current_revision(set: &SidecarSet, namespace: &str, number: i64) -> ControllerRevision {
    let data = revision_data(set);
    let set_name = set.metadata.name.clone().unwrap_or_default();
    let collisions = set.status.as_ref().and_then(|s| s.collision_count);
    let hash = hash_revision_data(data.to_string().as_bytes(), collisions);
    let mut labels = BTreeMap::from([(SIDECARSET_NAME_LABEL.to_owned(), set_name.clone())]);
    if let Some(version) = set
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CUSTOM_VERSION_LABEL))
    {
        labels.insert(CUSTOM_VERSION_LABEL.to_owned(), version.clone());
    }
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision_name(&set_name, &hash)),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(data)),
        revision: number,
    }
}

/// What the history needs now: the revision to create (none when one with the same data
/// exists), the latest revision's name, and the revisions to delete.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryStep {
    pub create: Option<ControllerRevision>,
    pub latest: String,
    pub delete: Vec<String>,
}

/// The history step of `set` over its `revisions` (those labelled with its name).
pub fn history_step(
    set: &SidecarSet,
    namespace: &str,
    revisions: &[&ControllerRevision],
) -> HistoryStep {
    let data = revision_data(set);
    let mut sorted: Vec<&ControllerRevision> = revisions.to_vec();
    sorted.sort_by_key(|r| r.revision);
    let next = sorted.last().map_or(1, |r| r.revision + 1);
    let existing = sorted
        .iter()
        .rev()
        .find(|r| r.data.as_ref().map(|d| &d.0) == Some(&data));
    let (create, latest) = match existing {
        Some(found) => (None, found.metadata.name.clone().unwrap_or_default()),
        None => {
            let revision = current_revision(set, namespace, next);
            let name = revision.metadata.name.clone().unwrap_or_default();
            (Some(revision), name)
        }
    };
    let limit = usize::try_from(set.spec.revision_history_limit.unwrap_or(10).max(0)).unwrap_or(0);
    let older: Vec<&&ControllerRevision> = sorted
        .iter()
        .filter(|r| r.metadata.name.as_deref() != Some(&latest))
        .collect();
    let delete = (older.iter().take(older.len().saturating_sub(limit)))
        .filter_map(|r| r.metadata.name.clone())
        .collect();
    HistoryStep {
        create,
        latest,
        delete,
    }
}

/// The revisions of the SidecarSet `set_name` among `all` (those in `namespace` carrying
/// its name label).
pub fn of_set<'a>(
    all: &'a [std::sync::Arc<ControllerRevision>],
    namespace: &str,
    set_name: &str,
) -> Vec<&'a ControllerRevision> {
    (all.iter())
        .map(std::sync::Arc::as_ref)
        .filter(|r| r.metadata.namespace.as_deref() == Some(namespace))
        .filter(|r| label_of(r, SIDECARSET_NAME_LABEL) == Some(set_name))
        .collect()
}

/// The value of `revision`'s label `key`.
fn label_of<'a>(revision: &'a ControllerRevision, key: &str) -> Option<&'a str> {
    (revision.metadata.labels.as_ref())
        .and_then(|labels| labels.get(key))
        .map(String::as_str)
}

/// The revision `injectionStrategy.revision` names among `revisions`: by name, else the
/// newest carrying its custom version.
pub fn pick<'a>(
    set: &SidecarSet,
    revisions: &[&'a ControllerRevision],
) -> Option<&'a ControllerRevision> {
    let wanted = set.spec.injection_strategy.revision.as_ref()?;
    if let Some(name) = &wanted.revision_name {
        return revisions
            .iter()
            .copied()
            .find(|r| r.metadata.name.as_ref() == Some(name));
    }
    let version = wanted.custom_version.as_ref()?;
    (revisions.iter().copied())
        .filter(|r| label_of(r, CUSTOM_VERSION_LABEL) == Some(version.as_str()))
        .max_by_key(|r| r.revision)
}

/// `set` with the fields `revision` recorded; `None` when its data is not a revision of a
/// SidecarSet.
pub fn restore(set: &SidecarSet, revision: &ControllerRevision) -> Option<SidecarSet> {
    let recorded = revision.data.as_ref()?.0.get("spec")?.as_object()?;
    let mut spec = serde_json::to_value(&set.spec).ok()?;
    for field in RECORDED_FIELDS {
        match recorded.get(field) {
            Some(value) => spec[field] = value.clone(),
            None => {
                spec.as_object_mut()?.remove(field);
            }
        }
    }
    let mut restored = set.clone();
    restored.spec = serde_json::from_value(spec).ok()?;
    // Pods record the revision they were injected with.
    let mut status = restored.status.take().unwrap_or_default();
    status.latest_revision = revision.metadata.name.clone().unwrap_or_default();
    restored.status = Some(status);
    Some(restored)
}

/// The version of `set` a new pod with `labels` is injected with (OpenKruise's
/// `getSuitableRevisionSidecarSet`): the latest spec unless `injectionStrategy.revision`
/// names a revision that exists; that one under policy Always or a paused update; under
/// Partial, that one for a pod the update selector leaves out, else that one with the
/// probability of a percentage `partition` (`draw` is uniform in [0, 1)).
pub fn version_to_inject(
    set: &SidecarSet,
    revisions: &[&ControllerRevision],
    labels: &BTreeMap<String, String>,
    draw: f64,
) -> SidecarSet {
    let Some(specific) = pick(set, revisions).and_then(|r| restore(set, r)) else {
        return set.clone();
    };
    let update = &set.spec.update_strategy;
    let policy = (set.spec.injection_strategy.revision.as_ref())
        .and_then(|r| r.policy)
        .unwrap_or_default();
    if update.paused || policy == InjectRevisionPolicy::Always {
        return specific;
    }
    let selected =
        (update.selector.as_ref()).is_none_or(|s| selector_matches(s, labels) == Some(true));
    if !selected {
        return specific;
    }
    let old_share = match &update.partition {
        Some(IntOrString::String(text)) => {
            text.trim_end_matches('%').parse::<f64>().unwrap_or(0.0) / 100.0
        }
        _ => 0.0,
    };
    if draw < old_share {
        specific
    } else {
        set.clone()
    }
}

#[cfg(test)]
#[path = "revisions_tests.rs"]
mod tests;

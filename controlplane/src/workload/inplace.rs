//! The in-place update protocol (OpenKruise `pkg/util/inplaceupdate`), as pure steps:
//! decide whether a template change can be applied in place, start the update (state
//! annotation, readiness gate, grace period), finish the grace period, and tell when the
//! kubelet has restarted the changed containers so the pod can be marked ready again.
//!
//! Nothing here sleeps or patches: each step returns the patch or the requeue delay.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Pod, PodTemplateSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value, json};

use crate::api::common::PodUpdatePolicy;

use super::revision_adapter::{CONTROLLER_REVISION_HASH_LABEL, RevisionAdapter};
use super::template_defaults;

#[path = "inplace_batches.rs"]
pub mod batches;
#[path = "inplace_resize.rs"]
pub mod resize;
#[path = "inplace_state.rs"]
pub mod state;

use resize::ResourcesChange;

pub use state::{
    AnnotationError, Batches, ContainerBatch, GRACE_ANNOTATION, GraceSpec,
    InPlaceUpdateContainerStatus, InPlaceUpdateState, PreCheckBeforeNext, STATE_ANNOTATION,
    update_in_progress,
};

/// Readiness gate that keeps a pod out of Service endpoints while it updates in place.
pub const INPLACE_UPDATE_READY: &str = "InPlaceUpdateReady";
/// Reason on `InPlaceUpdateReady=False`.
pub const REASON_START: &str = "StartInPlaceUpdate";
/// Reason on `InPlaceUpdateReady=True` once the update is done.
pub const REASON_DONE: &str = "InPlaceUpdateDone";

#[derive(Debug, thiserror::Error)]
pub enum InPlaceError {
    #[error(
        "updateStrategy.type is InPlaceOnly but the template change cannot be applied in place: {} changed; only container images, container cpu/memory resources (keeping the pod's QoS class) and pod labels/annotations can change in place",
        .changed.join(", ")
    )]
    InPlaceOnlyRefused { changed: Vec<String> },
    #[error("could not compare the pod templates: {0}")]
    Compare(#[source] serde_json::Error),
    #[error(transparent)]
    Annotation(#[from] AnnotationError),
}

/// Label or annotation changes: `Some` sets the value, `None` removes the key.
pub type MetadataChanges = BTreeMap<String, Option<String>>;

/// What an in-place update changes on the pod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InPlaceUpdateSpec {
    /// Container name → new image.
    pub container_images: BTreeMap<String, String>,
    /// Container name → new resources, applied through the pod's `resize` subresource.
    pub container_resources: BTreeMap<String, ResourceRequirements>,
    pub labels: MetadataChanges,
    pub annotations: MetadataChanges,
}

/// How to move a pod from one template to another.
#[derive(Clone, Debug, PartialEq)]
pub enum UpdateMethod {
    InPlace(InPlaceUpdateSpec),
    /// Delete and recreate; `changed` names the fields that could not change in place
    /// (empty when the policy is ReCreate and nothing else forced it).
    Recreate {
        changed: Vec<String>,
    },
}

/// Chooses in-place or recreate for a template change under `policy`. InPlaceOnly refuses a
/// change that is not in-place-able, naming the fields, instead of recreating.
pub fn choose_update_method(
    policy: PodUpdatePolicy,
    old: &PodTemplateSpec,
    new: &PodTemplateSpec,
) -> Result<UpdateMethod, InPlaceError> {
    let (spec, changed) = template_diff(old, new)?;
    match policy {
        PodUpdatePolicy::ReCreate => Ok(UpdateMethod::Recreate { changed }),
        _ if changed.is_empty() => Ok(UpdateMethod::InPlace(spec)),
        PodUpdatePolicy::InPlaceIfPossible => Ok(UpdateMethod::Recreate { changed }),
        PodUpdatePolicy::InPlaceOnly => Err(InPlaceError::InPlaceOnlyRefused { changed }),
    }
}

/// Whether changed claim templates recreate a pod whose pod template changed too, under
/// `policy` (the CloneSet's claim templates are part of its revision). InPlaceIfPossible:
/// yes, the pod comes back with claims from the new templates (OpenKruise's
/// RecreatePodWhenChangeVCTInCloneSet). ReCreate recreates for the template anyway.
/// InPlaceOnly: no, OpenKruise sets `IgnoreVolumeClaimTemplatesHashDiff` for it, so the
/// pod is updated as its template allows, in place, and keeps its claims; only pods
/// created later get claims from the new templates.
pub fn claim_templates_recreate(policy: PodUpdatePolicy, claim_templates_changed: bool) -> bool {
    match policy {
        PodUpdatePolicy::InPlaceIfPossible => claim_templates_changed,
        PodUpdatePolicy::ReCreate | PodUpdatePolicy::InPlaceOnly => false,
    }
}

/// Splits a template change into its in-place-able part and the names of the fields that
/// are not in-place-able (`spec.volumes`, `spec.containers[app].env`, ...).
pub fn template_diff(
    old: &PodTemplateSpec,
    new: &PodTemplateSpec,
) -> Result<(InPlaceUpdateSpec, Vec<String>), InPlaceError> {
    let mut spec = InPlaceUpdateSpec::default();
    let mut changed = BTreeSet::new();
    let (old_meta, new_meta) = (
        old.metadata.clone().unwrap_or_default(),
        new.metadata.clone().unwrap_or_default(),
    );
    spec.labels = map_changes(old_meta.labels.as_ref(), new_meta.labels.as_ref());
    spec.annotations = map_changes(old_meta.annotations.as_ref(), new_meta.annotations.as_ref());
    let strip = |mut meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.labels = None;
        meta.annotations = None;
        serde_json::to_value(meta).map_err(InPlaceError::Compare)
    };
    diff_objects(
        "metadata",
        &strip(old_meta)?,
        &strip(new_meta)?,
        &mut changed,
    );

    let mut old_spec = serde_json::to_value(&old.spec).map_err(InPlaceError::Compare)?;
    let mut new_spec = serde_json::to_value(&new.spec).map_err(InPlaceError::Compare)?;
    // A default spelled out on one side only (a revision from before the CRD had it) is no change.
    template_defaults::strip_pod_spec(&mut old_spec);
    template_defaults::strip_pod_spec(&mut new_spec);
    match (old_spec.as_object(), new_spec.as_object()) {
        (Some(o), Some(n)) => {
            for key in o.keys().chain(n.keys()).collect::<BTreeSet<_>>() {
                let (ov, nv) = (o.get(key), n.get(key));
                if key == "containers" {
                    diff_containers(ov, nv, &mut spec, &mut changed);
                } else if ov != nv {
                    changed.insert(format!("spec.{key}"));
                }
            }
        }
        _ if old_spec != new_spec => {
            changed.insert("spec".to_owned());
        }
        _ => {}
    }
    if !spec.container_resources.is_empty()
        && resize::qos_class(&old_spec) != resize::qos_class(&new_spec)
    {
        // Kubernetes refuses a resize that changes the QoS class.
        for name in std::mem::take(&mut spec.container_resources).into_keys() {
            changed.insert(format!("spec.containers[{name}].resources"));
        }
    }
    Ok((spec, changed.into_iter().collect()))
}

fn map_changes(
    old: Option<&BTreeMap<String, String>>,
    new: Option<&BTreeMap<String, String>>,
) -> MetadataChanges {
    let (empty_old, empty_new) = (BTreeMap::new(), BTreeMap::new());
    let (old, new) = (old.unwrap_or(&empty_old), new.unwrap_or(&empty_new));
    let mut changes: MetadataChanges = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    changes.extend(
        old.keys()
            .filter(|k| !new.contains_key(*k))
            .map(|k| (k.clone(), None)),
    );
    changes
}

fn diff_objects(prefix: &str, old: &Value, new: &Value, changed: &mut BTreeSet<String>) {
    let (empty_old, empty_new) = (Map::new(), Map::new());
    let o = old.as_object().unwrap_or(&empty_old);
    let n = new.as_object().unwrap_or(&empty_new);
    for key in o.keys().chain(n.keys()).collect::<BTreeSet<_>>() {
        if o.get(key) != n.get(key) {
            changed.insert(format!("{prefix}.{key}"));
        }
    }
}

/// Containers change in place only by image and resizable resources: the same
/// containers, in the same order (OpenKruise accepts only `replace` ops on
/// `/spec/containers/N/image` and, since 1.8, on their `resources`).
fn diff_containers(
    old: Option<&Value>,
    new: Option<&Value>,
    spec: &mut InPlaceUpdateSpec,
    changed: &mut BTreeSet<String>,
) {
    let as_list = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    let (old, new) = (as_list(old), as_list(new));
    let name = |c: &Value| {
        c.get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    if old.len() != new.len() || old.iter().zip(&new).any(|(o, n)| name(o) != name(n)) {
        changed.insert("spec.containers".to_owned());
        return;
    }
    for (mut o, mut n) in old.into_iter().zip(new) {
        let container = name(&n);
        let old_image = o.as_object_mut().and_then(|m| m.remove("image"));
        let new_image = n.as_object_mut().and_then(|m| m.remove("image"));
        if old_image != new_image {
            match new_image.as_ref().and_then(Value::as_str) {
                Some(image) if old_image.is_some() => {
                    spec.container_images
                        .insert(container.clone(), image.to_owned());
                }
                _ => {
                    changed.insert(format!("spec.containers[{container}].image"));
                }
            }
        }
        let old_resources = o.as_object_mut().and_then(|m| m.remove("resources"));
        let new_resources = n.as_object_mut().and_then(|m| m.remove("resources"));
        match resize::resources_change(old_resources.as_ref(), new_resources.as_ref()) {
            ResourcesChange::Unchanged => {}
            ResourcesChange::Resize(resources) => {
                spec.container_resources
                    .insert(container.clone(), resources);
            }
            ResourcesChange::NotResizable => {
                changed.insert(format!("spec.containers[{container}].resources"));
            }
        }
        diff_objects(&format!("spec.containers[{container}]"), &o, &n, changed);
    }
}

/// A patch to apply to the pod, as plain values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodPatch {
    pub labels: MetadataChanges,
    pub annotations: MetadataChanges,
    /// Container name → new image.
    pub container_images: BTreeMap<String, String>,
    /// Container name → new resources, for the `resize` subresource (not the patch).
    pub container_resources: BTreeMap<String, ResourceRequirements>,
}

/// The first step of an in-place update.
#[derive(Clone, Debug, PartialEq)]
pub struct BeginUpdate {
    /// Set `InPlaceUpdateReady=False` (reason StartInPlaceUpdate) through the pod's agent
    /// before patching, so the pod leaves endpoints first; only when the gate is injected.
    pub mark_not_ready: bool,
    pub patch: PodPatch,
    /// With a grace period the images wait: requeue after this many seconds.
    pub requeue_after_seconds: Option<u64>,
}

/// Starts an in-place update to `revision` (OpenKruise `updatePodInPlace`): the revision
/// label (in the workload's form) and the state annotation are written now; the images and metadata now too, or,
/// with a grace period, recorded in the grace annotation for [`grace_step`].
pub fn begin_update(
    revisions: RevisionAdapter,
    revision: &str,
    spec: &InPlaceUpdateSpec,
    pod: &Pod,
    grace_seconds: i32,
    now: Timestamp,
) -> Result<BeginUpdate, InPlaceError> {
    let mut state = InPlaceUpdateState {
        revision: revision.to_owned(),
        update_timestamp: Time(now),
        last_container_statuses: BTreeMap::new(),
        other: BTreeMap::new(),
    };
    let mut patch = PodPatch::default();
    patch.labels.insert(
        CONTROLLER_REVISION_HASH_LABEL.to_owned(),
        Some(revisions.hash_label_value(revision)),
    );
    let requeue_after_seconds = if grace_seconds <= 0 {
        apply_spec(spec, pod, &mut state, &mut patch, now)?;
        patch.annotations.insert(GRACE_ANNOTATION.to_owned(), None);
        None
    } else {
        let grace = GraceSpec {
            revision: revision.to_owned(),
            container_images: spec.container_images.clone(),
            container_resources: spec.container_resources.clone(),
            meta_data_patch: metadata_patch(spec),
            grace_seconds,
            other: BTreeMap::new(),
        };
        patch
            .annotations
            .insert(GRACE_ANNOTATION.to_owned(), Some(grace.to_annotation()?));
        Some(u64::try_from(grace_seconds).unwrap_or(0))
    };
    patch
        .annotations
        .insert(STATE_ANNOTATION.to_owned(), Some(state.to_annotation()?));
    Ok(BeginUpdate {
        mark_not_ready: has_readiness_gate(pod),
        patch,
        requeue_after_seconds,
    })
}

/// Puts the metadata into the patch, queues every container change (image, resources,
/// metadata its env reads) and starts the first batch (OpenKruise
/// `defaultPatchUpdateSpecToPodWithVerticalUpdate`): the containers of the highest launch
/// priority get their new images and resources now, the others with their own batch.
fn apply_spec(
    spec: &InPlaceUpdateSpec,
    pod: &Pod,
    state: &mut InPlaceUpdateState,
    patch: &mut PodPatch,
    now: Timestamp,
) -> Result<(), InPlaceError> {
    patch.labels.extend(spec.labels.clone());
    patch.annotations.extend(spec.annotations.clone());
    let containers = pod_containers(pod);
    let readers = batches::env_readers(containers, &spec.labels, &spec.annotations);
    let mut queued = Batches {
        next_container_images: spec.container_images.clone(),
        next_container_resources: spec.container_resources.clone(),
        update_env_from_metadata: !readers.is_empty(),
        next_container_ref_metadata: readers,
        ..Batches::default()
    };
    let mut annotations_after = annotations(pod).cloned().unwrap_or_default();
    for (key, value) in &spec.annotations {
        match value {
            Some(value) => annotations_after.insert(key.clone(), value.clone()),
            None => annotations_after.remove(key),
        };
    }
    let priorities = batches::container_priorities(containers, Some(&annotations_after));
    start_next_batch(&mut queued, &priorities, pod, state, patch, now);
    state.set_batches(&queued)?;
    Ok(())
}

/// Moves the highest-priority containers still queued into a running batch: an image
/// change goes into the patch (the kubelet restarts the container), new resources into
/// the resize, and a container whose env alone changed is left for the node's agent to
/// restart; what each runs now is recorded for the completion check (the image and
/// container IDs of one that restarts, the resources of one that is resized).
fn start_next_batch(
    queued: &mut Batches,
    priorities: &BTreeMap<String, i64>,
    pod: &Pod,
    state: &mut InPlaceUpdateState,
    patch: &mut PodPatch,
    now: Timestamp,
) {
    let batch = batches::next_batch(&queued.waiting(), priorities);
    let statuses = container_statuses(pod);
    for name in &batch {
        let image = queued.next_container_images.remove(name);
        let resources = queued.next_container_resources.remove(name);
        let env_changed = queued.next_container_ref_metadata.remove(name).is_some();
        let entry = state
            .last_container_statuses
            .entry(name.clone())
            .or_default();
        if image.is_some() || env_changed {
            let status = statuses.iter().find(|s| &s.name == name);
            entry.image_id = status.map(|s| s.image_id.clone()).unwrap_or_default();
            entry.container_id = status
                .and_then(|s| s.container_id.clone())
                .unwrap_or_default();
        }
        if let Some(resources) = resources {
            entry.resources = Some(spec_resources(pod, name).cloned().unwrap_or_default());
            patch.container_resources.insert(name.clone(), resources);
        }
        match image {
            Some(image) => {
                patch.container_images.insert(name.clone(), image);
            }
            None if env_changed => queued.agent_restarts.push(name.clone()),
            None => {}
        }
    }
    let more = !queued.waiting().is_empty();
    queued.pre_check_before_next = more.then(|| PreCheckBeforeNext {
        containers_required_ready: batch.iter().cloned().collect(),
    });
    if !batch.is_empty() {
        queued.container_batches_record.push(ContainerBatch {
            timestamp: Time(now),
            containers: batch.into_iter().collect(),
        });
    }
}

fn pod_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
}

fn metadata_patch(spec: &InPlaceUpdateSpec) -> Option<String> {
    if spec.labels.is_empty() && spec.annotations.is_empty() {
        return None;
    }
    let body = json!({ "metadata": { "labels": spec.labels, "annotations": spec.annotations } });
    Some(base64::engine::general_purpose::STANDARD.encode(body.to_string()))
}

fn metadata_from_patch(encoded: &str) -> (MetadataChanges, MetadataChanges) {
    let parsed: Option<Value> = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let section = |key: &str| -> MetadataChanges {
        parsed
            .as_ref()
            .and_then(|v| v.get("metadata")?.get(key)?.as_object().cloned())
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.as_str().map(str::to_owned)))
            .collect()
    };
    (section("labels"), section("annotations"))
}

fn container_statuses(pod: &Pod) -> &[ContainerStatus] {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
}

/// The resources the pod's spec gives container `name`.
fn spec_resources<'p>(pod: &'p Pod, name: &str) -> Option<&'p ResourceRequirements> {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .find(|c| c.name == name)
        .and_then(|c| c.resources.as_ref())
}

fn annotations(pod: &Pod) -> Option<&BTreeMap<String, String>> {
    pod.metadata.annotations.as_ref()
}

/// The pod's template carries the `InPlaceUpdateReady` readiness gate.
pub fn has_readiness_gate(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|gates| {
            gates
                .iter()
                .any(|g| g.condition_type == INPLACE_UPDATE_READY)
        })
}

/// Where a pod's grace period stands.
#[derive(Clone, Debug, PartialEq)]
pub enum GraceStep {
    /// No grace annotation: nothing pending.
    NotInGrace,
    /// The pod's revision moved on since the grace started: drop the annotation and let the
    /// normal update path start over.
    Drop,
    /// Still in the grace period.
    Wait { requeue_after_seconds: u64 },
    /// The grace period is over: patch the images now.
    PatchNow(PodPatch),
}

/// OpenKruise `finishGracePeriod`, computed from the annotations at `now`.
pub fn grace_step(pod: &Pod, now: Timestamp) -> Result<GraceStep, InPlaceError> {
    let (Some(state_json), Some(grace_json)) = (
        annotations(pod).and_then(|a| a.get(STATE_ANNOTATION)),
        annotations(pod).and_then(|a| a.get(GRACE_ANNOTATION)),
    ) else {
        return Ok(GraceStep::NotInGrace);
    };
    let mut state = InPlaceUpdateState::parse(state_json)?;
    let grace = GraceSpec::parse(grace_json)?;
    let revision = pod
        .metadata
        .labels
        .as_ref()
        .and_then(RevisionAdapter::pod_revision);
    if !RevisionAdapter::label_names(revision, &grace.revision) {
        return Ok(GraceStep::Drop);
    }
    let elapsed = now.duration_since(state.update_timestamp.0);
    let remaining = SignedDuration::from_secs(i64::from(grace.grace_seconds)) - elapsed;
    if remaining > SignedDuration::ZERO {
        // Round up so the requeue never lands just before the end.
        let secs = remaining.as_secs() + i64::from(remaining.subsec_nanos() > 0);
        return Ok(GraceStep::Wait {
            requeue_after_seconds: u64::try_from(secs).unwrap_or(0),
        });
    }
    let (labels, annotations) = grace
        .meta_data_patch
        .as_deref()
        .map(metadata_from_patch)
        .unwrap_or_default();
    let spec = InPlaceUpdateSpec {
        container_images: grace.container_images,
        container_resources: grace.container_resources,
        labels,
        annotations,
    };
    let mut patch = PodPatch::default();
    apply_spec(&spec, pod, &mut state, &mut patch, now)?;
    patch.annotations.insert(GRACE_ANNOTATION.to_owned(), None);
    patch
        .annotations
        .insert(STATE_ANNOTATION.to_owned(), Some(state.to_annotation()?));
    Ok(GraceStep::PatchNow(patch))
}

#[path = "inplace_completion.rs"]
mod completion;

pub use completion::{Completion, PodObservation, RefreshStep, check_completion, plan_refresh};

#[path = "inplace_gate.rs"]
mod gate;

pub use gate::{
    REASON_SIDECAR_START, SIDECAR_UPGRADE_STATE_ANNOTATION, sidecar_gate_left_closed,
    sidecar_gate_message, workload_gate_left_closed,
};

#[cfg(test)]
#[path = "inplace_tests.rs"]
mod tests;

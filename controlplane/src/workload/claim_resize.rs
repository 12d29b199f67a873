//! Growing the claims of an existing pod to a larger storage request in their template,
//! as OpenKruise 1.9's Advanced StatefulSet does under `volumeClaimUpdateStrategy:
//! OnPodRollingUpdate` (`pkg/controller/statefulset/stateful_pod_control_pvc.go` and
//! `pkg/util/pvc`): in the rolling update, a pod whose claims ask for less than their
//! template is not updated until its claims were patched to the template's request and the
//! volume grew (capacity at least the request, or only the file system left to grow, which
//! the kubelet does once the pod mounts it); while its claims' capacity is short of their
//! request the pod counts as unavailable. A smaller template request asks nothing (a claim
//! never shrinks); a claim whose storage class or access modes differ from its template
//! cannot be patched and holds the update until someone deletes it.
//!
//! Pure: the planner reads a pod's [`PodClaims`] and the executor sends the
//! [`ClaimResize`] patches.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt as _;

use super::inplace::resize::quantity_value;

/// Where a pod's claims stand against their templates.
#[derive(Clone, Debug, PartialEq)]
pub struct PodClaims {
    /// Every claim's capacity holds what it asks for (and it matches its template but for
    /// size); a pod whose claims are not ready counts as unavailable in a rolling update.
    pub ready: bool,
    pub step: ClaimStep,
}

impl PodClaims {
    /// Nothing to grow and nothing to wait for (the default of a workload that does not
    /// grow claims).
    pub const READY: Self = Self {
        ready: true,
        step: ClaimStep::Complete,
    };
}

/// What a pod's claims need before the pod may be updated.
#[derive(Clone, Debug, PartialEq)]
pub enum ClaimStep {
    /// Each claim asks for at least its template's request and the volume grew as far as
    /// the controller can see (OpenKruise `IsOwnedPVCsCompleted`): the pod may be updated.
    Complete,
    /// These claims ask for less than their template: patch them, then wait.
    Expand(Vec<ClaimResize>),
    /// Patched, the volume is still growing: the pod waits.
    Resizing,
    /// A claim differs from its template in more than size; only deleting it helps.
    Incompatible { claim: String },
}

impl ClaimStep {
    /// A claim does not match its template (OpenKruise `IsClaimsCompatible` false): even a
    /// pod of the update revision is taken by the rolling update for it.
    pub fn needs_patch(&self) -> bool {
        matches!(self, Self::Expand(_) | Self::Incompatible { .. })
    }
}

/// One claim to patch to a larger storage request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimResize {
    pub claim: String,
    /// The pod that mounts it.
    pub pod: String,
    /// The claim's storage class, for the message when the apiserver refuses.
    pub storage_class: Option<String>,
    /// The template's storage request, e.g. `2Gi`.
    pub request: String,
    /// The claim's resourceVersion the patch is computed from (a precondition).
    pub resource_version: Option<String>,
}

/// How one claim compares with its template, sizes aside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fit {
    /// Same class and access modes, asking for at least the template's request.
    Matches,
    /// Same class and access modes, asking for less.
    NeedsExpansion,
    /// Another storage class or other access modes.
    Incompatible,
}

/// A claim's storage request or capacity as bytes.
fn storage(resources: Option<&BTreeMap<String, Quantity>>) -> Option<f64> {
    resources
        .and_then(|r| r.get("storage"))
        .and_then(|q| quantity_value(&q.0))
}

fn requested(claim: &PersistentVolumeClaim) -> Option<f64> {
    let spec = claim.spec.as_ref()?;
    storage(spec.resources.as_ref().and_then(|r| r.requests.as_ref()))
}

fn capacity(claim: &PersistentVolumeClaim) -> Option<f64> {
    storage(claim.status.as_ref().and_then(|s| s.capacity.as_ref()))
}

/// OpenKruise `IsClaimCompatibleWithoutSize`: the storage class when both name one (a
/// template without a class takes the default one), and the access modes in order.
fn compatible_without_size(
    claim: &PersistentVolumeClaim,
    template: &PersistentVolumeClaim,
) -> bool {
    let (Some(c), Some(t)) = (claim.spec.as_ref(), template.spec.as_ref()) else {
        return template.spec.is_none();
    };
    let classes_differ = matches!(
        (&c.storage_class_name, &t.storage_class_name),
        (Some(a), Some(b)) if a != b
    );
    !classes_differ
        && c.access_modes.as_deref().unwrap_or_default()
            == t.access_modes.as_deref().unwrap_or_default()
}

fn fit(claim: &PersistentVolumeClaim, template: &PersistentVolumeClaim) -> Fit {
    if !compatible_without_size(claim, template) {
        return Fit::Incompatible;
    }
    match (requested(claim), requested(template)) {
        (Some(have), Some(want)) if have < want => Fit::NeedsExpansion,
        _ => Fit::Matches,
    }
}

/// The claim's capacity holds its own request (OpenKruise's "ready").
fn holds_request(claim: &PersistentVolumeClaim) -> bool {
    matches!((capacity(claim), requested(claim)), (Some(have), Some(want)) if have >= want)
}

/// The volume grew and only the file system is left, which the kubelet grows once a pod
/// mounts the claim.
fn file_system_pending(claim: &PersistentVolumeClaim) -> bool {
    let conditions = claim.status.as_ref().and_then(|s| s.conditions.as_deref());
    conditions
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "FileSystemResizePending" && c.status == "True")
}

/// Where the claims of one pod stand: `pairs` holds each template with the pod's claim of
/// it (`None`: not made yet, which this step leaves to the scale step); a claim being
/// deleted is skipped, as OpenKruise skips terminating claims.
pub fn pod_claims<'c>(
    pod: &str,
    pairs: impl IntoIterator<Item = (&'c PersistentVolumeClaim, Option<&'c PersistentVolumeClaim>)>,
) -> PodClaims {
    let mut ready = true;
    let mut expand = Vec::new();
    let mut incompatible = None;
    let mut complete = true;
    for (template, claim) in pairs {
        let Some(claim) = claim.filter(|c| c.metadata.deletion_timestamp.is_none()) else {
            continue;
        };
        let fit = fit(claim, template);
        ready &= fit != Fit::Incompatible && holds_request(claim);
        match fit {
            Fit::Incompatible => {
                incompatible.get_or_insert_with(|| claim.name_any());
            }
            Fit::NeedsExpansion => expand.push(resize_of(pod, claim, template)),
            Fit::Matches => complete &= holds_request(claim) || file_system_pending(claim),
        }
    }
    let step = match (incompatible, expand.is_empty()) {
        (Some(claim), _) => ClaimStep::Incompatible { claim },
        (None, false) => ClaimStep::Expand(expand),
        (None, true) if complete => ClaimStep::Complete,
        (None, true) => ClaimStep::Resizing,
    };
    PodClaims { ready, step }
}

fn resize_of(
    pod: &str,
    claim: &PersistentVolumeClaim,
    template: &PersistentVolumeClaim,
) -> ClaimResize {
    let request = (template.spec.as_ref())
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_default();
    ClaimResize {
        claim: claim.name_any(),
        pod: pod.to_owned(),
        storage_class: claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.clone()),
        request,
        resource_version: claim.metadata.resource_version.clone(),
    }
}

/// One pod's claim of one template for the status (OpenKruise `updatePVCStatus`):
/// whether it is compatible (same class and access modes, asking for at least the
/// template's request) and whether it is also ready (its capacity holds its request).
pub fn claim_status<'c>(
    pair: (&'c PersistentVolumeClaim, Option<&'c PersistentVolumeClaim>),
) -> (bool, bool) {
    let (template, Some(claim)) = pair else {
        return (false, false);
    };
    if claim.metadata.deletion_timestamp.is_some() || fit(claim, template) != Fit::Matches {
        return (false, false);
    }
    (true, holds_request(claim))
}

/// The merge patch that grows a claim: its storage request, on the resourceVersion it was
/// planned from.
pub fn resize_patch(resize: &ClaimResize) -> serde_json::Value {
    let mut patch = serde_json::json!({
        "spec": { "resources": { "requests": { "storage": resize.request } } }
    });
    if let Some(version) = &resize.resource_version {
        patch["metadata"] = serde_json::json!({ "resourceVersion": version });
    }
    patch
}

#[cfg(test)]
#[path = "claim_resize_tests.rs"]
mod tests;

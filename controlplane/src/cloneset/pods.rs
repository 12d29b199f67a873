//! The objects a CloneSet creates — pods, their PVCs and its ControllerRevisions — built
//! purely from the CloneSet, a revision and an instance id.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource as _, ResourceExt as _};

use crate::api::CloneSet;
use crate::workload::adapter::{PodSetWorkload as _, add_readiness_gates, marks_pods_not_ready};
use crate::workload::lifecycle::{self, STATE_LABEL};
use crate::workload::revision::RevisionError;
use crate::workload::revision_spec::RevisionSpec;

/// Label shared by a pod and its PVCs.
pub const INSTANCE_ID_LABEL: &str = "apps.kruise.io/cloneset-instance-id";

/// What a revision of `cloneset` records: its template and claim templates.
pub fn revision_spec(cloneset: &CloneSet) -> RevisionSpec {
    RevisionSpec {
        template: cloneset.spec.template.clone(),
        volume_claim_templates: cloneset.spec.volume_claim_templates.clone(),
    }
}

/// The controller ownerReference to `cloneset`.
pub fn owner_reference(cloneset: &CloneSet) -> OwnerReference {
    OwnerReference {
        api_version: CloneSet::api_version(&()).into_owned(),
        kind: CloneSet::kind(&()).into_owned(),
        name: cloneset.name_any(),
        uid: cloneset.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The name of a pod's claim from template `claim`: `<claim>-<cloneset>-<id>`.
pub fn pvc_name(claim: &str, cloneset: &str, instance_id: &str) -> String {
    format!("{claim}-{cloneset}-{instance_id}")
}

/// The ControllerRevision for `spec` named `name` with `hash` and `number`.
pub fn new_revision(
    cloneset: &CloneSet,
    name: &str,
    hash: &str,
    number: i64,
    data: Vec<u8>,
) -> Result<ControllerRevision, RevisionError> {
    crate::workload::history::new_revision(cloneset, name, hash, number, data)
}

/// A new pod of `cloneset` at `revision` (its spec) with `instance_id`: template labels
/// plus the revision, short hash and instance id labels, lifecycle state PreparingNormal, the
/// readiness gates its update policy and hooks need, and one volume per claim template.
pub fn new_pod(cloneset: &CloneSet, revision: &str, spec: &RevisionSpec, instance_id: &str) -> Pod {
    let name = cloneset.name_any();
    let template = &spec.template;
    let template_meta = template.metadata.clone().unwrap_or_default();
    let mut labels = template_meta.labels.unwrap_or_default();
    labels.extend(cloneset.revision_adapter().pod_labels(revision));
    labels.insert(INSTANCE_ID_LABEL.to_owned(), instance_id.to_owned());
    labels.insert(
        STATE_LABEL.to_owned(),
        lifecycle::CREATED_STATE.as_str().to_owned(),
    );
    // Only the template's finalizers (and labels): the preNormal hook's are the user
    // controller's to add, which is what moves the pod from PreparingNormal to Normal
    // (OpenKruise `newVersionedPods` adds none either).
    let finalizers = template_meta.finalizers.unwrap_or_default();

    let mut pod_spec = template.spec.clone().unwrap_or_default();
    add_readiness_gates(&mut pod_spec, &cloneset.readiness_gates());
    let mut volumes = pod_spec.volumes.take().unwrap_or_default();
    for claim in &spec.volume_claim_templates {
        let claim_name = claim.name_any();
        volumes.retain(|v| v.name != claim_name);
        volumes.push(Volume {
            name: claim_name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: pvc_name(&claim_name, &name, instance_id),
                read_only: None,
            }),
            ..Volume::default()
        });
    }
    if !volumes.is_empty() {
        pod_spec.volumes = Some(volumes);
    }

    Pod {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{instance_id}")),
            namespace: cloneset.namespace(),
            labels: Some(labels),
            annotations: template_meta.annotations,
            finalizers: (!finalizers.is_empty()).then_some(finalizers),
            owner_references: Some(vec![owner_reference(cloneset)]),
            ..ObjectMeta::default()
        },
        spec: Some(pod_spec),
        status: None,
    }
}

/// Pods need the `KruisePodReady` gate when a lifecycle hook marks them not ready.
pub fn needs_kruise_pod_ready(cloneset: &CloneSet) -> bool {
    marks_pods_not_ready(cloneset.spec.lifecycle.as_ref())
}

/// The claims of a new pod, one per claim template, labelled with the selector's labels
/// and the instance id and owned by the CloneSet.
pub fn new_pvcs(
    cloneset: &CloneSet,
    spec: &RevisionSpec,
    instance_id: &str,
) -> Vec<PersistentVolumeClaim> {
    let name = cloneset.name_any();
    spec.volume_claim_templates
        .iter()
        .map(|claim| {
            let mut labels = cloneset
                .spec
                .selector
                .match_labels
                .clone()
                .unwrap_or_default();
            labels.extend(claim.metadata.labels.clone().unwrap_or_default());
            labels.insert(INSTANCE_ID_LABEL.to_owned(), instance_id.to_owned());
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(pvc_name(&claim.name_any(), &name, instance_id)),
                    namespace: cloneset.namespace(),
                    labels: Some(labels),
                    annotations: claim.metadata.annotations.clone(),
                    owner_references: Some(vec![owner_reference(cloneset)]),
                    ..ObjectMeta::default()
                },
                spec: claim.spec.clone(),
                status: None,
            }
        })
        .collect()
}

/// The instance id label of an object, if any.
pub fn instance_id(labels: Option<&BTreeMap<String, String>>) -> Option<&str> {
    labels
        .and_then(|l| l.get(INSTANCE_ID_LABEL))
        .map(String::as_str)
}

#[cfg(test)]
#[path = "pods_tests.rs"]
mod tests;

//! `persistentVolumeClaimRetentionPolicy` as the native StatefulSet controller carries it
//! out (`updateClaimOwnerRefForSetAndPod`): nothing deletes a claim; owner references
//! hand it to the garbage collector. `whenDeleted: Delete` makes the set an owner of its
//! pods' claims, so they go with the set; `whenScaled: Delete` makes a scaled-away pod
//! (its ordinal no longer wanted) the owner of its claims instead, so they go with the
//! pod; `Retain` removes the reference. Pure: the reconciler writes the changes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt as _;

use super::ordinals::{WantedOrdinals, claim_name, ordinal_of};
use crate::api::StatefulSet;
use crate::api::statefulset::PvcRetentionPolicyType::{Delete, Retain};
use crate::workload::adapter::PodSetWorkload as _;

/// A claim whose owner references must change.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimOwners {
    pub claim: String,
    /// The resourceVersion they were computed from (the write is conditional on it).
    pub resource_version: Option<String>,
    pub owner_references: Vec<OwnerReference>,
}

/// Who should own the claims of a pod: the set, the pod, both or neither.
fn wanted_owners(set: &StatefulSet, condemned: bool) -> (bool, bool) {
    let (when_deleted, when_scaled) = set.spec.retention();
    match (when_scaled, when_deleted) {
        (Retain, Retain) => (false, false),
        (Retain, Delete) => (true, false),
        (Delete, Retain) => (false, condemned),
        (Delete, Delete) => (!condemned, condemned),
    }
}

/// The owner references the claims of the set's live pods need, as changes; `wanted`
/// are the ordinals the set keeps (any other ordinal's pod is being scaled away).
pub fn claim_owner_changes(
    set: &StatefulSet,
    pods: &[&Pod],
    claims: &[&PersistentVolumeClaim],
    wanted: &WantedOrdinals,
) -> Vec<ClaimOwners> {
    let name = set.name_any();
    let claims: BTreeMap<&str, &PersistentVolumeClaim> = (claims.iter())
        .filter_map(|c| Some((c.metadata.name.as_deref()?, *c)))
        .collect();
    let set_ref = OwnerReference {
        controller: None,
        block_owner_deletion: None,
        ..set.owner_reference()
    };
    let mut changes = Vec::new();
    for pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let Some(ordinal) = (pod.metadata.name.as_deref()).and_then(|n| ordinal_of(&name, n))
        else {
            continue;
        };
        let (by_set, by_pod) = wanted_owners(set, !wanted.contains(ordinal));
        let pod_ref = pod_reference(pod);
        for template in &set.spec.volume_claim_templates {
            let Some(claim) = claims.get(claim_name(&template.name_any(), &name, ordinal).as_str())
            else {
                continue;
            };
            let refs = claim.metadata.owner_references.clone().unwrap_or_default();
            let mut next = refs.clone();
            set_owner(&mut next, &set_ref, by_set);
            if let Some(pod_ref) = &pod_ref {
                set_owner(&mut next, pod_ref, by_pod);
            }
            if next != refs {
                changes.push(ClaimOwners {
                    claim: claim.name_any(),
                    resource_version: claim.metadata.resource_version.clone(),
                    owner_references: next,
                });
            }
        }
    }
    changes
}

/// Adds `owner` to `refs` (once) or removes it, matched by UID.
fn set_owner(refs: &mut Vec<OwnerReference>, owner: &OwnerReference, wanted: bool) {
    let present = refs.iter().any(|r| r.uid == owner.uid);
    if wanted && !present {
        refs.push(owner.clone());
    } else if !wanted && present {
        refs.retain(|r| r.uid != owner.uid);
    }
}

/// A plain (not controller) owner reference to `pod`; `None` before it has a UID.
fn pod_reference(pod: &Pod) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Pod".to_owned(),
        name: pod.metadata.name.clone()?,
        uid: pod.metadata.uid.clone()?,
        controller: None,
        block_owner_deletion: None,
    })
}

#[cfg(test)]
#[path = "retention_tests.rs"]
mod tests;

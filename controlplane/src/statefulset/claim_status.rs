//! `status.volumeClaims`: per claim template, how many pods' claims are compatible with it
//! (same storage class and access modes, asking for at least its storage request) and how
//! many of those are also ready (their capacity holds their request), as OpenKruise 1.9's
//! `updatePVCStatus` counts them, so a resize under `volumeClaimUpdateStrategy:
//! OnPodRollingUpdate` can be followed pod by pod. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::ResourceExt as _;

use crate::api::StatefulSet;
use crate::api::statefulset::VolumeClaimStatus;
use crate::workload::claim_resize::claim_status;
use crate::workload::pod_view::is_active;

/// One entry per claim template, counted over the set's active pods.
pub fn volume_claims(
    set: &StatefulSet,
    pods: &[&Pod],
    claims: &[&PersistentVolumeClaim],
) -> Vec<VolumeClaimStatus> {
    let pods: Vec<&str> = (pods.iter())
        .filter(|p| is_active(p))
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    let by_name: BTreeMap<&str, &PersistentVolumeClaim> = (claims.iter().copied())
        .filter_map(|c| Some((c.metadata.name.as_deref()?, c)))
        .collect();
    (set.spec.volume_claim_templates.iter())
        .map(|template| {
            let mut status = VolumeClaimStatus {
                volume_claim_name: template.name_any(),
                ..VolumeClaimStatus::default()
            };
            for pod in &pods {
                let name = format!("{}-{pod}", template.name_any());
                let claim = by_name.get(name.as_str()).copied();
                let (compatible, ready) = claim_status((template, claim));
                status.compatible_replicas += i32::from(compatible);
                status.compatible_ready_replicas += i32::from(compatible && ready);
            }
            status
        })
        .collect()
}

#[cfg(test)]
#[path = "claim_status_tests.rs"]
mod tests;

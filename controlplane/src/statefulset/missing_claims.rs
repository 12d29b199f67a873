//! Claims a Pending pod lost, made again: the native StatefulSet controller does so since
//! Kubernetes 1.27 (`processReplica` calls `createMissingPersistentVolumeClaims` for a
//! pod in phase Pending), and OpenKruise 1.9's Advanced StatefulSet likewise. Without it a
//! pod whose claim was deleted before it ran (say its node was drained and the claim went
//! with the volume) stays Pending forever: the scheduler waits for a claim nobody makes.
//! A running pod is left alone (its claim is in use; the claim protection keeps it).
//! Pure: the executor builds the claims from the set's templates and creates them.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::ResourceExt as _;

use super::ordinals::{WantedOrdinals, claim_name, ordinal_of};
use crate::api::StatefulSet;
use crate::workload::actions::Create;

/// One create per live Pending pod on a wanted ordinal some of whose template claims are
/// not in `claims` (a claim being deleted counts as there: it is made again once gone).
/// The claims do not depend on the revision (the claim templates are in no revision),
/// so each create names `update_revision`, which the history always holds.
pub fn missing_claims(
    set: &StatefulSet,
    pods: &[&Pod],
    claims: &[&PersistentVolumeClaim],
    wanted: &WantedOrdinals,
    update_revision: &str,
) -> Vec<Create> {
    let templates = &set.spec.volume_claim_templates;
    if templates.is_empty() {
        return Vec::new();
    }
    let name = set.name_any();
    let present: BTreeSet<&str> = (claims.iter())
        .filter_map(|c| c.metadata.name.as_deref())
        .collect();
    (pods.iter())
        .filter(|pod| pod.metadata.deletion_timestamp.is_none() && is_pending(pod))
        .filter_map(|pod| ordinal_of(&name, pod.metadata.name.as_deref()?))
        .filter(|ordinal| wanted.contains(*ordinal))
        .filter(|ordinal| {
            (templates.iter())
                .any(|t| !present.contains(claim_name(&t.name_any(), &name, *ordinal).as_str()))
        })
        .map(|ordinal| Create {
            instance_id: ordinal.to_string(),
            revision: update_revision.to_owned(),
        })
        .collect()
}

/// Phase Pending, as the native `isPending` reads it (a pod without a status yet is not).
fn is_pending(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending")
}

#[cfg(test)]
#[path = "missing_claims_tests.rs"]
mod tests;

//! What a pod-set sync reads before it plans: the pods it claims (adopting and releasing
//! by its selector), the claims in its scope, and its revision history with a revision
//! for the current spec.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt as _;
use kube::api::Api;

use super::kind::{ClaimScope, KindSyncError, Owned, PodSetKind};
use crate::controller::ObjectKey;
use crate::workload::adapter::PodSetWorkload as _;
use crate::workload::claim::claim_objects;
use crate::workload::history::{HistoryStep, revision_object};
use crate::workload::ownership::is_controlled_by;
use crate::workload::revision_spec::RevisionSpec;
use crate::workload::set_controller::PodSetParts;

/// The claims among `cached` a set of `namespace` with `uid` reads under `scope`.
pub fn claims_in_scope(
    scope: ClaimScope,
    cached: Vec<Arc<PersistentVolumeClaim>>,
    namespace: &str,
    uid: &str,
) -> Vec<Arc<PersistentVolumeClaim>> {
    let in_namespace = |meta: &ObjectMeta| meta.namespace.as_deref() == Some(namespace);
    let wanted = |meta: &ObjectMeta| match scope {
        ClaimScope::None => false,
        ClaimScope::Controlled => in_namespace(meta) && is_controlled_by(meta, uid),
        ClaimScope::Namespace => in_namespace(meta),
    };
    (cached.into_iter())
        .filter(|c| wanted(&c.metadata))
        .collect()
}

/// Claims the set's pods, reads the claims in its scope, and makes sure a revision holds
/// its current spec; `None` when a hash collision was counted and the sync must start
/// over.
pub async fn read_owned<K: PodSetKind>(
    kind: &K,
    parts: &PodSetParts,
    key: &ObjectKey,
    set: &K::Set,
) -> Result<Option<Owned<K::Revision>>, KindSyncError<K>> {
    let uid = set.uid().unwrap_or_default();
    let in_namespace =
        |meta: &ObjectMeta| meta.namespace.as_deref() == Some(key.namespace.as_str());
    let controlled = |meta: &ObjectMeta| in_namespace(meta) && is_controlled_by(meta, &uid);
    let workload = kind.workload(set);
    let owner = workload.owner_reference();
    let pods_api: Api<Pod> = Api::namespaced(parts.client.clone(), &key.namespace);
    let candidates = (parts.stores.pods.state().into_iter()).filter(|p| in_namespace(&p.metadata));
    let pods = claim_objects(&pods_api, candidates, &owner, workload.selector()).await?;
    let claims = claims_in_scope(K::CLAIMS, parts.stores.pvcs.state(), &key.namespace, &uid);
    let cached: Vec<Arc<ControllerRevision>> = (parts.stores.revisions.state().into_iter())
        .filter(|r| controlled(&r.metadata))
        .collect();
    let spec = K::revision_spec(set);
    let data = spec.to_data()?;
    let (recorded_current, collisions) = K::recorded_revisions(set);
    let name = set.name_any();
    let step = (parts.history_writer::<K::Set>(&key.namespace, &name))
        .sync_update_revision(
            cached,
            &data,
            collisions,
            &recorded_current,
            |n, h, i, d| revision_object(workload.selector(), set.namespace(), &owner, n, h, i, d),
        )
        .await?;
    let HistoryStep::Ready(history) = step else {
        return Ok(None);
    };
    let mut revisions: BTreeMap<String, K::Revision> = (history.revisions.iter())
        .filter_map(|r| Some((r.name.clone(), RevisionSpec::from_data(&r.data)?.into())))
        .collect();
    revisions.insert(history.update_revision.clone(), spec.into());
    Ok(Some(Owned {
        pods,
        claims,
        history,
        revisions,
    }))
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;

//! One CloneSet sync as a pure decision: what is the CloneSet's own — instance ids, the
//! claims that go with them, `scaleStrategy.podsToDelete` — around the shared pod-set
//! planning (`workload::plan`: refresh, scale, update), which reads the CloneSet through
//! its adapter (`cloneset::adapter`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;

use super::pods::instance_id;
use crate::api::CloneSet;
use crate::workload::actions::{Create, Plan};
use crate::workload::plan::{PodSet, PodSetSnapshot, ScaleUp};
use crate::workload::revision_spec::RevisionSpec;

pub use crate::workload::plan::PlanError;

/// What the sync sees.
pub struct Snapshot<'a> {
    pub cloneset: &'a CloneSet,
    /// Pods the set controls (after adoption and release), terminating ones included.
    pub pods: Vec<&'a Pod>,
    /// Claims the set controls.
    pub pvcs: Vec<&'a PersistentVolumeClaim>,
    pub update_revision: &'a str,
    pub current_revision: &'a str,
    /// Revision name → what it records.
    pub revisions: &'a BTreeMap<String, RevisionSpec>,
    pub now: Timestamp,
}

/// What a CloneSet sync decides: the shared plan, and beside it what is the CloneSet's
/// own.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CloneSetPlan {
    pub plan: Plan,
    /// Instance ids taken by the set's pods and claims, so fresh ones never collide.
    pub taken_ids: BTreeSet<String>,
    /// Claims no pod uses, to delete (`disablePVCReuse`).
    pub unused_claims: Vec<String>,
    /// `scaleStrategy.podsToDelete` without the names of pods that are gone, when some
    /// are.
    pub pods_to_delete: Option<Vec<String>>,
}

/// Plans one sync.
pub fn plan(snap: &Snapshot<'_>) -> Result<CloneSetPlan, PlanError> {
    let strategy = &snap.cloneset.spec.scale_strategy;
    let named: BTreeSet<String> = strategy.pods_to_delete.iter().cloned().collect();
    let pod_set = PodSetSnapshot {
        workload: snap.cloneset,
        pods: snap.pods.clone(),
        claims: snap.pvcs.clone(),
        update_revision: snap.update_revision,
        current_revision: snap.current_revision,
        revisions: snap.revisions,
        named_for_deletion: &named,
        now: snap.now,
    };
    let mut set = PodSet::new(&pod_set);
    let mut plan = Plan::default();
    set.refresh(&mut plan)?;
    // Orphan claims are decided before scaling (OpenKruise `cleanupPVCs`), so the sync that
    // replaces a pod deleted from outside also deletes its old claims.
    let unused_claims = if strategy.disable_pvc_reuse {
        orphan_pvcs(snap).into_iter().map(str::to_owned).collect()
    } else {
        Vec::new()
    };
    set.scale_and_update(&mut plan, |scale, plan| create(snap, &set, scale, plan))?;
    Ok(CloneSetPlan {
        plan,
        taken_ids: taken_ids(snap),
        unused_claims,
        pods_to_delete: pods_to_delete_still_there(snap),
    })
}

/// Instance ids taken by the set's pods and claims, so fresh ones never collide.
fn taken_ids(snap: &Snapshot<'_>) -> BTreeSet<String> {
    let pods = snap.pods.iter().map(|p| p.metadata.labels.as_ref());
    let claims = snap.pvcs.iter().map(|p| p.metadata.labels.as_ref());
    pods.chain(claims)
        .filter_map(instance_id)
        .map(str::to_owned)
        .collect()
}

/// `scaleStrategy.podsToDelete` without the names of pods that are gone, when some are.
fn pods_to_delete_still_there(snap: &Snapshot<'_>) -> Option<Vec<String>> {
    let listed = &snap.cloneset.spec.scale_strategy.pods_to_delete;
    let pod_names: BTreeSet<&str> = snap
        .pods
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    let exists = |name: &String| pod_names.contains(name.as_str());
    if listed.iter().all(exists) {
        return None;
    }
    Some(listed.iter().filter(|n| exists(n)).cloned().collect())
}

/// The pods a scale-up creates: a pod deleted from outside is replaced under its own
/// instance id (and name), with its claims, once it is gone — not before, or the
/// replacement takes a fresh id and the claims are left behind. Its deletion event brings
/// the next sync. Other new pods get a fresh id when they are created.
fn create(snap: &Snapshot<'_>, set: &PodSet<'_, '_, CloneSet>, scale: ScaleUp, plan: &mut Plan) {
    let awaited = i32::try_from(ids_awaiting_their_pod(snap)).unwrap_or(i32::MAX);
    let count = scale.count - awaited;
    if count <= 0 {
        return;
    }
    let mut reusable = reusable_ids(snap).into_iter();
    for revision in set.new_pod_revisions(ScaleUp { count, ..scale }) {
        plan.creates.push(Create {
            instance_id: reusable.next().unwrap_or_default(),
            revision: revision.to_owned(),
        });
    }
}

/// Instance ids whose claims survive while no pod uses them (a pod deleted from outside):
/// the replacement reuses them, unless `disablePVCReuse`.
fn reusable_ids(snap: &Snapshot<'_>) -> Vec<String> {
    if snap.cloneset.spec.scale_strategy.disable_pvc_reuse {
        return Vec::new();
    }
    let mut ids: Vec<String> = orphan_pvcs(snap)
        .into_iter()
        .filter_map(|name| {
            snap.pvcs
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
                .and_then(|p| instance_id(p.metadata.labels.as_ref()))
                .map(str::to_owned)
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// Instance ids whose claims (not terminating) are kept for reuse while the only pod that
/// carries the id is still terminating.
fn ids_awaiting_their_pod(snap: &Snapshot<'_>) -> usize {
    if snap.cloneset.spec.scale_strategy.disable_pvc_reuse {
        return 0;
    }
    let id = |p: &Pod| instance_id(p.metadata.labels.as_ref()).map(str::to_owned);
    let live: BTreeSet<String> = snap
        .pods
        .iter()
        .filter(|p| !is_terminating(p))
        .filter_map(|p| id(p))
        .collect();
    let terminating: BTreeSet<String> = snap
        .pods
        .iter()
        .filter(|p| is_terminating(p))
        .filter_map(|p| id(p))
        .filter(|i| !live.contains(i))
        .collect();
    snap.pvcs
        .iter()
        .filter(|pvc| pvc.metadata.deletion_timestamp.is_none())
        .filter_map(|pvc| instance_id(pvc.metadata.labels.as_ref()))
        .filter(|i| terminating.contains(*i))
        .collect::<BTreeSet<_>>()
        .len()
}

/// Claims (not terminating) whose instance id no pod of the set carries.
fn orphan_pvcs<'a>(snap: &Snapshot<'a>) -> Vec<&'a str> {
    let used: BTreeSet<&str> = snap
        .pods
        .iter()
        .filter_map(|p| instance_id(p.metadata.labels.as_ref()))
        .collect();
    snap.pvcs
        .iter()
        .filter(|pvc| pvc.metadata.deletion_timestamp.is_none())
        .filter(|pvc| {
            instance_id(pvc.metadata.labels.as_ref()).is_some_and(|id| !used.contains(id))
        })
        .filter_map(|pvc| pvc.metadata.name.as_deref())
        .collect()
}

fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

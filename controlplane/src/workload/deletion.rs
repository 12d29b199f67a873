//! Which pods go first when a workload scales down.
//!
//! The order is OpenKruise's (`pkg/controller/cloneset/utils` `ActivePodsWithRanks`, itself
//! Kubernetes' `ActivePodsWithRanks` plus an availability step): pods that cost the least to
//! lose go first, so a scale-down removes pods that are not yet serving before pods that are.
//! Pods the user named (`scaleStrategy.podsToDelete`, label `apps.kruise.io/specified-delete`)
//! go before all others, and during a rollout pods of the old revision go before pods of the
//! update revision (`choosePodsToDelete`), so scaling down also moves the rollout forward.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use super::pod_view::{PodView, after_or_zero, phase_ordinal};

/// Kept at this path for the planners and tests that name the marks beside the order.
pub use super::deletion_marks::{POD_DELETION_COST_ANNOTATION, SPECIFIED_DELETE_LABEL};

/// Pod label carrying the revision the pod was created from or updated to; read and written
/// only through [`super::revision_adapter::RevisionAdapter`].
pub use super::revision_adapter::CONTROLLER_REVISION_HASH_LABEL as REVISION_LABEL;

/// Compares two pods for deletion: `Less` means `a` should be deleted before `b`.
/// `rank_*` is the spread rank (higher = more crowded = delete first).
pub fn deletion_order(a: &PodView<'_>, rank_a: u32, b: &PodView<'_>, rank_b: u32) -> Ordering {
    let less = |first: bool| {
        if first {
            Ordering::Less
        } else {
            Ordering::Greater
        }
    };
    // 1. Unassigned < assigned.
    if a.node_name != b.node_name && (a.node_name.is_empty() || b.node_name.is_empty()) {
        return less(a.node_name.is_empty());
    }
    // 2. Pending < Unknown < Running.
    let (pa, pb) = (phase_ordinal(&a.phase), phase_ordinal(&b.phase));
    if pa != pb {
        return pa.cmp(&pb);
    }
    // 3. Not available < available; not ready < ready.
    if a.available != b.available {
        return less(!a.available);
    }
    if a.ready != b.ready {
        return less(!a.ready);
    }
    // 4. Lower deletion cost first.
    if a.deletion_cost != b.deletion_cost {
        return a.deletion_cost.cmp(&b.deletion_cost);
    }
    // 5. Higher spread rank first.
    if rank_a != rank_b {
        return rank_b.cmp(&rank_a);
    }
    // 6. Ready for less time first (missing ready time first).
    if a.ready && b.ready && a.ready_since != b.ready_since {
        return less(after_or_zero(a.ready_since, b.ready_since));
    }
    // 7. More restarts first.
    if a.max_restarts != b.max_restarts {
        return b.max_restarts.cmp(&a.max_restarts);
    }
    // 8. Missing creation time < newer < older.
    if a.created != b.created {
        return less(after_or_zero(a.created, b.created));
    }
    Ordering::Equal
}

/// OpenKruise's same-node ranker: on each node holding more than one of `pods`, every pod
/// except the one most worth keeping gets a rank, the first to delete the highest, so
/// scale-down evens pods out across nodes.
pub fn same_node_ranks(pods: &[&PodView<'_>]) -> BTreeMap<String, u32> {
    let mut by_node: BTreeMap<&str, Vec<&PodView<'_>>> = BTreeMap::new();
    for pod in pods.iter().filter(|p| !p.node_name.is_empty()) {
        by_node.entry(pod.node_name.as_str()).or_default().push(pod);
    }
    let mut ranks = BTreeMap::new();
    for mut on_node in by_node.into_values().filter(|v| v.len() > 1) {
        on_node.sort_by(|a, b| deletion_order(a, 0, b, 0));
        let ranked = on_node.len() - 1;
        for (i, pod) in on_node.into_iter().take(ranked).enumerate() {
            ranks.insert(
                pod.name.clone(),
                u32::try_from(ranked - i).unwrap_or(u32::MAX),
            );
        }
    }
    ranks
}

/// Sorts `pods` into deletion order (first = delete first). Ties keep the input order so a
/// plan is deterministic for a given cache listing.
pub fn rank_for_deletion<'a, 'p>(pods: &[&'a PodView<'p>]) -> Vec<&'a PodView<'p>> {
    let ranks = same_node_ranks(pods);
    let rank = |p: &PodView<'_>| ranks.get(&p.name).copied().unwrap_or(0);
    let mut sorted = pods.to_vec();
    sorted.sort_by(|a, b| deletion_order(a, rank(a), b, rank(b)));
    sorted
}

/// How many pods a scale-down removes, and how many of them may come from the old
/// revisions first (OpenKruise `calculateDiffs`' `totalDiff` and `currentRevDiff`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScaleDown {
    pub total: usize,
    /// Old-revision pods above the partition; these are deleted before updated pods.
    pub old_revision_surplus: usize,
}

/// Picks the pods to delete, in order: pods the user named (`podsToDelete` or the
/// specified-delete label) first, then, for what is left of `scale.total` after the pods
/// already named or already in PreparingDelete, old-revision pods up to
/// `old_revision_surplus` and then updated pods, each group in ranking order.
pub fn pods_to_delete(
    pods: &[PodView<'_>],
    pods_to_delete: &BTreeSet<String>,
    scale: ScaleDown,
) -> Vec<String> {
    let named = |p: &PodView<'_>| p.specified_delete || pods_to_delete.contains(&p.name);
    let specified: Vec<&PodView<'_>> = pods
        .iter()
        .filter(|p| named(p) && !p.preparing_delete())
        .collect();
    let planned = pods
        .iter()
        .filter(|p| named(p) || p.preparing_delete())
        .count();
    let mut chosen: Vec<String> = rank_for_deletion(&specified)
        .into_iter()
        .map(|p| p.name.clone())
        .collect();

    let remaining = scale.total.saturating_sub(planned);
    let candidates = |updated: bool| -> Vec<&PodView<'_>> {
        pods.iter()
            .filter(|p| !named(p) && !p.preparing_delete() && p.updated == updated)
            .collect()
    };
    let choose = |group: Vec<&PodView<'_>>, count: usize| -> Vec<String> {
        rank_for_deletion(&group)
            .into_iter()
            .take(count)
            .map(|p| p.name.clone())
            .collect()
    };
    let old_first = scale.old_revision_surplus.min(remaining);
    let from_old = choose(candidates(false), old_first);
    // Like OpenKruise, the updated pods' share is computed from the surplus, not from how
    // many old pods were actually found, so a stale surplus never deletes extra pods.
    let from_updated = choose(candidates(true), remaining - old_first);
    chosen.extend(from_old);
    chosen.extend(from_updated);
    chosen
}

#[cfg(test)]
#[path = "deletion_tests.rs"]
mod tests;

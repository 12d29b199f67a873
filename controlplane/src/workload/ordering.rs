//! The order in which pods waiting for the update revision are updated: Kubernetes'
//! default pod order (`controller.ActivePods`), then `priorityStrategy`, then
//! `scatterStrategy`, then pods already in PreparingUpdate first — OpenKruise's
//! `SortUpdateIndexes` and `pkg/util/updatesort`.
//!
//! Only the first N of the order are updated in a reconcile (N from `rollout`), so the
//! order decides which pods go first: broken ones before healthy ones, the pods the user
//! ranked first, and scattered pods spread over the batches instead of updated together.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use super::pod_view::{PodView, after_or_zero, phase_ordinal};
use super::selector::selector_matches;
use crate::api::common::{UpdatePriorityStrategy, UpdateScatterTerm};

#[cfg(test)]
#[path = "ordering_tests.rs"]
mod tests;

/// OpenKruise's `SortUpdateIndexes`: the indexes (into `pods`) of the pods waiting to be
/// updated, in update order.
pub fn update_order(
    pods: &[PodView<'_>],
    waiting: &[usize],
    priority: Option<&UpdatePriorityStrategy>,
    scatter: &[UpdateScatterTerm],
) -> Vec<usize> {
    let mut order: Vec<usize> = waiting
        .iter()
        .copied()
        .filter(|&i| i < pods.len())
        .collect();
    order.sort_by(|&a, &b| default_order(&pods[a], &pods[b]));
    if let Some(priority) = priority {
        order = priority_sort(pods, order, priority);
    }
    order = scatter_sort(pods, order, scatter);
    // A stable sort keeps the order above within both groups.
    order.sort_by_key(|&i| !pods[i].preparing_update());
    order
}

/// Kubernetes' `ActivePods.Less`, the default order: unscheduled before scheduled,
/// Pending before Unknown before Running, not ready before ready, ready for less time
/// first, more restarts first, newer first — the pods least worth keeping go first.
pub fn default_order(a: &PodView<'_>, b: &PodView<'_>) -> Ordering {
    if less(a, b) {
        Ordering::Less
    } else if less(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

fn less(a: &PodView<'_>, b: &PodView<'_>) -> bool {
    let (a_node, b_node) = (a.node_name.as_str(), b.node_name.as_str());
    if a_node != b_node && (a_node.is_empty() || b_node.is_empty()) {
        return a_node.is_empty();
    }
    if phase_ordinal(&a.phase) != phase_ordinal(&b.phase) {
        return phase_ordinal(&a.phase) < phase_ordinal(&b.phase);
    }
    if a.ready != b.ready {
        return !a.ready;
    }
    if a.ready && b.ready && a.ready_since != b.ready_since {
        return after_or_zero(a.ready_since, b.ready_since);
    }
    if a.max_restarts != b.max_restarts {
        return a.max_restarts > b.max_restarts;
    }
    if a.created != b.created {
        return after_or_zero(a.created, b.created);
    }
    false
}

/// `prioritySort.Sort`: weight terms (the sum of the weights of matching selectors, higher
/// first) or, when no weight terms exist, order terms (the first key a pod carries, earlier
/// keys first, then the integer at the end of its value, higher first). Like OpenKruise,
/// ties go to the higher pod index, not the incoming order.
pub fn priority_sort(
    pods: &[PodView<'_>],
    mut order: Vec<usize>,
    strategy: &UpdatePriorityStrategy,
) -> Vec<usize> {
    if strategy.weight_priority.is_empty() && strategy.order_priority.is_empty() {
        return order;
    }
    order.sort_by(
        |&a, &b| match prefers(strategy, &pods[a].labels, &pods[b].labels) {
            Some(true) => Ordering::Less,
            Some(false) => Ordering::Greater,
            None => b.cmp(&a),
        },
    );
    order
}

/// `prioritySort.compare` without its default: Some(true) when `a` goes before `b`,
/// Some(false) when after, None when the strategy does not tell them apart.
fn prefers(
    strategy: &UpdatePriorityStrategy,
    a: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
) -> Option<bool> {
    if !strategy.weight_priority.is_empty() {
        let weight = |labels: &BTreeMap<String, String>| -> i64 {
            strategy
                .weight_priority
                .iter()
                .filter(|term| selector_matches(&term.match_selector, labels) == Some(true))
                .map(|term| i64::from(term.weight))
                .sum()
        };
        let (wa, wb) = (weight(a), weight(b));
        return (wa != wb).then_some(wa > wb);
    }
    let (level_a, order_a) = order_priority(strategy, a);
    let (level_b, order_b) = order_priority(strategy, b);
    if level_a != level_b {
        Some(level_a < level_b)
    } else if order_a != order_b {
        Some(order_a > order_b)
    } else {
        None
    }
}

/// The index of the first order term whose key the pod carries (-1 if none, which sorts
/// first, as in OpenKruise) and the integer suffix of that label's value.
fn order_priority(
    strategy: &UpdatePriorityStrategy,
    labels: &BTreeMap<String, String>,
) -> (i64, i64) {
    strategy
        .order_priority
        .iter()
        .enumerate()
        .find_map(|(level, term)| {
            let value = labels.get(&term.ordered_key)?;
            Some((i64::try_from(level).unwrap_or(i64::MAX), int_suffix(value)))
        })
        .unwrap_or((-1, 0))
}

/// `getIntFromStringSuffix`: the decimal digits at the end of `value` (10 in `sts-10`),
/// 0 when there are none or they overflow.
fn int_suffix(value: &str) -> i64 {
    let digits = value.len() - value.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    value[value.len() - digits..].parse().unwrap_or(0)
}

/// `scatterSort.Sort`: for each scatter term (most common first), spread the waiting pods
/// carrying that label evenly among the others, in proportion to how they are spread over
/// the whole set, so one update batch does not take all of them at once.
pub fn scatter_sort(
    pods: &[PodView<'_>],
    mut order: Vec<usize>,
    terms: &[UpdateScatterTerm],
) -> Vec<usize> {
    if terms.is_empty() || order.len() <= 1 {
        return order;
    }
    for term in scatter_terms(pods, &order, terms) {
        order = scatter_by_term(pods, order, &term);
    }
    order
}

/// `getScatterTerms`: a single term as given; several terms keep only those matching some
/// waiting pod, most matches first (a term listed twice counts twice, as upstream).
fn scatter_terms(
    pods: &[PodView<'_>],
    order: &[usize],
    terms: &[UpdateScatterTerm],
) -> Vec<UpdateScatterTerm> {
    if terms.len() == 1 {
        return terms.to_vec();
    }
    let mut found: Vec<UpdateScatterTerm> = Vec::new();
    let mut counts: HashMap<(String, String), usize> = HashMap::new();
    for term in terms {
        for &i in order {
            if pods[i].labels.get(&term.key) == Some(&term.value) {
                let count = counts
                    .entry((term.key.clone(), term.value.clone()))
                    .or_insert(0);
                if *count == 0 {
                    found.push(term.clone());
                }
                *count += 1;
            }
        }
    }
    let count = |t: &UpdateScatterTerm| {
        counts
            .get(&(t.key.clone(), t.value.clone()))
            .copied()
            .unwrap_or(0)
    };
    found.sort_by_key(|t| std::cmp::Reverse(count(t)));
    found
}

/// Upstream compares the label value with a missing label read as "".
fn matches_term(pod: &PodView<'_>, term: &UpdateScatterTerm) -> bool {
    pod.labels.get(&term.key).map_or("", String::as_str) == term.value
}

/// `scatterPodsByRule`: interleave matched and unmatched waiting pods in groups sized by
/// their density; the last matched pod goes to the very end.
fn scatter_by_term(
    pods: &[PodView<'_>],
    order: Vec<usize>,
    term: &UpdateScatterTerm,
) -> Vec<usize> {
    let (mut matched, mut unmatched): (Vec<usize>, Vec<usize>) =
        order.iter().partition(|&&i| matches_term(&pods[i], term));
    if matched.len() <= 1 || unmatched.len() <= 1 {
        return order;
    }
    let total_matched = pods.iter().filter(|pod| matches_term(pod, term)).count();
    let total_unmatched = pods.len() - total_matched;

    let Some(last_matched) = matched.pop() else {
        return order;
    };
    let group = group_by_density(
        total_matched - 1,
        total_unmatched,
        matched.len(),
        unmatched.len(),
    );

    let mut result = Vec::with_capacity(order.len());
    let remainder = group.unmatched_remainder.min(unmatched.len());
    result.extend(unmatched.drain(..remainder));
    for _ in 0..group.count {
        take_into(&mut matched, &mut result, group.matched_size);
        take_into(&mut unmatched, &mut result, group.unmatched_size);
    }
    result.append(&mut matched);
    result.append(&mut unmatched);
    result.push(last_matched);
    result
}

/// `migrateItems`: move up to `size` items from the front of `from`.
fn take_into(from: &mut Vec<usize>, into: &mut Vec<usize>, size: usize) {
    let size = size.min(from.len());
    into.extend(from.drain(..size));
}

#[derive(Debug, Default, PartialEq, Eq)]
struct ScatterGroup {
    count: usize,
    matched_size: usize,
    unmatched_size: usize,
    unmatched_remainder: usize,
}

/// `newScatterGroup`: as many groups as the smaller side, each side split evenly (Go's
/// `math.Round`, half away from zero, as Rust's `f64::round`).
fn scatter_group(matched: usize, unmatched: usize) -> ScatterGroup {
    let count = matched.min(unmatched).max(1);
    let size = |n: usize| (n as f64 / count as f64).round() as usize;
    ScatterGroup {
        count,
        matched_size: size(matched),
        unmatched_size: size(unmatched),
        unmatched_remainder: 0,
    }
}

/// `calculateGroupByDensity`: if the waiting pods are no denser in matched pods than the
/// whole set, group them on their own; otherwise use the whole set's group sizes so that
/// matched pods are not crowded into the first batches. The f32 comparison is upstream's.
fn group_by_density(
    total_matched: usize,
    total_unmatched: usize,
    update_matched: usize,
    update_unmatched: usize,
) -> ScatterGroup {
    let total = scatter_group(total_matched, total_unmatched);
    let update = scatter_group(update_matched, update_unmatched);
    if total_unmatched as f32 / total_matched as f32
        >= update_unmatched as f32 / update_matched as f32
    {
        return update;
    }
    let matched_size = total.matched_size.max(1);
    let unmatched_size = total.unmatched_size.max(1);
    let count = (update_matched / matched_size).min(update_unmatched / unmatched_size);
    ScatterGroup {
        count,
        matched_size,
        unmatched_size,
        unmatched_remainder: update_unmatched.saturating_sub(count * unmatched_size),
    }
}

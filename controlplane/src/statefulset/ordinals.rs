//! A StatefulSet pod's identity, as pure rules: which ordinals should have a pod
//! (`replicas`, `ordinals.start`, `reserveOrdinals`), the pod's name, hostname, subdomain
//! and identity labels, and the names of its claims. The kube-controller-manager's
//! `stateful_set_utils.go` keeps the same rules (`getOrdinal`, `identityMatches`,
//! `getPersistentVolumeClaimName`); OpenKruise adds the reserved ordinals.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

#[cfg(test)]
#[path = "ordinals_tests.rs"]
mod tests;

/// The label naming a StatefulSet pod (`<set>-<ordinal>`), as the native controller writes it.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label holding a StatefulSet pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// Field path of `reserveOrdinals`, named in errors.
pub const RESERVE_ORDINALS_FIELD: &str = "spec.reserveOrdinals";

/// A `reserveOrdinals` entry the admission rule let through but that names no ordinals.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrdinalError {
    /// Neither an integer >= 0 nor a range `"<from>-<to>"` with from <= to.
    #[error(
        "{RESERVE_ORDINALS_FIELD}: {entry:?} is neither an ordinal >= 0 nor a range like \"3-5\" whose first ordinal is not above its last"
    )]
    BadEntry {
        /// The entry as written.
        entry: String,
    },
}

/// The reserved ordinals: inclusive ranges, merged and sorted, so a range as wide as
/// `"0-999999999"` costs no memory, and a lookup is a binary search.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReservedOrdinals {
    ranges: Vec<(i32, i32)>,
    /// `before[i]`: how many ordinals `ranges[..i]` reserve.
    before: Vec<i64>,
}

impl ReservedOrdinals {
    /// Reads `reserveOrdinals`: integers and ranges `"<from>-<to>"` (inclusive).
    pub fn parse(entries: &[IntOrString]) -> Result<Self, OrdinalError> {
        let mut ranges = entries
            .iter()
            .map(parse_entry)
            .collect::<Result<Vec<_>, _>>()?;
        ranges.sort_unstable();
        let mut merged: Vec<(i32, i32)> = Vec::with_capacity(ranges.len());
        for (from, to) in ranges {
            match merged.last_mut() {
                Some(last) if from <= last.1.saturating_add(1) => last.1 = last.1.max(to),
                _ => merged.push((from, to)),
            }
        }
        let before = merged
            .iter()
            .scan(0_i64, |total, (from, to)| {
                let here = *total;
                *total += i64::from(*to) - i64::from(*from) + 1;
                Some(here)
            })
            .collect();
        Ok(Self {
            ranges: merged,
            before,
        })
    }

    /// `ordinal` is reserved.
    pub fn contains(&self, ordinal: i32) -> bool {
        self.range_of(i64::from(ordinal)).is_some()
    }

    /// The last ordinal of the reserved range holding `ordinal`, if any.
    fn range_of(&self, ordinal: i64) -> Option<i64> {
        let after = self
            .ranges
            .partition_point(|(from, _)| i64::from(*from) <= ordinal);
        let (_, to) = *self.ranges.get(after.checked_sub(1)?)?;
        (i64::from(to) >= ordinal).then_some(i64::from(to))
    }

    /// How many reserved ordinals are below `ordinal`.
    fn count_below(&self, ordinal: i64) -> i64 {
        let after = self
            .ranges
            .partition_point(|(from, _)| i64::from(*from) < ordinal);
        let Some(last) = after.checked_sub(1) else {
            return 0;
        };
        let (from, to) = self.ranges[last];
        self.before[last] + i64::from(to).min(ordinal - 1) - i64::from(from) + 1
    }
}

fn parse_entry(entry: &IntOrString) -> Result<(i32, i32), OrdinalError> {
    let (from, to) = match entry {
        IntOrString::Int(i) => (Some(*i), Some(*i)),
        IntOrString::String(s) => match s.split_once('-') {
            Some((from, to)) => (parse_ordinal(from), parse_ordinal(to)),
            None => (parse_ordinal(s), parse_ordinal(s)),
        },
    };
    match (from, to) {
        (Some(from), Some(to)) if (0..=to).contains(&from) => Ok((from, to)),
        _ => Err(OrdinalError::BadEntry {
            entry: match entry {
                IntOrString::Int(i) => i.to_string(),
                IntOrString::String(s) => s.clone(),
            },
        }),
    }
}

/// Digits only (no sign, no spaces), as the admission rule's syntax.
fn parse_ordinal(s: &str) -> Option<i32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Ordinals at or above this are never wanted (a pod name's ordinal is an int32).
const ORDINAL_LIMIT: i64 = i32::MAX as i64;

/// The ordinals that should have a pod: the first `replicas` ordinals from `start` that
/// are not reserved (OpenKruise: replicas counts pods, reserved ordinals are skipped, so
/// the last ordinal moves up by the reserved ones in between). Worked out arithmetically
/// over the reserved ranges, never listed: asking about one ordinal costs a binary search,
/// walking the first `n` costs O(n + reserved ranges), so a `replicas` of 2^31-1 costs no
/// more than 3.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WantedOrdinals {
    replicas: i64,
    start: i64,
    reserved: ReservedOrdinals,
}

impl WantedOrdinals {
    /// The wanted ordinals of `replicas` pods from `start` around `reserved`.
    pub fn new(replicas: i32, start: i32, reserved: ReservedOrdinals) -> Self {
        Self {
            replicas: i64::from(replicas.max(0)),
            start: i64::from(start.max(0)),
            reserved,
        }
    }

    /// `ordinal` should have a pod.
    pub fn contains(&self, ordinal: i32) -> bool {
        let ordinal = i64::from(ordinal);
        (self.start..ORDINAL_LIMIT).contains(&ordinal)
            && self.reserved.range_of(ordinal).is_none()
            && self.free_below(ordinal) < self.replicas
    }

    /// How many wanted ordinals are below `ordinal`.
    pub fn count_below(&self, ordinal: i32) -> i64 {
        self.free_below(i64::from(ordinal)).min(self.replicas)
    }

    /// Whether `partition` keeps the pod of `ordinal` on the current revision: the
    /// partition counts pods in the ordered replicas from `start`, not raw ordinals
    /// (OpenKruise `sortPodsToUpdate` walks `replicas[ordinal - start]` down to index
    /// `partition` and updates at most `replicas - partition` pods, reserved ordinals
    /// being empty slots; `isCurrentRevisionNeeded` counts the pods below the new one), so
    /// the first `partition` wanted ordinals are kept, whatever the start and reserved
    /// ordinals. An ordinal past the wanted ones is kept only if every wanted one is.
    pub fn below_partition(&self, ordinal: i32, partition: i32) -> bool {
        self.count_below(ordinal) < i64::from(partition)
    }

    /// Ordinals from `start` up to (not including) `ordinal` that are not reserved.
    fn free_below(&self, ordinal: i64) -> i64 {
        let end = ordinal.min(ORDINAL_LIMIT);
        if end <= self.start {
            return 0;
        }
        let reserved = self.reserved.count_below(end) - self.reserved.count_below(self.start);
        end - self.start - reserved
    }

    /// The wanted ordinals, ascending, produced one at a time: take only what is needed.
    pub fn iter(&self) -> impl Iterator<Item = i32> + '_ {
        let mut ordinal = self.start;
        let mut left = self.replicas;
        std::iter::from_fn(move || {
            while left > 0 && ordinal < ORDINAL_LIMIT {
                match self.reserved.range_of(ordinal) {
                    Some(last) => ordinal = last + 1,
                    None => {
                        let found = i32::try_from(ordinal).ok()?;
                        ordinal += 1;
                        left -= 1;
                        return Some(found);
                    }
                }
            }
            None
        })
    }
}

/// The name of the pod with `ordinal`: `<set>-<ordinal>`.
pub fn pod_name(set: &str, ordinal: i32) -> String {
    format!("{set}-{ordinal}")
}

/// The name of the claim from template `template` for the pod with `ordinal`:
/// `<template>-<set>-<ordinal>`.
pub fn claim_name(template: &str, set: &str, ordinal: i32) -> String {
    format!("{template}-{}", pod_name(set, ordinal))
}

/// The ordinal in `pod_name` when it is `<set>-<ordinal>`; `None` for a pod of another
/// set or a name whose suffix is not an ordinal.
pub fn ordinal_of(set: &str, pod_name: &str) -> Option<i32> {
    let suffix = pod_name.strip_prefix(set)?.strip_prefix('-')?;
    parse_ordinal(suffix)
}

/// The identity labels of the pod with `ordinal`.
pub fn identity_labels(set: &str, ordinal: i32) -> BTreeMap<String, String> {
    BTreeMap::from([
        (POD_NAME_LABEL.to_owned(), pod_name(set, ordinal)),
        (POD_INDEX_LABEL.to_owned(), ordinal.to_string()),
    ])
}

/// Gives `pod` the identity of `ordinal` in `set`: name, identity labels, hostname, and
/// the governing Service as subdomain (the native `updateIdentity`).
pub fn apply_identity(pod: &mut Pod, set: &str, ordinal: i32, service_name: Option<&str>) {
    pod.metadata.name = Some(pod_name(set, ordinal));
    pod.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .extend(identity_labels(set, ordinal));
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = Some(pod_name(set, ordinal));
    spec.subdomain = service_name.filter(|s| !s.is_empty()).map(str::to_owned);
}

/// `pod` carries the identity of its ordinal in `set` (the native `identityMatches`
/// without the namespace, which the cache already scopes): a drifted pod is fixed.
pub fn identity_matches(pod: &Pod, set: &str, service_name: Option<&str>) -> bool {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let Some(ordinal) = ordinal_of(set, name) else {
        return false;
    };
    let labels = pod.metadata.labels.as_ref();
    let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    let spec = pod.spec.as_ref();
    label(POD_NAME_LABEL) == Some(name)
        && label(POD_INDEX_LABEL) == Some(ordinal.to_string().as_str())
        && spec.and_then(|s| s.hostname.as_deref()) == Some(name)
        && spec.and_then(|s| s.subdomain.as_deref()) == service_name.filter(|s| !s.is_empty())
}

/// Where each existing ordinal stands against the wanted ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrdinalLayout {
    /// The lowest wanted ordinals without a pod, ascending (created lowest first), as many
    /// as the sync may create.
    pub missing: Vec<i32>,
    /// Ordinals with a pod that should not have one (beyond the replicas, or reserved),
    /// descending (deleted highest first).
    pub condemned: Vec<i32>,
}

/// Compares the ordinals of existing pods with the wanted ones: at most `max_missing`
/// missing ordinals, and the condemned ones from the existing pods alone, so the cost is
/// O(existing + max_missing), whatever the replicas.
pub fn layout(wanted: &WantedOrdinals, existing: &[i32], max_missing: usize) -> OrdinalLayout {
    let existing: BTreeSet<i32> = existing.iter().copied().collect();
    let missing = wanted
        .iter()
        .filter(|o| !existing.contains(o))
        .take(max_missing)
        .collect();
    let condemned = existing
        .iter()
        .rev()
        .copied()
        .filter(|o| !wanted.contains(*o))
        .collect();
    OrdinalLayout { missing, condemned }
}

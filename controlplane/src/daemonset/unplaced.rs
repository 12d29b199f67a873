//! The nodes each DaemonSet wants but cannot place its pod on for lack of room, kept
//! between syncs: a pod event on such a node (one finishing or deleted frees its room)
//! queues the DaemonSets waiting there, and a node newly without room is reported once,
//! not on every sync.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::controller::ObjectKey;

/// Node name → why the pod does not fit there.
pub type Reasons = BTreeMap<String, String>;

#[derive(Debug, Default)]
pub struct UnplacedNodes {
    by_set: Mutex<HashMap<ObjectKey, Reasons>>,
}

impl UnplacedNodes {
    /// Records what `key`'s sync found; returns the nodes not listed before (or listed
    /// for another reason), for an event each.
    pub fn record(&self, key: &ObjectKey, now: Reasons) -> Reasons {
        let mut by_set = self.by_set.lock().unwrap_or_else(|e| e.into_inner());
        let before = by_set.remove(key).unwrap_or_default();
        let new: Reasons = (now.iter())
            .filter(|(node, why)| before.get(*node) != Some(*why))
            .map(|(node, why)| (node.clone(), why.clone()))
            .collect();
        if !now.is_empty() {
            by_set.insert(key.clone(), now);
        }
        new
    }

    /// The DaemonSets waiting for room on `node`.
    pub fn waiting_on(&self, node: &str) -> Vec<ObjectKey> {
        let by_set = self.by_set.lock().unwrap_or_else(|e| e.into_inner());
        (by_set.iter())
            .filter(|(_, nodes)| nodes.contains_key(node))
            .map(|(key, _)| key.clone())
            .collect()
    }

    pub fn forget(&self, key: &ObjectKey) {
        let mut by_set = self.by_set.lock().unwrap_or_else(|e| e.into_inner());
        by_set.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            namespace: "ns".to_owned(),
            name: name.to_owned(),
        }
    }

    fn reasons(pairs: &[(&str, &str)]) -> Reasons {
        (pairs.iter())
            .map(|(n, w)| ((*n).to_owned(), (*w).to_owned()))
            .collect()
    }

    #[test]
    fn a_node_is_reported_once_and_queues_its_sets_until_placed() {
        let unplaced = UnplacedNodes::default();
        let first = unplaced.record(&key("a"), reasons(&[("n1", "cpu"), ("n2", "cpu")]));
        assert_eq!(first, reasons(&[("n1", "cpu"), ("n2", "cpu")]));
        unplaced.record(&key("b"), reasons(&[("n1", "memory")]));
        let again = unplaced.record(&key("a"), reasons(&[("n1", "cpu"), ("n2", "pods")]));
        assert_eq!(again, reasons(&[("n2", "pods")]), "only what changed");
        let mut waiting = unplaced.waiting_on("n1");
        waiting.sort_by(|x, y| x.name.cmp(&y.name));
        assert_eq!(waiting, vec![key("a"), key("b")]);
        assert!(unplaced.waiting_on("n3").is_empty());
        unplaced.record(&key("a"), Reasons::new());
        assert_eq!(unplaced.waiting_on("n2"), Vec::<ObjectKey>::new());
        unplaced.forget(&key("b"));
        assert!(unplaced.waiting_on("n1").is_empty());
        let back = unplaced.record(&key("a"), reasons(&[("n1", "cpu")]));
        assert_eq!(
            back,
            reasons(&[("n1", "cpu")]),
            "reported again after placed"
        );
    }
}

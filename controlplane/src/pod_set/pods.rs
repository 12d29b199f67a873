//! The pods and claims the shared executor creates for any pod-set kind: built by the
//! kind's adapter from the revision a `Create` names, with the kind's own last touch.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::kind::PodSetKind;
use crate::workload::actions::Create;
use crate::workload::adapter::new_pod_and_claims;
use crate::workload::execute::{NewPod, NewPods};
use crate::workload::selector_guard::GuardedSet;

/// A kind's pods and claims for the creates of one plan.
pub struct SetPods<'a, 'w, K: PodSetKind> {
    pub set: &'a K::Set,
    pub workload: &'a K::Workload<'w>,
    pub revisions: &'a BTreeMap<String, K::Revision>,
    pub planned: &'a K::Planned,
}

impl<K: PodSetKind> NewPods for SetPods<'_, '_, K> {
    fn selector(&self) -> &LabelSelector {
        GuardedSet::selector(self.set)
    }

    fn fresh_instance_id(&self, taken: &BTreeSet<String>) -> String {
        K::fresh_instance_id(self.planned, taken)
    }

    /// `None` for a create without an instance id (a kind that names every pod it creates
    /// has none to give) or of an unknown revision.
    fn new_pod(&self, create: &Create) -> Option<NewPod> {
        if create.instance_id.is_empty() {
            return None;
        }
        let (mut pod, claims) = new_pod_and_claims(self.workload, self.revisions, create)?;
        K::finish_new_pod(self.set, &mut pod);
        Some(NewPod { pod, claims })
    }
}

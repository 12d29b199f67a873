//! The pod the update guard (`workload::update_guard`) dry-runs before a CloneSet rollout
//! disrupts a pod. The selector guard every pod-set kind runs is
//! `workload::selector_guard`.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use super::pods::new_pod;
use crate::api::CloneSet;
use crate::workload::instance_id::{fresh_instance_id, random_u64};
use crate::workload::revision_spec::RevisionSpec;

/// A pod of `revision` as the rollout would create it: what the update guard
/// (`workload::update_guard`) dry-runs.
pub fn update_revision_pod(cloneset: &CloneSet, revision: &str, spec: &RevisionSpec) -> Pod {
    let instance_id = fresh_instance_id(&BTreeSet::new(), &mut random_u64);
    new_pod(cloneset, revision, spec, &instance_id)
}

//! Carries out a CloneSet plan: CloneSet's own `podsToDelete` clean-up, then the shared
//! executor (`workload::execute`) with CloneSet's pod builders.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, Patch, PatchParams};

use super::controller::{CloneSetController, SyncError, reference};
use super::plan::CloneSetPlan;
use super::pods_to_delete;
use super::status::SyncProblems;
use crate::api::CloneSet;
use crate::controller::ObjectKey;
use crate::controller::api_error::api_error;
use crate::workload::actions::Create;
use crate::workload::adapter::new_pod_and_claims;
use crate::workload::execute::{NewPod, NewPods, Problems};
use crate::workload::instance_id::{fresh_instance_id, random_u64};
use crate::workload::revision_spec::RevisionSpec;

/// CloneSet's pods and claims for a `Create`, from the revision it names.
pub(super) struct CloneSetPods<'a> {
    pub cloneset: &'a CloneSet,
    pub specs: &'a BTreeMap<String, RevisionSpec>,
    /// Instance ids the set's pods and claims hold.
    pub taken_ids: &'a BTreeSet<String>,
}

impl NewPods for CloneSetPods<'_> {
    fn selector(&self) -> &LabelSelector {
        &self.cloneset.spec.selector
    }

    fn fresh_instance_id(&self, taken: &BTreeSet<String>) -> String {
        let held = self.taken_ids.union(taken).cloned().collect();
        fresh_instance_id(&held, &mut random_u64)
    }

    fn new_pod(&self, create: &Create) -> Option<NewPod> {
        let (pod, claims) = new_pod_and_claims(self.cloneset, self.specs, create)?;
        Some(NewPod { pod, claims })
    }
}

/// Runs the plan: CloneSet's `podsToDelete` clean-up, the shared executor, then the
/// claims no pod uses; the first hard error is returned after the rest that can still
/// run has run, and problems for the status conditions are filled in. `Ok(Some(wait))`:
/// creates failed or are backing off, come back after `wait`.
pub(super) async fn execute(
    ctl: &CloneSetController,
    key: &ObjectKey,
    new_pods: &CloneSetPods<'_>,
    planned: &CloneSetPlan,
    problems: &mut SyncProblems,
) -> Result<Option<Duration>, SyncError> {
    let cloneset = new_pods.cloneset;
    let cleaned = match &planned.pods_to_delete {
        Some(list) => clean_pods_to_delete(ctl, key, cloneset, list).await,
        None => Ok(()),
    };
    let mut shared = Problems {
        scale: problems.scale.take(),
        update: problems.update.take(),
    };
    let object = reference(cloneset);
    let parts = (ctl.parts).executor_parts(key, &object, cloneset.metadata.generation);
    let executor = parts.executor(new_pods);
    let executed = executor.execute(&planned.plan, &mut shared).await;
    let unused_claims = executor.delete_unused_claims(&planned.unused_claims).await;
    problems.scale = shared.scale;
    problems.update = shared.update;
    cleaned?;
    unused_claims?;
    Ok(executed?)
}

/// Writes the plan's clean `podsToDelete` list, conditional on the resourceVersion it
/// was computed from; a 409 re-reads the CloneSet and drops the same names again.
async fn clean_pods_to_delete(
    ctl: &CloneSetController,
    key: &ObjectKey,
    cloneset: &CloneSet,
    kept: &[String],
) -> Result<(), SyncError> {
    let api: Api<CloneSet> = Api::namespaced(ctl.parts.client.clone(), &key.namespace);
    let listed = &cloneset.spec.scale_strategy.pods_to_delete;
    let dropped = pods_to_delete::dropped(listed, kept);
    let mut resource_version = cloneset.metadata.resource_version.clone();
    let mut current = listed.clone();
    for _ in 0..pods_to_delete::MAX_ATTEMPTS {
        let Some(list) = pods_to_delete::without(&current, &dropped) else {
            return Ok(());
        };
        let patch = pods_to_delete::clean_patch(resource_version.as_deref(), &list);
        match api
            .patch(&key.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let fresh = api
                    .get(&key.name)
                    .await
                    .map_err(api_error("re-reading the CloneSet to clean podsToDelete"))?;
                resource_version = fresh.metadata.resource_version;
                current = fresh.spec.scale_strategy.pods_to_delete;
            }
            Err(err) => {
                return Err(api_error("cleaning scaleStrategy.podsToDelete")(err).into());
            }
        }
    }
    tracing::debug!("podsToDelete kept changing; the next sync cleans it");
    Ok(())
}

#[cfg(test)]
#[path = "execute_tests.rs"]
mod tests;

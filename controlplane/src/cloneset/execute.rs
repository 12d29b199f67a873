//! Carries out a CloneSet plan: creates in slow-start batches, deletes with UID
//! preconditions, pod changes as agent conditions then a patch. Every write is recorded as
//! an expectation before the next sync may plan again.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;
use tokio::time::Instant;

use super::pods::{RevisionSpec, fresh_instance_id, new_pod, new_pvcs};
use super::pods_to_delete;
use super::reconcile::{CloneSetController, SyncError, api_error, is_not_found, reference};
use super::status::SyncProblems;
use crate::api::CloneSet;
use crate::controller::ObjectKey;
use crate::controller::expectations::{Expectation, resource_version};
use crate::controller::pod_conditions::{ConditionRequest, PodTarget};
use crate::workload::actions::{Create, Delete, Plan, PodChange, deep_merge};
use crate::workload::ownership::delete_params;

/// Most pods created in one sync; the rest come with the next (a burst cap per sync).
const MAX_CREATES_PER_SYNC: usize = 500;

pub(super) struct Executor<'a> {
    pub ctl: &'a CloneSetController,
    pub key: &'a ObjectKey,
    pub cloneset: &'a CloneSet,
    pub specs: &'a BTreeMap<String, RevisionSpec>,
}

impl Executor<'_> {
    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.ctl.client.clone(), &self.key.namespace)
    }

    fn pvcs(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.ctl.client.clone(), &self.key.namespace)
    }

    /// Runs the plan; the first hard error is returned after the rest that can still run
    /// has run, and problems for the status conditions are filled in. `Ok(Some(wait))`:
    /// creates failed or are backing off, come back after `wait`.
    pub async fn execute(
        &self,
        plan: &Plan,
        problems: &mut SyncProblems,
    ) -> Result<Option<Duration>, SyncError> {
        let mut first_error = None;
        if let Some(list) = &plan.pods_to_delete
            && let Err(err) = self.clean_pods_to_delete(list).await
        {
            first_error.get_or_insert(err);
        }
        let create_retry = if plan.creates.is_empty() {
            None
        } else {
            self.create_with_backoff(plan, problems).await
        };
        for delete in &plan.deletes {
            if let Err(err) = self.delete_pod(delete).await {
                first_error.get_or_insert(err);
            }
        }
        for name in &plan.delete_pvcs {
            if let Err(err) = self.delete_pvc(name, None).await {
                first_error.get_or_insert(err);
            }
        }
        for change in &plan.pod_changes {
            if let Err(err) = self.apply_change(change, problems).await {
                first_error.get_or_insert(err);
            }
        }
        if let Some(refusal) = &plan.refusal {
            problems.update = Some(refusal.clone());
            self.ctl
                .events
                .warning(
                    &reference(self.cloneset),
                    "InPlaceOnlyRefused",
                    "Update",
                    refusal.clone(),
                )
                .await;
        }
        first_error.map_or(Ok(create_retry), Err)
    }

    /// Writes the plan's clean `podsToDelete` list, conditional on the resourceVersion it
    /// was computed from; a 409 re-reads the CloneSet and drops the same names again.
    async fn clean_pods_to_delete(&self, kept: &[String]) -> Result<(), SyncError> {
        let api: Api<CloneSet> = Api::namespaced(self.ctl.client.clone(), &self.key.namespace);
        let listed = &self.cloneset.spec.scale_strategy.pods_to_delete;
        let dropped = pods_to_delete::dropped(listed, kept);
        let mut resource_version = self.cloneset.metadata.resource_version.clone();
        let mut current = listed.clone();
        for _ in 0..pods_to_delete::MAX_ATTEMPTS {
            let Some(list) = pods_to_delete::without(&current, &dropped) else {
                return Ok(());
            };
            let patch = pods_to_delete::clean_patch(resource_version.as_deref(), &list);
            match api
                .patch(
                    &self.key.name,
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    let fresh = api
                        .get(&self.key.name)
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

    /// Creates unless the CloneSet is backing off from failed creates (see
    /// `controller::create_backoff`); a failure is reported once per attempt, with the
    /// apiserver's message, and not returned as an error so the queue adds no retries.
    async fn create_with_backoff(
        &self,
        plan: &Plan,
        problems: &mut SyncProblems,
    ) -> Option<Duration> {
        let backoff = &self.ctl.create_backoff;
        let generation = self.cloneset.metadata.generation.unwrap_or(0);
        let now = Instant::now();
        if let Some(waiting) = backoff.waiting(self.key, generation, now) {
            tracing::debug!(remaining = ?waiting.remaining, "creates back off after a failure");
            problems.scale = Some(waiting.message);
            return Some(waiting.remaining);
        }
        match self.create_slow_start(plan).await {
            Ok(()) => {
                backoff.succeeded(self.key);
                None
            }
            Err(err) => {
                let message = err.to_string();
                let wait = backoff.failed(self.key, generation, message.clone(), now);
                self.ctl
                    .events
                    .warning(
                        &reference(self.cloneset),
                        "FailedCreate",
                        "Create",
                        message.clone(),
                    )
                    .await;
                problems.scale = Some(message);
                Some(wait)
            }
        }
    }

    /// Kubernetes' `slowStartBatch`: 1, 2, 4, ... pods at once, stopping at the first
    /// batch with a failure, so a template that cannot be created costs a few calls, not
    /// hundreds.
    async fn create_slow_start(&self, plan: &Plan) -> Result<(), SyncError> {
        let mut taken = plan.taken_ids.clone();
        let creates: Vec<Create> = plan
            .creates
            .iter()
            .take(MAX_CREATES_PER_SYNC)
            .map(|c| {
                let mut c = c.clone();
                if c.instance_id.is_empty() {
                    c.instance_id = fresh_instance_id(&taken, &mut super::random::random_u64);
                }
                taken.insert(c.instance_id.clone());
                c
            })
            .collect();
        let mut batch = 1;
        let mut done = 0;
        let mut created = 0;
        while done < creates.len() {
            let end = (done + batch).min(creates.len());
            let results = join_all(creates[done..end].iter().map(|c| self.create_one(c))).await;
            let failures: Vec<SyncError> = results.into_iter().filter_map(Result::err).collect();
            created += end - done - failures.len();
            if let Some(err) = failures.into_iter().next() {
                let skipped = creates.len() - end;
                return Err(SyncError::Create(format!(
                    "{err} ({created} created, {skipped} skipped by slow start)"
                )));
            }
            done = end;
            batch *= 2;
        }
        if created > 0 {
            self.ctl
                .events
                .normal(
                    &reference(self.cloneset),
                    "SuccessfulCreate",
                    "Create",
                    format!("created {created} pod(s)"),
                )
                .await;
        }
        Ok(())
    }

    async fn create_one(&self, create: &Create) -> Result<(), SyncError> {
        let Some(spec) = self.specs.get(&create.revision) else {
            return Err(SyncError::Create(format!(
                "revision {} is not known",
                create.revision
            )));
        };
        for pvc in new_pvcs(self.cloneset, spec, &create.instance_id) {
            let name = pvc.metadata.name.clone().unwrap_or_default();
            if self
                .ctl
                .stores
                .pvcs
                .get(&ObjectRef::new(&name).within(&self.key.namespace))
                .is_some()
            {
                continue; // reused
            }
            match self.pvcs().create(&PostParams::default(), &pvc).await {
                Ok(_) => self.ctl.expectations.expect(
                    self.key,
                    Expectation::Create {
                        kind: "PersistentVolumeClaim",
                        name: name.clone(),
                    },
                ),
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(err) => {
                    return Err(SyncError::from(
                        api_error(format!("creating claim {name}"))(err),
                    ));
                }
            }
        }
        let pod = new_pod(self.cloneset, &create.revision, spec, &create.instance_id);
        let name = pod.metadata.name.clone().unwrap_or_default();
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .map_err(api_error(format!("creating pod {name}")))?;
        self.ctl
            .expectations
            .expect(self.key, Expectation::Create { kind: "Pod", name });
        Ok(())
    }

    async fn delete_pod(&self, delete: &Delete) -> Result<(), SyncError> {
        match self
            .pods()
            .delete(&delete.pod, &delete_params(&delete.uid))
            .await
        {
            Ok(_) => {}
            Err(err) if is_not_found(&err) => {}
            // The UID precondition failed: a new pod took the name; nothing to do.
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
            Err(err) => {
                return Err(SyncError::from(api_error(format!(
                    "deleting pod {}",
                    delete.pod
                ))(err)));
            }
        }
        self.ctl.expectations.expect(
            self.key,
            Expectation::Delete {
                kind: "Pod",
                name: delete.pod.clone(),
                uid: delete.uid.clone(),
            },
        );
        let why = delete.reason.describe();
        self.ctl
            .events
            .normal(
                &reference(self.cloneset),
                "SuccessfulDelete",
                "Delete",
                if delete.detail.is_empty() {
                    format!("deleted pod {} ({why})", delete.pod)
                } else {
                    format!("deleted pod {} ({why}; {})", delete.pod, delete.detail)
                },
            )
            .await;
        for pvc in &delete.pvcs {
            self.delete_pvc(pvc, Some(why)).await?;
        }
        Ok(())
    }

    async fn delete_pvc(&self, name: &str, why: Option<&str>) -> Result<(), SyncError> {
        let Some(pvc) = self
            .ctl
            .stores
            .pvcs
            .get(&ObjectRef::new(name).within(&self.key.namespace))
        else {
            return Ok(());
        };
        let uid = pvc.metadata.uid.clone().unwrap_or_default();
        match self.pvcs().delete(name, &delete_params(&uid)).await {
            Ok(_) => {}
            Err(err) if is_not_found(&err) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
            Err(err) => {
                return Err(SyncError::from(
                    api_error(format!("deleting claim {name}"))(err),
                ));
            }
        }
        self.ctl.expectations.expect(
            self.key,
            Expectation::Delete {
                kind: "PersistentVolumeClaim",
                name: name.to_owned(),
                uid,
            },
        );
        tracing::info!(
            claim = name,
            why = why.unwrap_or("no pod uses it"),
            "deleted claim"
        );
        Ok(())
    }

    /// Conditions through the pod's agent first (so the pod leaves endpoints before its
    /// containers restart), then the patch; an unreachable agent leaves the pod as it is.
    async fn apply_change(
        &self,
        change: &PodChange,
        problems: &mut SyncProblems,
    ) -> Result<(), SyncError> {
        if !change.conditions.is_empty() {
            let Some(node_name) = change.node.as_deref() else {
                // Not scheduled yet: the conditions wait for a node.
                return Ok(());
            };
            let Some(node) = self.ctl.stores.nodes.get(&ObjectRef::new(node_name)) else {
                problems.update =
                    Some(format!("pod {}: node {node_name} is not known", change.pod));
                return Ok(());
            };
            for condition in &change.conditions {
                let result = self
                    .ctl
                    .agents
                    .set_condition(
                        &node,
                        PodTarget {
                            namespace: self.key.namespace.clone(),
                            name: change.pod.clone(),
                            uid: change.uid.clone(),
                        },
                        ConditionRequest {
                            condition_type: condition.condition_type,
                            status: condition.status,
                            reason: condition.reason,
                            message: &condition.message,
                        },
                    )
                    .await;
                if let Err(err) = result {
                    let message = format!(
                        "pod {} ({}): cannot set {} through the agent on node {node_name}: {}",
                        change.pod, change.reason, condition.condition_type, err.message
                    );
                    let reason = if err.unreachable {
                        "AgentUnreachable"
                    } else {
                        "AgentRefused"
                    };
                    self.ctl
                        .events
                        .warning(&reference(self.cloneset), reason, "Update", message.clone())
                        .await;
                    problems.update = Some(message);
                    return Ok(());
                }
            }
        }
        let Some(patch) = &change.patch else {
            return Ok(());
        };
        let mut body = patch.clone();
        // A condition just set through the agent moved the pod's resourceVersion, so the
        // precondition only guards changes that set none.
        if let Some(rv) = change
            .resource_version
            .as_ref()
            .filter(|_| change.conditions.is_empty())
        {
            deep_merge(&mut body, json!({ "metadata": { "resourceVersion": rv } }));
        }
        let patched = self
            .pods()
            .patch(
                &change.pod,
                &PatchParams::default(),
                &Patch::Strategic(body),
            )
            .await;
        match patched {
            Ok(pod) => {
                let resource_version = resource_version(&pod.metadata);
                self.ctl.expectations.expect(
                    self.key,
                    Expectation::Update {
                        kind: "Pod",
                        name: change.pod.clone(),
                        resource_version,
                    },
                );
                if let Some((reason, action, message)) = change.reason.patched_event(&change.pod) {
                    self.ctl
                        .events
                        .normal(&reference(self.cloneset), reason, action, message)
                        .await;
                }
                Ok(())
            }
            Err(err) if is_not_found(&err) => Ok(()),
            Err(err) => Err(SyncError::from(api_error(format!(
                "patching pod {} ({})",
                change.pod, change.reason
            ))(err))),
        }
    }
}

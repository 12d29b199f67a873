//! The SidecarSet controller: reads the pods the SidecarSet was injected into from the
//! shared cache, plans (`plan`), and carries the plan out: a finished upgrade is closed
//! (state entry dropped, `InPlaceUpdateReady` True again through the pod's agent when the
//! pod has the gate); an upgrade starts only once the pod's budgets admit it as an
//! in-place disruption, with `InPlaceUpdateReady` False first (the pod leaves its
//! Services' endpoints) when a cold sidecar restarts, then one patch of the sidecars'
//! images (`upgrade`); a hot sidecar's swap keeps the pod ready (its old container serves
//! until the new one is ready), so it sets no gate, and its old container is emptied by a
//! second patch (`reset`) once the new one is ready; a pod that cannot be upgraded in
//! place (its sidecars changed beyond their images) gets `SidecarSetUpgradable` False
//! (`upgradable`) and the SidecarSet a Normal event, an upgraded one records True; the
//! status is written when it changed. SidecarSets are cluster-scoped: the key's namespace
//! is empty.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource as _, ResourceExt as _};
use serde_json::{Value, json};

use super::hash::{sidecarset_hash, sidecarset_hash_without_image};
use super::hot::{FIRST_VERSION, resets, swaps};
use super::plan::{SidecarSetPlan, Versions, plan};
use super::pod_state::SidecarPod;
use super::predownload::{PreDownloader, waiting_images};
use super::revisions::{history_step, of_set};
use super::upgradable::{current, next_condition, status_patch};
use super::upgrade::{Target, changed_images, finish_patch, reset_patch, start_patch};
use crate::api::SidecarSet;
use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::{ApiError, api_error, status_code};
use crate::controller::events::EventSink;
use crate::controller::expectations::{Expectation, Expectations, Seen, resource_version};
use crate::controller::pod_conditions::{ConditionRequest, PodConditions, PodTarget};
use crate::controller::runner::{Outcome, Reconciler};
use crate::workload::budget::{Admission, BudgetSource, DisruptionKind};
use crate::workload::inplace::{
    INPLACE_UPDATE_READY, REASON_DONE, REASON_SIDECAR_START, has_readiness_gate,
    sidecar_gate_message,
};
use crate::workload::rollout::IntOrPercentError;

/// How soon a SidecarSet with upgrades under way is looked at again (pod changes wake it
/// sooner).
const UPGRADE_RECHECK: Duration = Duration::from_secs(5);

/// How soon to look again while the cache has not shown a sync's pod writes.
const EXPECTATIONS_RECHECK: Duration = Duration::from_secs(1);

/// Why a SidecarSet sync failed; retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Strategy(#[from] IntOrPercentError),
}

/// The SidecarSet controller's state, shared by its workers.
pub struct SidecarSetController {
    pub client: kube::Client,
    pub stores: Stores,
    /// Sets InPlaceUpdateReady through the pods' agents.
    pub agents: Arc<dyn PodConditions>,
    /// Admits each upgrade as an in-place disruption.
    pub budgets: Arc<dyn BudgetSource>,
    pub events: EventSink,
    /// The control plane's namespace, where the revisions are kept.
    pub namespace: String,
    /// The pod writes of each SidecarSet's last sync, until the cache shows them.
    pub expectations: Expectations<ObjectKey>,
}

impl Reconciler for SidecarSetController {
    type Key = ObjectKey;
    type Error = SyncError;
    const KIND: &'static str = "SidecarSet";
    const READS: &'static [&'static str] = &[
        "SidecarSet",
        "Pod",
        "Node",
        "PodUnavailableBudget",
        "PodDisruptionBudget",
        "ControllerRevision",
        "ImagePullJob",
    ];

    async fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, SyncError> {
        let Some(set) = self.stores.sidecarsets.get(&ObjectRef::new(&key.name)) else {
            self.expectations.forget(key);
            return Ok(Outcome::Done);
        };
        if let Err(pending) = self
            .expectations
            .satisfied(key, &|kind, name| self.seen(kind, name))
        {
            tracing::debug!(?pending, "waiting for the cache to show earlier writes");
            return Ok(Outcome::RequeueAfter(EXPECTATIONS_RECHECK));
        }
        let (hash, hash_without_image) =
            (sidecarset_hash(&set), sidecarset_hash_without_image(&set));
        let versions = Versions {
            hash: &hash,
            hash_without_image: &hash_without_image,
        };
        let pods: Vec<Arc<Pod>> = self.stores.pods.state();
        let started = Timestamp::now();
        let views: Vec<SidecarPod> = (pods.iter())
            .map(|p| SidecarPod::of(p, &set, started))
            .collect();
        let mut plan = plan(&set.spec.update_strategy, versions, &views)?;
        for &i in &plan.reset {
            self.reset(&set, &pods[i], &key.name).await?;
        }
        for &i in &plan.finish {
            self.finish(&pods[i], &key.name, views[i].workload_updating)
                .await?;
        }
        for &i in &plan.reopen {
            self.set_gate(&pods[i], &key.name, true).await;
        }
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let target = Target {
            set_name: &key.name,
            hash: &hash,
            hash_without_image: &hash_without_image,
            now: &now,
            version: set
                .metadata
                .resource_version
                .as_deref()
                .unwrap_or(FIRST_VERSION),
        };
        for &i in &plan.not_upgradable {
            self.mark_upgradable(&pods[i], &key.name, false).await?;
        }
        if !plan.not_upgradable.is_empty() {
            let note = format!(
                "{} pod(s) cannot have their sidecars upgraded in place in this sync (changed beyond their images); they are skipped.",
                plan.not_upgradable.len()
            );
            (self.events)
                .normal(&set.object_ref(&()), "NotUpgradablePods", "Upgrade", note)
                .await;
        }
        for &i in &plan.upgrade {
            if self.start(&set, &pods[i], target).await? {
                self.mark_upgradable(&pods[i], &key.name, true).await?;
            }
        }
        let under_way = views.iter().any(|v| v.injected && v.upgrading) || !plan.upgrade.is_empty();
        plan.status.observed_generation = set.metadata.generation;
        let (latest, collisions) = self.sync_history(&set).await?;
        let images = waiting_images(&pods, &views, &set, &hash, &hash_without_image);
        self.pre_downloader()
            .sync(&set, &plan, images, &latest)
            .await;
        plan.status.latest_revision = latest;
        plan.status.collision_count = collisions;
        self.write_status(&set, &plan).await?;
        Ok(if under_way {
            Outcome::RequeueAfter(UPGRADE_RECHECK)
        } else {
            Outcome::Done
        })
    }

    fn all_keys(&self) -> Vec<ObjectKey> {
        (self.stores.sidecarsets.state().iter())
            .map(|set| ObjectKey::new("", set.name_any()))
            .collect()
    }

    fn caches_synced(&self) -> bool {
        self.stores.sync.synced(Self::READS)
    }
}

impl SidecarSetController {
    /// Starts the upgrade of `pod`'s sidecars: budgets first (a hot swap too: should its
    /// new container never become ready, the pod is not ready), then the gate when a cold
    /// sidecar restarts, then the patch; `true` once the pod was patched.
    async fn start(
        &self,
        set: &SidecarSet,
        pod: &Pod,
        target: Target<'_>,
    ) -> Result<bool, SyncError> {
        let images = changed_images(pod, set);
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        if !images.is_empty() {
            match self
                .budgets
                .admit(&namespace, &name, DisruptionKind::InPlaceUpdate)
                .await?
            {
                Admission::Allowed { .. } => {}
                Admission::Held(message) => {
                    let note = format!("The sidecars of pod {namespace}/{name} wait: {message}");
                    self.events
                        .warning(&set.object_ref(&()), "DisruptionHeld", "Upgrade", note)
                        .await;
                    return Ok(false);
                }
            }
        }
        let swaps = swaps(pod, &set.spec.containers);
        let cold_restarts = images.len() > swaps.len();
        let gated = cold_restarts && has_readiness_gate(pod);
        if gated && !self.set_gate(pod, target.set_name, false).await {
            return Ok(false);
        }
        // Images equal already (the pod was made at that image): only the versions move.
        let body = start_patch(pod, &images, &swaps, target);
        let patched = self
            .patch_pod(target.set_name, &namespace, &name, body)
            .await;
        if patched.is_err() && gated {
            // No upgrade recorded, so nothing would close it: the pod serves again.
            self.set_gate(pod, target.set_name, true).await;
        }
        patched.map(|()| true)
    }

    /// Records in `pod`'s `SidecarSetUpgradable` condition whether SidecarSet `set_name`
    /// can upgrade it in place; writes only a change (the cache's condition is the base:
    /// the expectation below keeps the next sync from reading an older one).
    async fn mark_upgradable(
        &self,
        pod: &Pod,
        set_name: &str,
        upgradable: bool,
    ) -> Result<(), SyncError> {
        let conditions = (pod.status.as_ref())
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default();
        let now = Time(Timestamp::now());
        let Some(condition) = next_condition(current(conditions), set_name, upgradable, &now)
        else {
            return Ok(());
        };
        let (namespace, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
        let body = status_patch(&pod.uid().unwrap_or_default(), &condition);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(body))
            .await
        {
            Ok(written) => {
                self.expect_pod_write(set_name, &namespace, &name, &written);
                tracing::info!(
                    namespace,
                    pod = name,
                    upgradable,
                    "recorded whether the pod's sidecars can be upgraded in place"
                );
                Ok(())
            }
            // Gone, or recreated under its name (the UID precondition): nothing to mark.
            Err(err) if matches!(status_code(&err), Some(404 | 409)) => Ok(()),
            Err(err) => Err(api_error(format!(
                "writing the SidecarSetUpgradable condition of pod {namespace}/{name}"
            ))(err)
            .into()),
        }
    }

    /// Sets the old containers of `pod`'s hot sidecars, whose new ones are ready, to the
    /// empty image. The budgets admitted the upgrade at its start; the pod stays ready.
    async fn reset(&self, set: &SidecarSet, pod: &Pod, set_name: &str) -> Result<(), SyncError> {
        let resets = resets(pod, &set.spec.containers);
        if resets.is_empty() {
            return Ok(());
        }
        let (namespace, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
        let body = reset_patch(pod, &resets, set_name);
        self.patch_pod(set_name, &namespace, &name, body).await
    }

    /// Closes a finished upgrade; the gate goes back to True unless the pod's own workload
    /// is updating it (its update sets the gate when it is done).
    async fn finish(
        &self,
        pod: &Pod,
        set_name: &str,
        workload_updating: bool,
    ) -> Result<(), SyncError> {
        if has_readiness_gate(pod)
            && !workload_updating
            && !self.set_gate(pod, set_name, true).await
        {
            return Ok(());
        }
        let (namespace, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
        self.patch_pod(set_name, &namespace, &name, finish_patch(pod, set_name))
            .await
    }

    /// Sets `InPlaceUpdateReady` through the pod's agent; `false` when that could not be
    /// done now (the next sync tries again).
    async fn set_gate(&self, pod: &Pod, set_name: &str, ready: bool) -> bool {
        let node_name = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let Some(node) = self.stores.nodes.get(&ObjectRef::new(&node_name)) else {
            return false;
        };
        let target = PodTarget {
            namespace: pod.namespace().unwrap_or_default(),
            name: pod.name_any(),
            uid: pod.uid().unwrap_or_default(),
        };
        let (reason, message) = if ready {
            (
                REASON_DONE,
                format!("The upgrade of this pod's sidecars by SidecarSet {set_name} is done."),
            )
        } else {
            // Its own reason and a message naming the set: the workload leaves this gate
            // alone, and only this set reopens it should its upgrade never be recorded.
            (REASON_SIDECAR_START, sidecar_gate_message(set_name))
        };
        let request = ConditionRequest {
            condition_type: INPLACE_UPDATE_READY,
            status: ready,
            reason,
            message: &message,
        };
        match self.agents.set_condition(&node, target, request).await {
            Ok(()) => true,
            Err(err) => {
                tracing::info!(pod = %pod.name_any(), node = %node_name, error = %err, "could not set InPlaceUpdateReady; trying again later");
                false
            }
        }
    }

    /// Patches a pod of the SidecarSet `set_name`; its next sync waits until the cache
    /// shows the write, so a pod is never started twice (twice admitted by its budgets).
    async fn patch_pod(
        &self,
        set_name: &str,
        namespace: &str,
        name: &str,
        body: Value,
    ) -> Result<(), SyncError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api
            .patch(name, &PatchParams::default(), &Patch::Strategic(body))
            .await
        {
            Ok(written) => {
                self.expect_pod_write(set_name, namespace, name, &written);
                Ok(())
            }
            // The pod is gone: nothing to upgrade.
            Err(err) if status_code(&err) == Some(404) => Ok(()),
            Err(err) => Err(
                api_error(format!("patching the sidecars of pod {namespace}/{name}"))(err).into(),
            ),
        }
    }

    /// Makes the next sync of `set_name` wait until the cache shows this write of the pod.
    fn expect_pod_write(&self, set_name: &str, namespace: &str, name: &str, written: &Pod) {
        let write = Expectation::Update {
            kind: "Pod",
            name: format!("{namespace}/{name}"),
            resource_version: resource_version(&written.metadata),
        };
        self.expectations
            .expect(&ObjectKey::new("", set_name), write);
    }

    /// What the cache shows of a pod (`namespace/name`) a sync wrote.
    fn seen(&self, kind: &str, name: &str) -> Option<Seen> {
        let (namespace, name) = name.split_once('/')?;
        let pod = (kind == "Pod").then(|| {
            self.stores
                .pods
                .get(&ObjectRef::new(name).within(namespace))
        })??;
        Some(Seen::of(&pod.metadata))
    }

    /// Pre-download's narrow view of this controller.
    fn pre_downloader(&self) -> PreDownloader<'_> {
        PreDownloader {
            client: &self.client,
            jobs: &self.stores.imagepulljobs,
            revisions: &self.stores.revisions,
            events: &self.events,
            namespace: &self.namespace,
        }
    }

    /// Creates the revision of the current spec if none has its data, deletes those past
    /// `revisionHistoryLimit`; returns the latest revision's name and the collision count
    /// (raised when another revision holds the name the current one would take).
    async fn sync_history(&self, set: &SidecarSet) -> Result<(String, Option<i32>), SyncError> {
        let all = self.stores.revisions.state();
        let revisions = of_set(&all, &self.namespace, &set.name_any());
        let step = history_step(set, &self.namespace, &revisions);
        let mut collisions = set.status.as_ref().and_then(|s| s.collision_count);
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), &self.namespace);
        if let Some(revision) = &step.create {
            match api.create(&PostParams::default(), revision).await {
                Ok(_) => {}
                Err(err) if status_code(&err) == Some(409) => {
                    let name = revision.name_any();
                    let held = api
                        .get_opt(&name)
                        .await
                        .map_err(api_error(format!("reading revision {name}")))?;
                    if held.is_some_and(|h| h.data != revision.data) {
                        collisions = Some(collisions.unwrap_or(0) + 1);
                    }
                }
                Err(err) => {
                    return Err(api_error(format!(
                        "creating a revision of SidecarSet {}",
                        set.name_any()
                    ))(err)
                    .into());
                }
            }
        }
        for name in &step.delete {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(err) if status_code(&err) == Some(404) => {}
                Err(err) => return Err(api_error(format!("deleting revision {name}"))(err).into()),
            }
        }
        Ok((step.latest, collisions))
    }

    async fn write_status(&self, set: &SidecarSet, plan: &SidecarSetPlan) -> Result<(), SyncError> {
        let status = plan.status.clone();
        let old = set.status.clone().unwrap_or_default();
        if status == old {
            return Ok(());
        }
        let api: Api<SidecarSet> = Api::all(self.client.clone());
        // Spelled out: a merge patch leaves a field the status skips at 0 as it was.
        let mut body = json!({ "status": status });
        body["status"]["updatedReadyPods"] = json!(status.updated_ready_pods);
        api.patch_status(
            &set.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
        .await
        .map_err(api_error(format!(
            "writing the status of SidecarSet {}",
            set.name_any()
        )))?;
        Ok(())
    }
}

//! Pre-download of a SidecarSet's new sidecar images on the nodes of the pods still to be
//! upgraded, with the workloads' rules (`predownload::plan::decide`: more than 3 matched
//! pods, not every pod in one batch, the `apps.kruise.io/image-predownload-*` annotations,
//! once per revision) and their ImagePullJobs. A SidecarSet spans namespaces and an
//! ImagePullJob does not, so each namespace with pods waiting for an image-only upgrade
//! gets the jobs, each controlled by the SidecarSet (a cluster-scoped owner may own them,
//! so they go with it); the revision in the control plane's namespace is labelled once
//! they exist. Pre-download only speeds the upgrade up: failures are Events, never errors.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource as _, ResourceExt as _};
use serde_json::json;

use super::plan::SidecarSetPlan;
use super::pod_state::SidecarPod;
use super::upgrade::changed_images;
use crate::api::ImagePullJob;
use crate::api::SidecarSet;
use crate::api::sidecarset::SidecarSetUpdateStrategyType;
use crate::controller::api_error::status_code;
use crate::controller::events::EventSink;
use crate::predownload::plan::{
    CREATED_LABEL, Decision, JobPlan, OwnedJob, REVISION_ANNOTATION, Rollout, decide,
    jobs_to_delete,
};
use crate::runtime::api_message::api_message;
use crate::workload::ownership::{delete_params, is_controlled_by};
use crate::workload::rollout::{partition_replicas, scaled_share};

/// The pods waiting for an image-only upgrade, by namespace, and the images they move to
/// (container → image).
pub fn waiting_images(
    pods: &[std::sync::Arc<Pod>],
    views: &[SidecarPod],
    set: &SidecarSet,
    hash: &str,
    bare: &str,
) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let (mut namespaces, mut images) = (BTreeSet::new(), BTreeMap::new());
    for (pod, view) in pods.iter().zip(views) {
        let waiting =
            view.injected && view.active && view.hash != hash && view.hash_without_image == bare;
        if !waiting {
            continue;
        }
        let changed = changed_images(pod, set);
        if !changed.is_empty() {
            namespaces.insert(pod.namespace().unwrap_or_default());
            images.extend(changed);
        }
    }
    (namespaces, images)
}

/// What `decide` reads of a SidecarSet's upgrade.
pub struct Upgrade<'a> {
    pub set: &'a SidecarSet,
    pub plan: &'a SidecarSetPlan,
    pub images: &'a BTreeMap<String, String>,
    pub selector: &'a LabelSelector,
    pub latest_revision: &'a str,
    pub already_created: bool,
}

/// The workloads' pre-download rollout of a SidecarSet upgrade: its matched pods as
/// replicas; converged when every one is updated.
pub fn rollout<'a>(u: &Upgrade<'a>, annotations: &'a BTreeMap<String, String>) -> Rollout<'a> {
    let status = &u.plan.status;
    let strategy = &u.set.spec.update_strategy;
    let max_unavailable = strategy
        .max_unavailable
        .clone()
        .unwrap_or(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1));
    let converged = status.updated_pods == status.matched_pods;
    Rollout {
        annotations,
        replicas: status.matched_pods,
        partition: partition_replicas(
            "spec.updateStrategy.partition",
            strategy.partition.as_ref(),
            status.matched_pods,
        )
        .unwrap_or(0),
        max_unavailable: scaled_share(
            "spec.updateStrategy.maxUnavailable",
            &max_unavailable,
            status.matched_pods,
            true,
        )
        .unwrap_or(1)
        .max(1),
        updated_ready_replicas: status.updated_ready_pods,
        current_revision: if converged { u.latest_revision } else { "" },
        update_revision: u.latest_revision,
        update_revision_hash: None,
        already_created: u.already_created,
        in_place_images: Some(u.images),
        selector: u.selector,
        pull_secrets: u
            .set
            .spec
            .image_pull_secrets
            .iter()
            .map(|s| s.name.clone())
            .collect(),
    }
}

/// What pre-download reads and writes with, lent by the controller: only these, so that
/// pre-download needs nothing else of it.
pub struct PreDownloader<'a> {
    pub client: &'a kube::Client,
    pub jobs: &'a Store<ImagePullJob>,
    pub revisions: &'a Store<ControllerRevision>,
    pub events: &'a EventSink,
    /// The control plane's namespace, where the revisions are kept.
    pub namespace: &'a str,
}

impl PreDownloader<'_> {
    /// Pre-downloads the images of the pods `waiting` (their namespaces, the images) for
    /// the upgrade to revision `latest`, unless the SidecarSet does not upgrade pods.
    pub async fn sync(
        &self,
        set: &SidecarSet,
        plan: &SidecarSetPlan,
        waiting: (BTreeSet<String>, BTreeMap<String, String>),
        latest: &str,
    ) {
        let strategy = &set.spec.update_strategy;
        if strategy.strategy_type() == SidecarSetUpdateStrategyType::NotUpdate || latest.is_empty()
        {
            return;
        }
        let (namespaces, images) = waiting;
        let revision = (self.revisions).get(&ObjectRef::new(latest).within(self.namespace));
        let already_created = revision
            .and_then(|r| r.metadata.labels.clone())
            .is_some_and(|l| l.contains_key(CREATED_LABEL));
        let selector = set.spec.selector.clone().unwrap_or_default();
        let upgrade = Upgrade {
            set,
            plan,
            images: &images,
            selector: &selector,
            latest_revision: latest,
            already_created,
        };
        self.sync_jobs(&upgrade, &namespaces).await;
    }

    /// Deletes the SidecarSet's stale jobs and creates those due in each namespace of
    /// `namespaces`.
    async fn sync_jobs(&self, upgrade: &Upgrade<'_>, namespaces: &BTreeSet<String>) {
        let set = upgrade.set;
        let uid = set.uid().unwrap_or_default();
        let annotations = set.metadata.annotations.clone().unwrap_or_default();
        let rollout = rollout(upgrade, &annotations);
        let jobs = self.jobs.state();
        let owned: Vec<_> = jobs
            .iter()
            .filter(|j| is_controlled_by(&j.metadata, &uid))
            .collect();
        let listed: Vec<(OwnedJob<'_>, String)> = (owned.iter())
            .map(|job| {
                let revision = job
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(REVISION_ANNOTATION))
                    .map(String::as_str);
                let owned = OwnedJob {
                    name: job.metadata.name.as_deref().unwrap_or_default(),
                    uid: job.metadata.uid.as_deref().unwrap_or_default(),
                    revision,
                };
                (owned, job.namespace().unwrap_or_default())
            })
            .collect();
        let plain: Vec<OwnedJob<'_>> = listed.iter().map(|(j, _)| *j).collect();
        for stale in jobs_to_delete(&plain, rollout.current_revision, rollout.update_revision) {
            let namespace = listed
                .iter()
                .find(|(j, _)| j.uid == stale.uid)
                .map(|(_, ns)| ns.clone())
                .unwrap_or_default();
            let api: Api<ImagePullJob> = Api::namespaced(self.client.clone(), &namespace);
            if let Err(err) = api.delete(stale.name, &delete_params(stale.uid)).await {
                tracing::info!(job = stale.name, %namespace, error = %err, "could not delete a SidecarSet pre-download job");
            }
        }
        match decide(&rollout) {
            Ok(Decision::Create(plans)) => {
                self.create_jobs(set, &plans, namespaces, upgrade.latest_revision)
                    .await;
            }
            Ok(_) => {}
            Err(err) => {
                let note = format!("{err}; sidecar images are not pre-downloaded for this upgrade");
                self.events
                    .warning(
                        &set.object_ref(&()),
                        "InvalidPreDownloadAnnotation",
                        "PreDownload",
                        note,
                    )
                    .await;
            }
        }
    }

    async fn create_jobs(
        &self,
        set: &SidecarSet,
        plans: &[JobPlan],
        namespaces: &BTreeSet<String>,
        revision: &str,
    ) {
        let owner = OwnerReference {
            api_version: "apps.kruise.io/v1alpha1".to_owned(),
            kind: "SidecarSet".to_owned(),
            name: set.name_any(),
            uid: set.uid().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        for namespace in namespaces {
            let api: Api<ImagePullJob> = Api::namespaced(self.client.clone(), namespace);
            for plan in plans {
                let job = ImagePullJob {
                    metadata: ObjectMeta {
                        name: Some(plan.name.clone()),
                        namespace: Some(namespace.clone()),
                        owner_references: Some(vec![owner.clone()]),
                        annotations: Some(
                            [(REVISION_ANNOTATION.to_owned(), revision.to_owned())].into(),
                        ),
                        ..ObjectMeta::default()
                    },
                    spec: plan.spec.clone(),
                    status: None,
                };
                match api.create(&PostParams::default(), &job).await {
                    Ok(_) => {}
                    // Created by an earlier sync whose revision label did not land.
                    Err(err) if status_code(&err) == Some(409) => {}
                    Err(err) => {
                        let note = format!(
                            "Pre-downloading {} in namespace {namespace} failed: {}",
                            plan.spec.image,
                            api_message(&err)
                        );
                        self.events
                            .warning(
                                &set.object_ref(&()),
                                "PreDownloadFailed",
                                "PreDownload",
                                note,
                            )
                            .await;
                        return;
                    }
                }
            }
        }
        let revisions: Api<ControllerRevision> =
            Api::namespaced(self.client.clone(), self.namespace);
        let label = json!({ "metadata": { "labels": { CREATED_LABEL: "true" } } });
        if let Err(err) = revisions
            .patch(revision, &PatchParams::default(), &Patch::Merge(label))
            .await
        {
            tracing::info!(revision, error = %err, "could not label the SidecarSet revision as pre-downloaded");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::sidecarset::SidecarSetStatus;

    fn set(partition: Option<i32>) -> SidecarSet {
        let mut set: SidecarSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
            "metadata": { "name": "log" },
            "spec": { "namespace": "shop", "containers": [{ "name": "log-agent", "image": "agent:2" }], "imagePullSecrets": [{ "name": "pull" }] },
        }))
        .expect("a SidecarSet");
        set.spec.update_strategy.partition =
            partition.map(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int);
        set
    }

    fn plan(matched: i32, updated: i32) -> SidecarSetPlan {
        SidecarSetPlan {
            status: SidecarSetStatus {
                matched_pods: matched,
                updated_pods: updated,
                updated_ready_pods: updated,
                ..SidecarSetStatus::default()
            },
            ..SidecarSetPlan::default()
        }
    }

    fn decision(set: &SidecarSet, plan: &SidecarSetPlan, already_created: bool) -> Decision {
        let images = BTreeMap::from([("log-agent".to_owned(), "agent:2".to_owned())]);
        let selector = LabelSelector::default();
        let upgrade = Upgrade {
            set,
            plan,
            images: &images,
            selector: &selector,
            latest_revision: "log-abc",
            already_created,
        };
        let annotations = BTreeMap::new();
        decide(&rollout(&upgrade, &annotations)).expect("a decision")
    }

    #[test]
    fn the_workloads_rules_decide_a_sidecar_pre_download() {
        let cases = [
            (
                "10 pods, one at a time",
                set(None),
                plan(10, 0),
                false,
                true,
            ),
            ("3 pods or fewer", set(None), plan(3, 0), false, false),
            ("converged", set(None), plan(10, 10), false, false),
            (
                "already created for this revision",
                set(None),
                plan(10, 0),
                true,
                false,
            ),
            (
                "partition keeps pods: still pre-downloads",
                set(Some(5)),
                plan(10, 0),
                false,
                true,
            ),
        ];
        for (case, set, plan, created, pulls) in cases {
            let decided = decision(&set, &plan, created);
            assert_eq!(
                matches!(decided, Decision::Create(_)),
                pulls,
                "{case}: {decided:?}"
            );
        }
        let Decision::Create(jobs) = decision(&set(None), &plan(10, 0), false) else {
            panic!("no jobs");
        };
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].spec.image, "agent:2");
        assert_eq!(jobs[0].spec.pull_secrets, ["pull"]);
        assert_eq!(jobs[0].name, "log-abc-log-agent");
    }

    #[test]
    fn only_namespaces_with_pods_waiting_for_an_image_pull_it() {
        let pod = |namespace: &str, image: &str| -> std::sync::Arc<Pod> {
            std::sync::Arc::new(
                serde_json::from_value(json!({
                    "metadata": { "name": "web", "namespace": namespace },
                    "spec": { "containers": [{ "name": "log-agent", "image": image }] },
                }))
                .expect("a pod"),
            )
        };
        let view = |hash: &str, bare: &str| SidecarPod {
            injected: true,
            active: true,
            hash: hash.into(),
            hash_without_image: bare.into(),
            ..SidecarPod::default()
        };
        let pods = [
            pod("shop", "agent:1"),
            pod("cart", "agent:2"),
            pod("blog", "agent:1"),
            pod("wiki", "agent:1"),
        ];
        let views = [
            view("old", "shape"),
            view("new", "shape"),
            view("old", "other"),
            view("old", "shape"),
        ];
        let mut views = views.to_vec();
        views[3].injected = false;
        let (namespaces, images) = waiting_images(&pods, &views, &set(None), "new", "shape");
        assert_eq!(namespaces.into_iter().collect::<Vec<_>>(), ["shop"]);
        assert_eq!(
            images,
            BTreeMap::from([("log-agent".to_owned(), "agent:2".to_owned())])
        );
    }
}

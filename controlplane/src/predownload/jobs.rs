//! Carries out pre-download for one workload: deletes the jobs [`jobs_to_delete`] names,
//! creates the jobs [`decide`] asks for (controlled by the workload, so garbage collection
//! takes them with it), then labels the update revision so they are never created twice.
//! Pre-download only speeds a rollout up: a failure here is logged and reported as an
//! Event, and the rollout goes on.

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::plan::{
    CREATED_LABEL, Decision, JobPlan, OwnedJob, REVISION_ANNOTATION, Rollout, decide,
    jobs_to_delete,
};
use crate::api::ImagePullJob;
use crate::caches::Stores;
use crate::controller::api_error::api_error;
use crate::controller::events::EventSink;
use crate::workload::ownership::{delete_params, is_controlled_by};

/// The workload whose rollout pre-downloads.
pub struct Workload<'a> {
    pub namespace: &'a str,
    /// The controller reference its jobs carry.
    pub owner: OwnerReference,
    /// Where Events go.
    pub reference: &'a ObjectReference,
}

/// Deletes stale jobs and creates the ones due for `rollout`; never fails the caller.
pub async fn sync(
    client: &kube::Client,
    stores: &Stores,
    events: &EventSink,
    workload: &Workload<'_>,
    rollout: &Rollout<'_>,
) {
    let api: Api<ImagePullJob> = Api::namespaced(client.clone(), workload.namespace);
    let owned: Vec<_> = stores
        .imagepulljobs
        .state()
        .into_iter()
        .filter(|job| job.metadata.namespace.as_deref() == Some(workload.namespace))
        .filter(|job| is_controlled_by(&job.metadata, &workload.owner.uid))
        .collect();
    let listed: Vec<OwnedJob<'_>> = owned
        .iter()
        .map(|job| OwnedJob {
            name: job.metadata.name.as_deref().unwrap_or_default(),
            uid: job.metadata.uid.as_deref().unwrap_or_default(),
            revision: job
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(REVISION_ANNOTATION))
                .map(String::as_str),
        })
        .collect();
    let stale = jobs_to_delete(&listed, rollout.current_revision, rollout.update_revision);
    for job in stale {
        match api.delete(job.name, &delete_params(job.uid)).await {
            Ok(_) => tracing::info!(job = job.name, "deleted pre-download job"),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => {
                let message =
                    api_error(format!("deleting ImagePullJob {}", job.name))(err).to_string();
                failed(events, workload, message).await;
            }
        }
    }

    match decide(rollout) {
        Ok(Decision::Create(jobs)) => create(client, events, workload, rollout, &jobs).await,
        Ok(Decision::Skip(reason)) => tracing::trace!(reason, "no image pre-download"),
        Ok(Decision::Wait { need, have }) => {
            tracing::debug!(need, have, "pre-download waits for updated ready pods");
        }
        Err(err) => {
            events
                .warning(
                    workload.reference,
                    "InvalidPreDownloadAnnotation",
                    "PreDownload",
                    format!("{err}; images are not pre-downloaded for this rollout"),
                )
                .await;
        }
    }
}

async fn create(
    client: &kube::Client,
    events: &EventSink,
    workload: &Workload<'_>,
    rollout: &Rollout<'_>,
    jobs: &[JobPlan],
) {
    let api: Api<ImagePullJob> = Api::namespaced(client.clone(), workload.namespace);
    for job in jobs {
        let object = ImagePullJob {
            metadata: ObjectMeta {
                name: Some(job.name.clone()),
                namespace: Some(workload.namespace.to_owned()),
                owner_references: Some(vec![workload.owner.clone()]),
                annotations: Some(
                    [(
                        REVISION_ANNOTATION.to_owned(),
                        rollout.update_revision.to_owned(),
                    )]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            spec: job.spec.clone(),
            status: None,
        };
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => {
                events
                    .normal(
                        workload.reference,
                        "PreDownloadImage",
                        "PreDownload",
                        format!(
                            "pre-downloading {} (container {}) on the nodes of pods not yet on revision {}: ImagePullJob {}",
                            job.spec.image, job.container, rollout.update_revision, job.name
                        ),
                    )
                    .await;
            }
            // Created by an earlier sync whose revision label did not land.
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(err) => {
                let message =
                    api_error(format!("creating ImagePullJob {}", job.name))(err).to_string();
                failed(events, workload, message).await;
                return;
            }
        }
    }
    let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), workload.namespace);
    let label = json!({ "metadata": { "labels": { CREATED_LABEL: "true" } } });
    if let Err(err) = revisions
        .patch(
            rollout.update_revision,
            &PatchParams::default(),
            &Patch::Merge(label),
        )
        .await
    {
        let action = format!(
            "labelling revision {} {CREATED_LABEL}",
            rollout.update_revision
        );
        let message = api_error(action)(err).to_string();
        failed(events, workload, message).await;
    }
}

async fn failed(events: &EventSink, workload: &Workload<'_>, message: String) {
    tracing::warn!(%message, "image pre-download");
    events
        .warning(
            workload.reference,
            "PreDownloadFailed",
            "PreDownload",
            message,
        )
        .await;
}

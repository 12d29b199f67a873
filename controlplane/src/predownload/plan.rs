//! Whether an in-place rollout pre-downloads its new images now, and the ImagePullJobs
//! that do it (OpenKruise's PreDownloadImageForInPlaceUpdate). Pure: the caller reads the
//! workload, its revisions and its jobs, and carries out what this says.
//!
//! Rules: pre-download runs once per update revision (the revision is labelled
//! [`CREATED_LABEL`] after its jobs exist, so a restarted control plane or a job deleted
//! by its TTL does not pull again), only for an in-place update that changes container
//! images, only with more than [`MIN_REPLICAS`] replicas, not when every pod updates in
//! one batch (no partition and maxUnavailable covers all replicas), and only once
//! `apps.kruise.io/image-predownload-min-updated-ready-pods` updated pods are ready. Each
//! changed image gets one ImagePullJob whose `podSelector` is the workload's selector
//! minus the pods already on the update revision, so the image lands on the nodes of the
//! pods still to update. Jobs of another revision, and every job once the rollout
//! converged, are deleted.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::common::{CompletionPolicy, CompletionPolicyType};
use crate::api::imagepulljob::{ImagePullJobSpec, PullPolicy};
use crate::workload::revision::{CONTROLLER_REVISION_HASH_LABEL, fnv32a};
use crate::workload::rollout::scaled_share;

/// Nodes pulling one image at once (integer, or percentage of the nodes). Default 1.
pub const PARALLELISM_ANNOTATION: &str = "apps.kruise.io/image-predownload-parallelism";
/// Seconds one pull attempt may take. Default [`DEFAULT_TIMEOUT_SECONDS`].
pub const TIMEOUT_ANNOTATION: &str = "apps.kruise.io/image-predownload-timeout-seconds";
/// Updated, ready pods (integer, or percentage of replicas) before pre-download starts.
pub const MIN_UPDATED_READY_PODS_ANNOTATION: &str =
    "apps.kruise.io/image-predownload-min-updated-ready-pods";
/// On a ControllerRevision whose pre-download jobs were created.
pub const CREATED_LABEL: &str = "apps.kruise.io/image-predownload-created";
/// On each job: the update revision it pre-downloads for.
pub const REVISION_ANNOTATION: &str = "stevedore.dev/predownload-revision";

/// Pre-download only for workloads with more replicas than this.
pub const MIN_REPLICAS: i32 = 3;
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 600;
/// A failed pull is retried once before its node counts as failed: pre-download is an
/// optimisation, and the kubelet pulls anyway when the pod restarts.
const BACKOFF_LIMIT: i32 = 1;
/// A finished job is deleted after this (its entries are released when it finishes).
const TTL_SECONDS_AFTER_FINISHED: i32 = 600;
/// Kubernetes object names (DNS subdomains) are at most this long.
const MAX_NAME_LEN: usize = 253;

/// What the decision looks at: one workload mid-rollout.
#[derive(Clone, Debug)]
pub struct Rollout<'a> {
    pub annotations: &'a BTreeMap<String, String>,
    pub replicas: i32,
    /// Pods kept on the current revision (partition, already scaled).
    pub partition: i32,
    /// Pods that may be unavailable during the update (already scaled).
    pub max_unavailable: i32,
    pub updated_ready_replicas: i32,
    pub current_revision: &'a str,
    pub update_revision: &'a str,
    /// The update revision's hash, which a pod's `controller-revision-hash` may carry
    /// instead of the revision name.
    pub update_revision_hash: Option<&'a str>,
    /// Whether the update revision carries [`CREATED_LABEL`].
    pub already_created: bool,
    /// Container name → new image, when pods move to the update revision in place;
    /// `None` when they are recreated.
    pub in_place_images: Option<&'a BTreeMap<String, String>>,
    /// The workload's pod selector.
    pub selector: &'a LabelSelector,
    /// The pod template's `imagePullSecrets` names.
    pub pull_secrets: Vec<String>,
}

/// One ImagePullJob to create.
#[derive(Clone, Debug, PartialEq)]
pub struct JobPlan {
    pub name: String,
    /// The container (first by name) whose new image this job pulls.
    pub container: String,
    pub spec: ImagePullJobSpec,
}

/// What to do about pre-download for the update revision.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Nothing, for the reason given (for the debug log).
    Skip(&'static str),
    /// Not before `need` updated pods are ready (`have` are).
    Wait { need: i32, have: i32 },
    /// Create these jobs, then label the update revision.
    Create(Vec<JobPlan>),
}

/// An annotation that cannot be read; the rollout goes on without pre-download.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AnnotationError {
    #[error(
        "annotation {annotation}: {value:?} is not an integer >= {min} or a percentage from 0% to 100%"
    )]
    IntOrPercent {
        annotation: &'static str,
        value: String,
        min: i32,
    },
    #[error("annotation {annotation}: {value:?} is not an integer >= 1")]
    Seconds {
        annotation: &'static str,
        value: String,
    },
}

/// Decides pre-download for `r`.
pub fn decide(r: &Rollout<'_>) -> Result<Decision, AnnotationError> {
    if r.current_revision == r.update_revision {
        return Ok(Decision::Skip("the rollout has converged"));
    }
    if r.already_created {
        return Ok(Decision::Skip("already pre-downloaded for this revision"));
    }
    let Some(images) = r.in_place_images else {
        return Ok(Decision::Skip("pods are recreated, not updated in place"));
    };
    if images.is_empty() {
        return Ok(Decision::Skip("no container image changes"));
    }
    if r.replicas <= MIN_REPLICAS {
        return Ok(Decision::Skip("3 replicas or fewer"));
    }
    if r.partition == 0 && r.max_unavailable >= r.replicas {
        return Ok(Decision::Skip("every pod updates in one batch"));
    }
    let parallelism = parallelism(r.annotations)?;
    let timeout = timeout_seconds(r.annotations)?;
    let need = min_updated_ready(r.annotations, r.replicas)?;
    if r.updated_ready_replicas < need {
        return Ok(Decision::Wait {
            need,
            have: r.updated_ready_replicas,
        });
    }

    let selector = old_pods_selector(r.selector, r.update_revision, r.update_revision_hash);
    // One job per distinct image, named after the first container (by name) using it.
    let mut by_image: BTreeMap<&str, &str> = BTreeMap::new();
    for (container, image) in images {
        by_image.entry(image.as_str()).or_insert(container.as_str());
    }
    let mut jobs: Vec<JobPlan> = by_image
        .into_iter()
        .map(|(image, container)| JobPlan {
            name: job_name(r.update_revision, container),
            container: container.to_owned(),
            spec: ImagePullJobSpec {
                image: image.to_owned(),
                pull_secrets: r.pull_secrets.clone(),
                selector: None,
                pod_selector: Some(selector.clone()),
                parallelism: Some(parallelism.clone()),
                pull_policy: Some(PullPolicy {
                    timeout_seconds: Some(timeout),
                    backoff_limit: Some(BACKOFF_LIMIT),
                }),
                completion_policy: CompletionPolicy {
                    type_: Some(CompletionPolicyType::Always),
                    active_deadline_seconds: None,
                    ttl_seconds_after_finished: Some(TTL_SECONDS_AFTER_FINISHED),
                },
                image_pull_policy: None,
            },
        })
        .collect();
    jobs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Decision::Create(jobs))
}

/// A pre-download job the workload owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnedJob<'a> {
    pub name: &'a str,
    pub uid: &'a str,
    /// Its [`REVISION_ANNOTATION`].
    pub revision: Option<&'a str>,
}

/// The owned jobs to delete: all of them once the rollout converged, else those of
/// another revision (a rollout that moved on before they finished).
pub fn jobs_to_delete<'a, 'j>(
    jobs: &'j [OwnedJob<'a>],
    current_revision: &str,
    update_revision: &str,
) -> Vec<&'j OwnedJob<'a>> {
    let converged = current_revision == update_revision;
    jobs.iter()
        .filter(|job| converged || job.revision != Some(update_revision))
        .collect()
}

/// The workload's selector, narrowed to pods not on the update revision.
pub fn old_pods_selector(
    selector: &LabelSelector,
    update_revision: &str,
    update_revision_hash: Option<&str>,
) -> LabelSelector {
    let mut values = vec![update_revision.to_owned()];
    if let Some(hash) = update_revision_hash
        && hash != update_revision
    {
        values.push(hash.to_owned());
    }
    let mut narrowed = selector.clone();
    narrowed
        .match_expressions
        .get_or_insert_with(Vec::new)
        .push(LabelSelectorRequirement {
            key: CONTROLLER_REVISION_HASH_LABEL.to_owned(),
            operator: "NotIn".to_owned(),
            values: Some(values),
        });
    narrowed
}

/// `<revision>-<container>`, or when that is too long for an object name, a prefix of it
/// and a hash of the whole.
pub fn job_name(update_revision: &str, container: &str) -> String {
    let full = format!("{update_revision}-{container}");
    if full.len() <= MAX_NAME_LEN {
        return full;
    }
    let hash = format!("{:08x}", fnv32a(full.as_bytes()));
    // Revision and container names are ASCII, so any byte index is a character boundary.
    let keep = MAX_NAME_LEN - hash.len() - 1;
    format!("{}-{hash}", full[..keep].trim_end_matches(['-', '.']))
}

fn parallelism(annotations: &BTreeMap<String, String>) -> Result<IntOrString, AnnotationError> {
    let Some(value) = annotations.get(PARALLELISM_ANNOTATION) else {
        return Ok(IntOrString::Int(1));
    };
    let invalid = || AnnotationError::IntOrPercent {
        annotation: PARALLELISM_ANNOTATION,
        value: value.clone(),
        min: 1,
    };
    let parsed = int_or_percent(value).ok_or_else(invalid)?;
    // 0 would pause the job and keep its entries forever; a pre-download pulls.
    match &parsed {
        IntOrString::Int(n) if *n < 1 => Err(invalid()),
        IntOrString::String(p) if p == "0%" => Err(invalid()),
        _ => {
            scaled_share(PARALLELISM_ANNOTATION, &parsed, 100, true).map_err(|_| invalid())?;
            Ok(parsed)
        }
    }
}

fn timeout_seconds(annotations: &BTreeMap<String, String>) -> Result<i32, AnnotationError> {
    let Some(value) = annotations.get(TIMEOUT_ANNOTATION) else {
        return Ok(DEFAULT_TIMEOUT_SECONDS);
    };
    value
        .trim()
        .parse::<i32>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| AnnotationError::Seconds {
            annotation: TIMEOUT_ANNOTATION,
            value: value.clone(),
        })
}

fn min_updated_ready(
    annotations: &BTreeMap<String, String>,
    replicas: i32,
) -> Result<i32, AnnotationError> {
    let Some(value) = annotations.get(MIN_UPDATED_READY_PODS_ANNOTATION) else {
        return Ok(0);
    };
    let invalid = || AnnotationError::IntOrPercent {
        annotation: MIN_UPDATED_READY_PODS_ANNOTATION,
        value: value.clone(),
        min: 0,
    };
    let parsed = int_or_percent(value).ok_or_else(invalid)?;
    scaled_share(MIN_UPDATED_READY_PODS_ANNOTATION, &parsed, replicas, true).map_err(|_| invalid())
}

/// `"3"` → 3, `"50%"` → "50%"; anything else `None`.
fn int_or_percent(value: &str) -> Option<IntOrString> {
    let value = value.trim();
    if let Some(number) = value.strip_suffix('%') {
        number.parse::<i32>().ok()?;
        return Some(IntOrString::String(value.to_owned()));
    }
    value.parse::<i32>().ok().map(IntOrString::Int)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

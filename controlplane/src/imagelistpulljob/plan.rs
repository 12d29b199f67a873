//! The ImageListPullJob planner: from the job, the ImagePullJobs it controls, the names
//! others hold, and the time, decide which ImagePullJobs to create, update (a spec edit,
//! e.g. `pullPolicy.timeoutSeconds`, kruise #2221, reaches the pulls under way) and
//! delete, the job's status, and whether the job is deleted. Pure: no client, no clock.
//!
//! One ImagePullJob per image, named `<job>-<hash of the image>`, so the same name comes
//! back after a restart or a lost create; ImagePullJobs are found by controller reference
//! and keyed by their image, so ones this job created under other names are kept too.
//! With completion policy Always the job completes once every ImagePullJob has, then
//! leaves them alone; `ttlSecondsAfterFinished` deletes the job, and with it (garbage
//! collection) its ImagePullJobs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Resource as _;

use crate::api::common::CompletionPolicyType;
use crate::api::imagelistpulljob::{FailedImageStatus, ImageListPullJobStatus};
use crate::api::imagepulljob::ImagePullJobSpec;
use crate::api::{ImageListPullJob, ImagePullJob};
use crate::controller::events::PlannedEvent;
use crate::controller::job_ttl::{impl_job_plan, job_ttl};
use crate::imagepulljob::progress::{Part, summarize};
use crate::workload::revision::{fnv32a, safe_encode};

/// The longest object name (a DNS subdomain).
const MAX_NAME_LENGTH: usize = 253;

/// What the planner looks at.
pub struct Snapshot<'a> {
    pub job: &'a ImageListPullJob,
    /// The ImagePullJobs the job controls and that are not being deleted.
    pub children: Vec<&'a ImagePullJob>,
    /// Names of ImagePullJobs in the namespace the job does not control.
    pub taken: BTreeSet<&'a str>,
    pub now: Timestamp,
}

/// What to do.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub create: Vec<ImagePullJob>,
    /// ImagePullJobs (by name) whose spec becomes this one.
    pub update: Vec<(String, ImagePullJobSpec)>,
    /// ImagePullJobs to delete, by name and UID.
    pub delete: Vec<(String, String)>,
    pub status: ImageListPullJobStatus,
    /// The TTL after finishing ran out.
    pub delete_job: bool,
    pub requeue_after: Option<Duration>,
    pub events: Vec<PlannedEvent>,
}

impl_job_plan!(Plan);

/// The name of the ImagePullJob of `image`: the job's name (cut to fit) and a hash of
/// the image, as Kubernetes names ControllerRevisions.
pub fn child_name(job: &str, image: &str) -> String {
    let hash = safe_encode(&fnv32a(image.as_bytes()).to_string());
    let keep = MAX_NAME_LENGTH - hash.len() - 1;
    // Names are ASCII; a cut name must still end in an alphanumeric character.
    let prefix = job[..job.len().min(keep)].trim_end_matches(['-', '.']);
    format!("{prefix}-{hash}")
}

/// Plans one reconcile of `s.job`.
pub fn plan(s: &Snapshot<'_>) -> Plan {
    let job = s.job;
    let old = job.status.clone().unwrap_or_default();
    let mut plan = Plan {
        status: old.clone(),
        ..Plan::default()
    };
    let always = job.spec.completion_policy.policy_type() == CompletionPolicyType::Always;
    if always && let Some(Time(completed)) = old.completion_time {
        let ttl_seconds = job.spec.completion_policy.ttl_seconds_after_finished;
        job_ttl(ttl_seconds, completed, s.now, "the job").apply(&mut plan);
        return plan;
    }
    let kept = sort_children(s, &mut plan);
    for image in &job.spec.images {
        let wanted = job.spec.child_spec(image);
        match kept.get(image.as_str()) {
            Some(child) if child.spec != wanted => {
                let name = child.metadata.name.clone().unwrap_or_default();
                plan.update.push((name, wanted));
            }
            Some(_) => {}
            None => create(s, &mut plan, image, wanted),
        }
    }
    plan.status = aggregate(s, &kept, &old);
    if always && plan.status.completion_time.is_some() {
        plan.events.push(PlannedEvent {
            warning: false,
            reason: "Completed",
            note: format!(
                "every image was pulled or failed: {} of {} ImagePullJobs succeeded",
                plan.status.succeeded, plan.status.desired
            ),
        });
        let ttl_seconds = job.spec.completion_policy.ttl_seconds_after_finished;
        job_ttl(ttl_seconds, s.now, s.now, "the job").apply(&mut plan);
    }
    plan
}

/// The ImagePullJob kept for each image (the one with the job's own name for it, else the
/// first by name); deletes the others and those of images no longer listed.
fn sort_children<'a>(s: &Snapshot<'a>, plan: &mut Plan) -> BTreeMap<&'a str, &'a ImagePullJob> {
    let job_name = s.job.metadata.name.as_deref().unwrap_or_default();
    let listed: BTreeSet<&str> = s.job.spec.images.iter().map(String::as_str).collect();
    let mut children = s.children.clone();
    children.sort_by_key(|c| {
        let name = c.metadata.name.as_deref().unwrap_or_default();
        (name != child_name(job_name, &c.spec.image), name.to_owned())
    });
    let mut kept: BTreeMap<&str, &ImagePullJob> = BTreeMap::new();
    for child in children {
        let image = child.spec.image.as_str();
        if listed.contains(image) && !kept.contains_key(image) {
            kept.insert(image, child);
            continue;
        }
        let name = child.metadata.name.clone().unwrap_or_default();
        let uid = child.metadata.uid.clone().unwrap_or_default();
        let why = if listed.contains(image) {
            "a second ImagePullJob for"
        } else {
            "no longer listed:"
        };
        plan.events.push(PlannedEvent {
            warning: false,
            reason: "SuccessfulDelete",
            note: format!("deleting ImagePullJob {name}, {why} image {image}"),
        });
        plan.delete.push((name, uid));
    }
    kept
}

fn create(s: &Snapshot<'_>, plan: &mut Plan, image: &str, spec: ImagePullJobSpec) {
    let job = s.job;
    let name = child_name(job.metadata.name.as_deref().unwrap_or_default(), image);
    if s.taken.contains(name.as_str()) {
        plan.events.push(PlannedEvent {
            warning: true,
            reason: "FailedCreate",
            note: format!(
                "cannot pull {image}: ImagePullJob {name} exists and belongs to another owner; delete it or rename this job"
            ),
        });
        return;
    }
    plan.events.push(PlannedEvent {
        warning: false,
        reason: "SuccessfulCreate",
        note: format!("creating ImagePullJob {name} to pull {image}"),
    });
    plan.create.push(ImagePullJob {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: job.metadata.namespace.clone(),
            owner_references: job.controller_owner_ref(&()).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    });
}

/// Where one image's ImagePullJob stands, as OpenKruise counts it.
struct ChildState {
    started: bool,
    active: bool,
    completed: bool,
    succeeded: bool,
    failed: i32,
}

fn child_state(child: &ImagePullJob) -> ChildState {
    let status = child.status.clone().unwrap_or_default();
    let started = status.start_time.is_some();
    let all_finished = status.desired == status.failed + status.succeeded;
    let completed = status.completion_time.is_some() || (started && all_finished);
    ChildState {
        started,
        active: started && status.active > 0,
        completed,
        succeeded: completed && status.desired == status.succeeded,
        failed: if started { status.failed } else { 0 },
    }
}

/// The job's status from its ImagePullJobs' (OpenKruise's counts, and the progress).
fn aggregate(
    s: &Snapshot<'_>,
    kept: &BTreeMap<&str, &ImagePullJob>,
    old: &ImageListPullJobStatus,
) -> ImageListPullJobStatus {
    let images = &s.job.spec.images;
    let mut status = ImageListPullJobStatus {
        start_time: Some(old.start_time.clone().unwrap_or(Time(s.now))),
        desired: i32::try_from(images.len()).unwrap_or(i32::MAX),
        ..ImageListPullJobStatus::default()
    };
    let mut parts = Vec::new();
    for image in images {
        let Some(child) = kept.get(image.as_str()) else {
            continue;
        };
        let state = child_state(child);
        status.active += i32::from(state.active);
        status.completed += i32::from(state.completed);
        status.succeeded += i32::from(state.succeeded);
        let name = child.metadata.name.clone().unwrap_or_default();
        if state.failed > 0 {
            let failed_nodes = child
                .status
                .as_ref()
                .map(|s| s.failed_nodes.join(", "))
                .unwrap_or_default();
            status.failed_image_statuses.push(FailedImageStatus {
                message: format!(
                    "pulling {image} failed on {} nodes ({failed_nodes}); see ImagePullJob {name}",
                    state.failed
                ),
                image_pull_job: name,
                name: image.clone(),
            });
        }
        let progress = child.status.as_ref().and_then(|s| s.progress.clone());
        if state.started {
            let progress = progress.unwrap_or_default();
            parts.push(Part {
                finished: state.completed,
                percent: progress.percent,
                bytes_done: progress.bytes_done,
                bytes_total: progress.bytes_total,
            });
        }
    }
    let always = s.job.spec.completion_policy.policy_type() == CompletionPolicyType::Always;
    if always && status.completed == status.desired {
        status.completion_time = Some(Time(s.now));
    }
    status.progress = Some(summarize(
        &parts,
        images.len(),
        old.progress.as_ref(),
        old.desired,
    ));
    status
}

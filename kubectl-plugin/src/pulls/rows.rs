//! What `pulls` shows, as pure rules: one row per node and image from the ImageLists'
//! status, one per ImagePullJob, and the words and numbers a person reads.

use kube::ResourceExt as _;
use serde::Serialize;
use stevedore_api::imagelist::ImagePullPhase;
use stevedore_api::{ImageList, ImagePullJob};

/// One image on one node.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PullRow {
    pub node: String,
    pub image: String,
    pub phase: String,
    pub bytes_done: i64,
    pub bytes_total: i64,
    pub attempts: i32,
    pub message: String,
}

/// One ImagePullJob's progress over its nodes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobRow {
    pub namespace: String,
    pub name: String,
    pub image: String,
    pub percent: i32,
    pub succeeded: i32,
    pub failed: i32,
    pub desired: i32,
    pub done: bool,
}

impl PullRow {
    /// Waiting or Pulling: the pull is not over.
    pub fn in_flight(&self) -> bool {
        matches!(self.phase.as_str(), "Waiting" | "Pulling")
    }

    /// The key a live bar is kept under.
    pub fn key(&self) -> String {
        format!("{}\u{0}{}", self.node, self.image)
    }
}

fn phase_name(phase: ImagePullPhase) -> &'static str {
    match phase {
        ImagePullPhase::Waiting => "Waiting",
        ImagePullPhase::Pulling => "Pulling",
        ImagePullPhase::Succeeded => "Succeeded",
        ImagePullPhase::Failed => "Failed",
    }
}

/// The rows of `lists` (one ImageList per node, named after it), for `node` only when
/// given; every image in spec, Waiting until the agent reports it; sorted by node, image.
pub fn pull_rows(lists: &[ImageList], node: Option<&str>) -> Vec<PullRow> {
    let mut rows = Vec::new();
    for list in lists {
        let list_node = list.name_any();
        if node.is_some_and(|n| n != list_node) {
            continue;
        }
        for image in list.spec.images.keys() {
            let status = list.status.as_ref().and_then(|s| s.images.get(image));
            rows.push(PullRow {
                node: list_node.clone(),
                image: image.clone(),
                phase: phase_name(status.map(|s| s.phase).unwrap_or_default()).to_owned(),
                bytes_done: status.map_or(0, |s| s.bytes_done),
                bytes_total: status.map_or(0, |s| s.bytes_total),
                attempts: status.map_or(0, |s| s.attempts),
                message: status.map(|s| s.message.clone()).unwrap_or_default(),
            });
        }
    }
    rows.sort_by(|a, b| (&a.node, &a.image).cmp(&(&b.node, &b.image)));
    rows
}

/// The rows of the ImagePullJobs, sorted by namespace and name.
pub fn job_rows(jobs: &[ImagePullJob]) -> Vec<JobRow> {
    let mut rows: Vec<JobRow> = jobs
        .iter()
        .map(|job| {
            let status = job.status.clone().unwrap_or_default();
            JobRow {
                namespace: job.namespace().unwrap_or_default(),
                name: job.name_any(),
                image: job.spec.image.clone(),
                percent: status.progress.map_or(0, |p| p.percent),
                succeeded: status.succeeded,
                failed: status.failed,
                desired: status.desired,
                done: status.completion_time.is_some(),
            }
        })
        .collect();
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    rows
}

/// Bytes in binary units as people read them: `512 B`, `1.5 MiB`.
pub fn human_bytes(bytes: i64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    let bytes = bytes.max(0);
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    #[allow(clippy::cast_precision_loss, reason = "a rounded figure for display")]
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `done / total (percent)`, or the bytes alone while the total is unknown.
pub fn byte_progress(row: &PullRow) -> String {
    if row.bytes_total <= 0 {
        return if row.bytes_done > 0 {
            human_bytes(row.bytes_done)
        } else {
            "-".to_owned()
        };
    }
    let percent = row.bytes_done.clamp(0, row.bytes_total) * 100 / row.bytes_total;
    format!(
        "{} / {} ({percent}%)",
        human_bytes(row.bytes_done),
        human_bytes(row.bytes_total)
    )
}

/// The line printed for a row when it changes (output that is not a terminal).
pub fn change_line(row: &PullRow) -> String {
    let mut line = format!(
        "{} {} {} {}",
        row.node,
        row.image,
        row.phase,
        byte_progress(row)
    );
    if !row.message.is_empty() {
        line.push_str(&format!(": {}", row.message));
    }
    line
}

/// The line printed for a job when it changes.
pub fn job_line(job: &JobRow) -> String {
    format!(
        "imagepulljob {}/{} {} {}% ({} of {} nodes succeeded, {} failed){}",
        job.namespace,
        job.name,
        job.image,
        job.percent,
        job.succeeded,
        job.desired,
        job.failed,
        if job.done { ", done" } else { "" }
    )
}

/// True when every pull has ended (none Waiting or Pulling) and every job is done.
pub fn all_settled(pulls: &[PullRow], jobs: &[JobRow]) -> bool {
    pulls.iter().all(|p| !p.in_flight()) && jobs.iter().all(|j| j.done)
}

#[cfg(test)]
#[path = "rows_tests.rs"]
mod tests;

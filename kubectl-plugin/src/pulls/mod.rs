//! `pulls`: image pulls per node and image from the ImageLists' status, and the
//! ImagePullJobs' progress; once, or live with `--watch`.

pub mod rows;
mod watch;

use anyhow::{Context as _, Result};
use kube::api::ListParams;
use kube::{Api, Client};
use serde::Serialize;
use stevedore_api::{ImageList, ImagePullJob};

use crate::cli::{Output, PullsArgs};
use crate::output;
use rows::{JobRow, PullRow, byte_progress, job_rows, pull_rows};

#[derive(Serialize)]
struct Pulls {
    pulls: Vec<PullRow>,
    jobs: Vec<JobRow>,
}

/// The ImageLists (of `node` only, when given) and the ImagePullJobs (of `namespace`
/// only, when given).
async fn read(client: &Client, node: Option<&str>, namespace: Option<&str>) -> Result<Pulls> {
    let lists = Api::<ImageList>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing ImageLists")?;
    let jobs = namespace
        .map_or_else(
            || Api::<ImagePullJob>::all(client.clone()),
            |ns| Api::namespaced(client.clone(), ns),
        )
        .list(&ListParams::default())
        .await
        .context("listing ImagePullJobs")?;
    Ok(Pulls {
        pulls: pull_rows(&lists.items, node),
        jobs: job_rows(&jobs.items),
    })
}

/// `namespace`: the one given with `--namespace`, which narrows the ImagePullJobs shown.
pub async fn run(
    client: &Client,
    args: PullsArgs,
    namespace: Option<&str>,
    out: Output,
) -> Result<u8> {
    if args.watch {
        return watch::watch(
            client,
            args.node.as_deref(),
            namespace,
            args.until_done,
            out,
        )
        .await;
    }
    let pulls = read(client, args.node.as_deref(), namespace).await?;
    if output::structured(out, &pulls)? {
        return Ok(0);
    }
    output::line(&pulls_table(&pulls.pulls))?;
    if !pulls.jobs.is_empty() {
        output::line("")?;
        output::line(&jobs_table(&pulls.jobs))?;
    }
    Ok(0)
}

fn pulls_table(rows: &[PullRow]) -> String {
    if rows.is_empty() {
        return "No images on any node's ImageList.".to_owned();
    }
    output::table(
        &["NODE", "IMAGE", "PHASE", "PROGRESS", "ATTEMPTS", "MESSAGE"],
        rows.iter().map(|r| {
            vec![
                r.node.clone(),
                r.image.clone(),
                r.phase.clone(),
                byte_progress(r),
                r.attempts.to_string(),
                r.message.clone(),
            ]
        }),
    )
}

fn jobs_table(rows: &[JobRow]) -> String {
    output::table(
        &[
            "NAMESPACE",
            "IMAGEPULLJOB",
            "IMAGE",
            "PROGRESS",
            "SUCCEEDED",
            "FAILED",
            "DESIRED",
        ],
        rows.iter().map(|j| {
            vec![
                j.namespace.clone(),
                j.name.clone(),
                j.image.clone(),
                format!("{}%{}", j.percent, if j.done { " done" } else { "" }),
                j.succeeded.to_string(),
                j.failed.to_string(),
                j.desired.to_string(),
            ]
        }),
    )
}

//! The CPU cost of one CloneSet plan (the pure step of every sync) over the objects of a
//! live CloneSet, to profile (`perf record`) and to compare before and after a change.
//! Capture the objects, then run it on them:
//!
//! ```text
//! kubectl -n NS get pods -l app=NAME -o json > pods.json
//! kubectl -n NS get cloneset NAME -o json > cloneset.json
//! kubectl -n NS get controllerrevisions -o json > revisions.json
//! cargo run --release -p stevedore-controlplane --example plan_cost -- \
//!     pods.json cloneset.json revisions.json [SYNCS]
//! ```
//!
//! It prints the mean time of one plan and what the plan decided, so two builds can be
//! compared on the same objects.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::Instant;

use anyhow::{Context as _, Result};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde::de::DeserializeOwned;
use stevedore_controlplane::api::CloneSet;
use stevedore_controlplane::cloneset::plan::{Snapshot, plan};
use stevedore_controlplane::workload::revision_spec::RevisionSpec;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The `items` of a `kubectl get -o json` list.
fn items<T: DeserializeOwned>(path: &str) -> Result<Vec<T>> {
    let text = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    let list: serde_json::Value =
        serde_json::from_slice(&text).with_context(|| format!("{path} is not JSON"))?;
    let items = list.get("items").cloned().unwrap_or_default();
    serde_json::from_value(items).with_context(|| format!("the items of {path}"))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [pods, cloneset, revisions, rest @ ..] = args.as_slice() else {
        anyhow::bail!("usage: plan_cost PODS.json CLONESET.json REVISIONS.json [SYNCS]");
    };
    let syncs: u32 = rest.first().map_or(Ok(200), |s| s.parse())?;
    let pods: Vec<Pod> = items(pods)?;
    let cloneset: CloneSet = serde_json::from_slice(&std::fs::read(cloneset)?)
        .with_context(|| format!("{cloneset} is not a CloneSet"))?;
    let revisions: BTreeMap<String, RevisionSpec> = items::<ControllerRevision>(revisions)?
        .into_iter()
        .filter_map(|r| {
            let data = serde_json::to_vec(&r.data?).ok()?;
            Some((r.metadata.name?, RevisionSpec::from_data(&data)?))
        })
        .collect();
    let status = cloneset.status.clone().unwrap_or_default();
    let snapshot = Snapshot {
        cloneset: &cloneset,
        pods: pods.iter().collect(),
        pvcs: Vec::new(),
        update_revision: &status.update_revision,
        current_revision: &status.current_revision,
        revisions: &revisions,
        now: Timestamp::now(),
    };
    let first = plan(&snapshot)?;
    let started = Instant::now();
    for _ in 0..syncs {
        std::hint::black_box(plan(std::hint::black_box(&snapshot))?);
    }
    let per_sync = started.elapsed() / syncs;
    // The figure is this tool's output, for the person who ran it.
    writeln!(
        std::io::stdout(),
        "{} pods: {per_sync:?} per plan over {syncs} plans; the plan: {} creates, {} deletes, {} pod changes",
        pods.len(),
        first.plan.creates.len(),
        first.plan.deletes.len(),
        first.plan.pod_changes.len()
    )?;
    Ok(())
}

//! The local registry's access log, as the pull tests read it: how many lines it has (to
//! look only at what a test caused) and how many bytes it sent the agents for blobs.

use anyhow::{Context as _, Result};

use crate::ClusterInfo;

fn read(cluster: &ClusterInfo) -> Result<String> {
    std::fs::read_to_string(cluster.log_dir().join("registry.log"))
        .context("reading the registry log")
}

/// The number of lines logged so far.
pub fn line_count(cluster: &ClusterInfo) -> Result<usize> {
    Ok(read(cluster)?.lines().count())
}

/// Bytes the registry sent agents in blob GETs whose line contains `request`, in the
/// lines after the first `skip`.
pub fn agent_blob_bytes(cluster: &ClusterInfo, request: &str, skip: usize) -> Result<u64> {
    Ok(read(cluster)?
        .lines()
        .skip(skip)
        .filter(|l| l.contains("\"GET /v2/") && l.contains("/blobs/") && l.contains(request))
        .filter(|l| l.contains("stevedore-agent/"))
        .filter_map(response_bytes)
        .sum())
}

/// The body size of a `"GET <path> HTTP/1.1" <status> <bytes> ...` line.
fn response_bytes(line: &str) -> Option<u64> {
    line.split("HTTP/1.1\" ")
        .nth(1)?
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

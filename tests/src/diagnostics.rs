//! What a failed test prints so its cause can be found from the CI log alone.

use std::fmt::Write as _;
use std::path::Path;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::ListParams;

use crate::cluster::ClusterInfo;

const LOG_TAIL_LINES: usize = 30;

pub async fn dump_diagnostics(client: &kube::Client, cluster: &ClusterInfo, namespace: &str) {
    let mut out = String::new();
    let _ = writeln!(out, "===== diagnostics for namespace {namespace} =====");
    out.push_str(&events_report(client, namespace).await);
    out.push_str(&pods_report(client, namespace).await);
    out.push_str(&component_log_tails(&cluster.log_dir()));
    eprintln!("{out}");
}

async fn events_report(client: &kube::Client, namespace: &str) -> String {
    let mut out = String::from("--- events ---\n");
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    match events.list(&ListParams::default()).await {
        Ok(list) => {
            for e in list.items {
                let obj = &e.involved_object;
                let _ = writeln!(
                    out,
                    "{} {}/{} {}: {}",
                    e.type_.as_deref().unwrap_or("-"),
                    obj.kind.as_deref().unwrap_or("-"),
                    obj.name.as_deref().unwrap_or("-"),
                    e.reason.as_deref().unwrap_or("-"),
                    e.message.as_deref().unwrap_or("").trim()
                );
            }
        }
        Err(err) => {
            let _ = writeln!(out, "(cannot list events: {err})");
        }
    }
    out
}

async fn pods_report(client: &kube::Client, namespace: &str) -> String {
    let mut out = String::from("--- pods ---\n");
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    match pods.list(&ListParams::default()).await {
        Ok(list) => {
            for pod in list.items {
                let name = pod.metadata.name.unwrap_or_default();
                let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
                let status = pod.status.unwrap_or_default();
                let _ = writeln!(
                    out,
                    "pod {name} node={node} phase={} ip={}",
                    status.phase.as_deref().unwrap_or("-"),
                    status.pod_ip.as_deref().unwrap_or("-")
                );
                for c in status.conditions.unwrap_or_default() {
                    let _ = writeln!(
                        out,
                        "  condition {}={} {}",
                        c.type_,
                        c.status,
                        c.message.unwrap_or_default()
                    );
                }
                for cs in status.container_statuses.unwrap_or_default() {
                    let _ = writeln!(
                        out,
                        "  container {} ready={} restarts={} state={}",
                        cs.name,
                        cs.ready,
                        cs.restart_count,
                        serde_json::to_string(&cs.state).unwrap_or_default()
                    );
                }
            }
        }
        Err(err) => {
            let _ = writeln!(out, "(cannot list pods: {err})");
        }
    }
    out
}

/// The last lines of every component log (`<state>/logs/*.log`).
pub fn component_log_tails(log_dir: &Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(log_dir) else {
        return format!("(no component logs in {})\n", log_dir.display());
    };
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
    {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
        let _ = writeln!(
            out,
            "--- tail of {} ---\n{}",
            path.display(),
            tail.join("\n")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_tails_keep_only_the_last_lines_of_each_log() {
        let dir = std::env::temp_dir().join(format!("stevedore-diag-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let long: String = (0..100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.join("etcd.log"), long).expect("write");
        std::fs::write(dir.join("ignored.txt"), "nope").expect("write");
        let out = component_log_tails(&dir);
        std::fs::remove_dir_all(&dir).ok();
        assert!(out.contains("line 99"));
        assert!(out.contains("line 70"));
        assert!(!out.contains("line 69\n"));
        assert!(!out.contains("nope"));
    }
}

//! The chart's Grafana dashboard (`deploy/helm/stevedore/files/grafana-dashboard.json`)
//! queries only series the binaries export: every `stevedore_*` name in a panel's query
//! is one the agent's or the control plane's registry encodes (its `# TYPE` line, with
//! the suffixes Prometheus gives the type). A unit test of this crate, which sees both
//! binaries' metric registries (the agent as a dependency, the control plane as a
//! dev-dependency): the names come from the code that exports them, not from a copy.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::cluster::repo_root;

/// The series names a registry's text exposition makes available to queries.
fn series_of(exposition: &str) -> BTreeSet<String> {
    let mut series = BTreeSet::new();
    for line in exposition.lines() {
        let Some(declared) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut words = declared.split_whitespace();
        let (Some(name), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        series.extend(suffixes.iter().map(|suffix| format!("{name}{suffix}")));
    }
    series
}

/// Both registries with one sample in every family: a family with no sample encodes
/// nothing, not even its TYPE line.
fn exported_series() -> BTreeSet<String> {
    let agent = stevedore_agent::metrics::Metrics::new();
    agent.observe_rpc("/p.S/M", tonic::Code::Ok, 0.01);
    agent.restart_finished("succeeded");
    agent.pull_finished("succeeded", 1);
    let controlplane = stevedore_controlplane::runtime::metrics::Metrics::new();
    controlplane.reconcile("CloneSet").finish(false);
    controlplane.workqueue_depth("CloneSet").set(1);
    controlplane.observe_queue_wait("CloneSet", std::time::Duration::from_millis(5));
    controlplane.observe_agent_rpc("SetPodCondition", tonic::Code::Ok, 0.01);
    controlplane.observe_undecodable("CloneSet", true, 1);
    controlplane.set_leader(true);
    let mut series = series_of(&agent.encode().expect("the agent's metrics encode"));
    series.extend(series_of(
        &controlplane
            .encode()
            .expect("the control plane's metrics encode"),
    ));
    series
}

/// Every `stevedore_*` identifier in a PromQL expression.
fn named_series(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("stevedore_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

fn dashboard() -> Value {
    let path = repo_root().join("deploy/helm/stevedore/files/grafana-dashboard.json");
    let text = std::fs::read_to_string(&path).expect("the dashboard file");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// (panel title, query) of every panel's targets.
fn queries(dashboard: &Value) -> Vec<(String, String)> {
    dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|panel| {
            let title = panel["title"].as_str().unwrap_or("").to_owned();
            panel["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(move |t| t["expr"].as_str().map(|e| (title.clone(), e.to_owned())))
        })
        .collect()
}

#[test]
fn every_query_names_a_series_the_binaries_export() {
    let exported = exported_series();
    assert!(
        exported.contains("stevedore_controlplane_reconciles_total")
            && exported.contains("stevedore_agent_image_bytes_pulled_total"),
        "the registries' expositions lost their TYPE lines: {exported:?}"
    );
    let queries = queries(&dashboard());
    assert!(!queries.is_empty(), "the dashboard has no queries");
    for (title, expr) in &queries {
        let names = named_series(expr);
        assert!(
            !names.is_empty(),
            "panel {title:?} queries no Stevedore metric: {expr}"
        );
        for name in names {
            assert!(
                exported.contains(&name),
                "panel {title:?} queries {name}, which neither binary exports"
            );
        }
    }
}

#[test]
fn the_dashboard_covers_kinds_queues_pulls_and_restarts() {
    let used: BTreeSet<String> = queries(&dashboard())
        .iter()
        .flat_map(|(_, expr)| named_series(expr))
        .collect();
    for wanted in [
        "stevedore_controlplane_reconciles_total",
        "stevedore_controlplane_reconcile_errors_total",
        "stevedore_controlplane_workqueue_depth",
        "stevedore_controlplane_workqueue_wait_seconds_bucket",
        "stevedore_agent_image_bytes_pulled_total",
        "stevedore_agent_images_pulled_total",
        "stevedore_agent_container_restarts_total",
    ] {
        assert!(used.contains(wanted), "no panel shows {wanted}");
    }
}

#[test]
fn series_names_in_expressions_and_expositions() {
    assert_eq!(
        named_series("sum by (kind) (rate(stevedore_a_total[5m])) / stevedore_b"),
        ["stevedore_a_total", "stevedore_b"]
    );
    let exposition = "# HELP x_c C.\n# TYPE x_c counter\n# TYPE x_h histogram\n# TYPE x_g gauge\n";
    let series = series_of(exposition);
    for name in ["x_c_total", "x_h_bucket", "x_h_sum", "x_h_count", "x_g"] {
        assert!(series.contains(name), "{name} in {series:?}");
    }
    assert!(!series.contains("x_c"), "a counter is queried with _total");
}

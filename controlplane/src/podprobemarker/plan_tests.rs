//! Which pods and probes reach a node's NodePodProbe.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::plan::{matched_pods, node_spec};
use crate::api::nodepodprobe::{MAX_PODS, MAX_PROBES_PER_POD};
use crate::api::podprobemarker::{PodProbeMarker, PortNumber};

fn marker(name: &str, probes: Value) -> PodProbeMarker {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": { "name": name, "namespace": "ns" },
        "spec": { "selector": { "matchLabels": { "app": "web" } }, "probes": probes },
    }))
    .expect("valid marker")
}

fn exec_probe(name: &str, container: &str) -> Value {
    json!({
        "name": name, "containerName": container, "podConditionType": name,
        "probe": { "exec": { "command": ["cat", "/tmp/healthy"] } },
    })
}

fn tcp_probe(name: &str, port: Value) -> Value {
    json!({
        "name": name, "containerName": "main", "podConditionType": name,
        "probe": { "tcpSocket": { "port": port } },
    })
}

/// A Running pod `name` on `n1` labelled app=web with container `main` (port `http` 8080).
fn pod(name: &str, change: impl FnOnce(&mut Value)) -> Pod {
    let mut pod = json!({
        "metadata": { "name": name, "namespace": "ns", "uid": format!("uid-{name}"), "labels": { "app": "web" } },
        "spec": { "nodeName": "n1", "containers": [
            { "name": "main", "ports": [{ "name": "http", "containerPort": 8080 }] },
        ] },
        "status": { "phase": "Running", "podIP": "10.0.0.7" },
    });
    change(&mut pod);
    serde_json::from_value(pod).expect("valid pod")
}

fn unchanged(_: &mut Value) {}

/// The (pod, probe names) the node's spec lists.
fn listed(spec: &crate::api::NodePodProbeSpec) -> Vec<(String, Vec<String>)> {
    spec.pod_probes
        .iter()
        .map(|p| {
            (
                p.name.clone(),
                p.probes.iter().map(|c| c.name.clone()).collect(),
            )
        })
        .collect()
}

#[test]
fn only_running_live_addressed_selected_pods_with_the_container_are_probed() {
    let probes = json!([exec_probe("Healthy", "main")]);
    let cases: [(&str, Pod, bool); 9] = [
        ("a running selected pod", pod("p", unchanged), true),
        (
            "pending",
            pod("p", |p| p["status"]["phase"] = json!("Pending")),
            false,
        ),
        (
            "succeeded",
            pod("p", |p| p["status"]["phase"] = json!("Succeeded")),
            false,
        ),
        (
            "being deleted",
            pod("p", |p| {
                p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }),
            false,
        ),
        (
            "no IP",
            pod("p", |p| p["status"]["podIP"] = Value::Null),
            false,
        ),
        (
            "another node",
            pod("p", |p| p["spec"]["nodeName"] = json!("n2")),
            false,
        ),
        (
            "not selected",
            pod("p", |p| p["metadata"]["labels"]["app"] = json!("db")),
            false,
        ),
        (
            "another namespace",
            pod("p", |p| p["metadata"]["namespace"] = json!("other")),
            false,
        ),
        (
            "without the container",
            pod("p", |p| {
                p["spec"]["containers"][0]["name"] = json!("sidecar");
            }),
            false,
        ),
    ];
    let marker = marker("m", probes);
    for (name, pod, probed) in cases {
        let spec = node_spec("n1", &[&marker], &[&pod]);
        assert_eq!(spec.pod_probes.len(), usize::from(probed), "{name}");
    }
}

#[test]
fn probes_are_named_by_marker_and_sorted_and_pods_sorted() {
    let first = marker(
        "b",
        json!([exec_probe("Zeta", "main"), exec_probe("Alpha", "main")]),
    );
    let second = marker("a", json!([exec_probe("Idle", "main")]));
    let pods = [pod("web-2", unchanged), pod("web-1", unchanged)];
    let spec = node_spec("n1", &[&first, &second], &[&pods[0], &pods[1]]);
    let names = vec![
        "a#Idle".to_owned(),
        "b#Alpha".to_owned(),
        "b#Zeta".to_owned(),
    ];
    assert_eq!(
        listed(&spec),
        vec![
            ("web-1".to_owned(), names.clone()),
            ("web-2".to_owned(), names)
        ]
    );
    let first_pod = &spec.pod_probes[0];
    assert_eq!(
        (first_pod.uid.as_str(), first_pod.ip.as_str()),
        ("uid-web-1", "10.0.0.7")
    );
    assert_eq!(first_pod.probes[1].pod_probe_marker_name, "b");
}

#[test]
fn named_ports_are_resolved_and_unknown_names_leave_the_probe_out() {
    let cases = [
        ("number kept", json!(9000), Some(9000)),
        ("name resolved", json!("http"), Some(8080)),
        ("unknown name", json!("grpc"), None),
        ("no port number", json!(70000), None),
    ];
    for (name, port, expected) in cases {
        let marker = marker("m", json!([tcp_probe("Tcp", port)]));
        let spec = node_spec("n1", &[&marker], &[&pod("p", unchanged)]);
        let got = spec.pod_probes.first().map(|p| {
            let tcp = p.probes[0].probe.tcp_socket.as_ref().expect("tcp");
            tcp.port
        });
        assert_eq!(got, expected.map(PortNumber), "{name}");
    }
}

#[test]
fn matched_pods_counts_active_bound_initialized_selected_pods_as_openkruise() {
    let marker = marker("m", json!([exec_probe("Healthy", "main")]));
    // An Initialized pod `name`, with `change` made to it.
    let initialized = |name: &str, change: fn(&mut Value)| {
        pod(name, |p| {
            p["status"]["conditions"] = json!([{ "type": "Initialized", "status": "True" }]);
            change(p);
        })
    };
    // (pod, counted)
    let cases: [(Pod, bool); 9] = [
        (initialized("running", unchanged), true),
        (
            initialized("elsewhere", |p| p["spec"]["nodeName"] = json!("n2")),
            true,
        ),
        (
            initialized("pending", |p| p["status"]["phase"] = json!("Pending")),
            true,
        ),
        (
            initialized("other-app", |p| {
                p["metadata"]["labels"]["app"] = json!("db");
            }),
            false,
        ),
        (
            initialized("other-namespace", |p| {
                p["metadata"]["namespace"] = json!("ns2");
            }),
            false,
        ),
        (
            initialized("finished", |p| p["status"]["phase"] = json!("Succeeded")),
            false,
        ),
        (
            initialized("unbound", |p| p["spec"]["nodeName"] = Value::Null),
            false,
        ),
        (pod("not-initialized", unchanged), false),
        (
            initialized("deleting", |p| {
                p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }),
            false,
        ),
    ];
    for (pod, counted) in &cases {
        assert_eq!(
            matched_pods(&marker, &[pod]),
            i64::from(*counted),
            "{:?}",
            pod.metadata.name
        );
    }
    let all: Vec<&Pod> = cases.iter().map(|(pod, _)| pod).collect();
    assert_eq!(matched_pods(&marker, &all), 3);
}

#[test]
fn a_spec_keeps_to_the_crd_bounds_of_pods_and_probes() {
    let probes: Vec<Value> = (0..MAX_PROBES_PER_POD + 3)
        .map(|i| exec_probe(&format!("P{i:03}"), "main"))
        .collect();
    // A marker holds at most 16 probes; several markers select the same pods.
    let markers: Vec<PodProbeMarker> = probes
        .chunks(16)
        .enumerate()
        .map(|(i, chunk)| marker(&format!("m{i}"), json!(chunk)))
        .collect();
    let pods: Vec<Pod> = (0..MAX_PODS + 2)
        .map(|i| pod(&format!("web-{i:04}"), unchanged))
        .collect();
    let spec = node_spec(
        "n1",
        &markers.iter().collect::<Vec<_>>(),
        &pods.iter().collect::<Vec<_>>(),
    );
    assert_eq!(spec.pod_probes.len(), MAX_PODS as usize);
    assert_eq!(
        spec.pod_probes[0].name, "web-0000",
        "the first in order are kept"
    );
    assert!(
        (spec.pod_probes.iter()).all(|p| p.probes.len() == MAX_PROBES_PER_POD as usize),
        "every pod keeps the most probes the CRD allows"
    );
}

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeStatus, PodStatus, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::workload::node_eval::{Amount, Unfit, evaluate_with_room};

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    (pairs.iter())
        .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
        .collect()
}

fn node(allocatable: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("n1".to_owned()),
            ..ObjectMeta::default()
        },
        status: Some(NodeStatus {
            allocatable: Some(quantities(allocatable)),
            ..NodeStatus::default()
        }),
        ..Node::default()
    }
}

fn container(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
    Container {
        name: "c".to_owned(),
        resources: Some(ResourceRequirements {
            requests: Some(quantities(requests)),
            limits: Some(quantities(limits)),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    }
}

fn spec(requests: &[(&str, &str)]) -> PodSpec {
    PodSpec {
        containers: vec![container(requests, &[])],
        ..PodSpec::default()
    }
}

fn bound(name: &str, node: &str, requests: &[(&str, &str)], phase: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            ..spec(requests)
        }),
        status: Some(PodStatus {
            phase: Some(phase.to_owned()),
            ..PodStatus::default()
        }),
    }
}

fn amounts(pairs: &[(&str, i128)]) -> Amounts {
    (pairs.iter()).map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

#[test]
fn pod_requests_sum_containers_take_the_init_peak_and_add_overhead() {
    let cases: Vec<(&str, PodSpec, Amounts)> = vec![
        ("no requests", spec(&[]), amounts(&[])),
        (
            "containers summed, a limit alone is the request",
            PodSpec {
                containers: vec![
                    container(&[("cpu", "250m"), ("memory", "1Ki")], &[]),
                    container(&[], &[("cpu", "1")]),
                ],
                ..PodSpec::default()
            },
            amounts(&[("cpu", 1250), ("memory", 1_024_000)]),
        ),
        (
            "an init container larger than the containers sets the peak",
            PodSpec {
                containers: vec![container(&[("cpu", "100m")], &[])],
                init_containers: Some(vec![container(&[("cpu", "2")], &[])]),
                ..PodSpec::default()
            },
            amounts(&[("cpu", 2000)]),
        ),
        (
            "a sidecar init container runs beside the containers",
            PodSpec {
                containers: vec![container(&[("cpu", "100m")], &[])],
                init_containers: Some(vec![Container {
                    restart_policy: Some("Always".to_owned()),
                    ..container(&[("cpu", "200m")], &[])
                }]),
                ..PodSpec::default()
            },
            amounts(&[("cpu", 300)]),
        ),
        (
            "overhead is added",
            PodSpec {
                overhead: Some(quantities(&[("cpu", "50m")])),
                ..spec(&[("cpu", "100m"), ("example.com/gpu", "1")])
            },
            amounts(&[("cpu", 150), ("example.com/gpu", 1000)]),
        ),
    ];
    for (case, spec, want) in cases {
        assert_eq!(pod_requests(&spec), want, "{case}");
    }
}

#[test]
fn usage_counts_bound_unfinished_pods_not_skipped_ones() {
    let pods = [
        bound("a", "n1", &[("cpu", "1")], "Running"),
        bound("b", "n1", &[("cpu", "500m")], "Pending"),
        bound("done", "n1", &[("cpu", "4")], "Succeeded"),
        bound("failed", "n1", &[("cpu", "4")], "Failed"),
        bound("own", "n1", &[("cpu", "4")], "Running"),
        bound("other", "n2", &[("memory", "1")], "Running"),
    ];
    let usage = usage_by_node(&pods, |p| p.metadata.name.as_deref() == Some("own"));
    assert_eq!(
        usage.get("n1"),
        Some(&NodeUsage {
            requests: amounts(&[("cpu", 1500)]),
            pods: 2,
        })
    );
    assert_eq!(usage.get("n2").map(|u| u.pods), Some(1));
}

#[test]
fn insufficient_names_the_first_resource_short() {
    let used = NodeUsage {
        requests: amounts(&[("cpu", 1500), ("memory", 3_000_000)]),
        pods: 2,
    };
    const ROOMY: &[(&str, &str)] = &[("cpu", "2"), ("memory", "4k"), ("pods", "110")];
    type Case = (
        &'static str,
        &'static [(&'static str, &'static str)],
        Amounts,
        Option<(&'static str, i128, i128)>,
    );
    let cases: Vec<Case> = vec![
        ("fits", ROOMY, amounts(&[("cpu", 500)]), None),
        (
            "cpu exactly used up still fits",
            ROOMY,
            amounts(&[("cpu", 500), ("memory", 1_000_000)]),
            None,
        ),
        (
            "cpu short",
            ROOMY,
            amounts(&[("cpu", 501)]),
            Some(("cpu", 501, 500)),
        ),
        (
            "memory short",
            ROOMY,
            amounts(&[("memory", 1_000_001)]),
            Some(("memory", 1_000_001, 1_000_000)),
        ),
        (
            "the pods count is full",
            &[("cpu", "2"), ("pods", "2")],
            amounts(&[]),
            Some(("pods", 1000, 0)),
        ),
        (
            "an extended resource the node lacks",
            ROOMY,
            amounts(&[("example.com/gpu", 1000)]),
            Some(("example.com/gpu", 1000, 0)),
        ),
        (
            "an extended resource the node has",
            &[("example.com/gpu", "1")],
            amounts(&[("example.com/gpu", 1000)]),
            None,
        ),
        (
            "a zero request needs nothing",
            &[],
            amounts(&[("example.com/gpu", 0)]),
            None,
        ),
    ];
    for (case, allocatable, requests, want) in cases {
        let got = insufficient(&requests, &node(allocatable), &used);
        let want = want.map(|(r, a, b)| (r.to_owned(), a, b));
        assert_eq!(got, want, "{case}");
    }
}

#[test]
fn a_node_reporting_no_allocatable_is_left_to_the_scheduler() {
    let mut node = node(&[]);
    node.status = None;
    let requests = amounts(&[("cpu", 1_000_000)]);
    assert_eq!(insufficient(&requests, &node, &NodeUsage::default()), None);
}

#[test]
fn a_node_without_room_is_wanted_but_gets_no_new_pod() {
    let spec = spec(&[("cpu", "1")]);
    let requests = pod_requests(&spec);
    let full = NodeUsage {
        requests: amounts(&[("cpu", 1500)]),
        pods: 1,
    };
    let fit = evaluate_with_room(&spec, &node(&[("cpu", "2")]), &requests, &full);
    assert!(fit.wanted);
    assert!(!fit.should_run);
    assert!(fit.should_continue_running);
    let unfit = fit.unfit.expect("a reason");
    assert_eq!(
        unfit,
        Unfit::Insufficient {
            resource: "cpu".to_owned(),
            requested: Amount(1000),
            free: Amount(500),
        }
    );
    assert_eq!(
        unfit.to_string(),
        "the node has only 500m cpu free beside the pods bound to it, and the pod template requests 1"
    );
    let freed = evaluate_with_room(
        &spec,
        &node(&[("cpu", "2")]),
        &requests,
        &NodeUsage::default(),
    );
    assert!(freed.wanted && freed.should_run && freed.unfit.is_none());
}

#[test]
fn a_node_the_pod_does_not_fit_otherwise_is_not_wanted_even_with_room() {
    let mut spec = spec(&[]);
    spec.node_selector = Some(BTreeMap::from([("disk".to_owned(), "ssd".to_owned())]));
    let fit = evaluate_with_room(
        &spec,
        &node(&[("cpu", "2")]),
        &Amounts::new(),
        &NodeUsage::default(),
    );
    assert!(!fit.wanted && !fit.should_run);
    assert_eq!(fit.unfit, Some(Unfit::NodeSelector));
}

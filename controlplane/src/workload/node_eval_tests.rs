use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, NodeSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            taints: Some(
                taints
                    .iter()
                    .map(|(key, value, effect)| Taint {
                        key: (*key).to_owned(),
                        value: Some((*value).to_owned()).filter(|v| !v.is_empty()),
                        effect: (*effect).to_owned(),
                        ..Taint::default()
                    })
                    .collect(),
            ),
            ..NodeSpec::default()
        }),
        ..Node::default()
    }
}

fn cordoned(mut node: Node) -> Node {
    node.spec
        .get_or_insert_with(NodeSpec::default)
        .unschedulable = Some(true);
    node
}

fn toleration(key: &str, operator: &str, value: &str, effect: &str) -> Toleration {
    let some = |s: &str| Some(s.to_owned()).filter(|s| !s.is_empty());
    Toleration {
        key: some(key),
        operator: some(operator),
        value: some(value),
        effect: some(effect),
        ..Toleration::default()
    }
}

fn tolerating(tolerations: Vec<Toleration>) -> PodSpec {
    PodSpec {
        tolerations: Some(tolerations),
        ..PodSpec::default()
    }
}

fn requirement(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_owned(),
        operator: operator.to_owned(),
        values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
    }
}

fn affinity(terms: Vec<NodeSelectorTerm>) -> PodSpec {
    PodSpec {
        affinity: Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: terms,
                }),
                ..NodeAffinity::default()
            }),
            ..Affinity::default()
        }),
        ..PodSpec::default()
    }
}

fn labels_term(requirements: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: Some(requirements),
        ..NodeSelectorTerm::default()
    }
}

fn fields_term(requirements: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_fields: Some(requirements),
        ..NodeSelectorTerm::default()
    }
}

fn taint_unfit(key: &str, effect: &str) -> Option<Unfit> {
    Some(Unfit::Taint {
        key: key.to_owned(),
        effect: effect.to_owned(),
    })
}

/// (case, spec, node, should_run, should_continue_running, unfit)
type TaintCase = (&'static str, PodSpec, Node, bool, bool, Option<Unfit>);

#[test]
fn taints_against_tolerations() {
    let plain = node("n1", &[], &[]);
    let no_schedule = node("n1", &[], &[("dedicated", "gpu", "NoSchedule")]);
    let no_execute = node("n1", &[], &[("dedicated", "gpu", "NoExecute")]);
    let prefer = node("n1", &[], &[("dedicated", "gpu", "PreferNoSchedule")]);
    let cases: Vec<TaintCase> = vec![
        ("no taints", PodSpec::default(), plain, true, true, None),
        (
            "NoSchedule untolerated: no new pod, a running one stays",
            PodSpec::default(),
            no_schedule.clone(),
            false,
            true,
            taint_unfit("dedicated", "NoSchedule"),
        ),
        (
            "NoExecute untolerated: neither",
            PodSpec::default(),
            no_execute.clone(),
            false,
            false,
            taint_unfit("dedicated", "NoExecute"),
        ),
        (
            "PreferNoSchedule is a preference",
            PodSpec::default(),
            prefer,
            true,
            true,
            None,
        ),
        (
            "Equal with the same value",
            tolerating(vec![toleration("dedicated", "Equal", "gpu", "NoSchedule")]),
            no_schedule.clone(),
            true,
            true,
            None,
        ),
        (
            "operator unset means Equal",
            tolerating(vec![toleration("dedicated", "", "gpu", "")]),
            no_execute.clone(),
            true,
            true,
            None,
        ),
        (
            "Equal with another value",
            tolerating(vec![toleration("dedicated", "Equal", "cpu", "NoSchedule")]),
            no_schedule.clone(),
            false,
            true,
            taint_unfit("dedicated", "NoSchedule"),
        ),
        (
            "Exists ignores the value",
            tolerating(vec![toleration("dedicated", "Exists", "", "NoExecute")]),
            no_execute.clone(),
            true,
            true,
            None,
        ),
        (
            "another effect does not tolerate",
            tolerating(vec![toleration("dedicated", "Exists", "", "NoSchedule")]),
            no_execute.clone(),
            false,
            false,
            taint_unfit("dedicated", "NoExecute"),
        ),
        (
            "empty key with Exists tolerates everything",
            tolerating(vec![toleration("", "Exists", "", "")]),
            no_execute,
            true,
            true,
            None,
        ),
        (
            "another key does not tolerate",
            tolerating(vec![toleration("zone", "Exists", "", "")]),
            no_schedule,
            false,
            true,
            taint_unfit("dedicated", "NoSchedule"),
        ),
    ];
    for (case, spec, node, run, stay, unfit) in cases {
        let fit = evaluate(&spec, &node);
        assert_eq!(fit.should_run, run, "{case}: should_run");
        assert_eq!(fit.should_continue_running, stay, "{case}: continue");
        assert_eq!(fit.unfit, unfit, "{case}: reason");
    }
}

#[test]
fn an_unschedulable_node_reads_as_a_no_schedule_taint() {
    let node = cordoned(node("n1", &[], &[]));
    let fit = evaluate(&PodSpec::default(), &node);
    assert!(!fit.should_run);
    assert!(fit.should_continue_running);
    assert_eq!(
        fit.unfit,
        taint_unfit(UNSCHEDULABLE_TAINT_KEY, "NoSchedule")
    );
    let daemon = tolerating(vec![toleration(
        UNSCHEDULABLE_TAINT_KEY,
        "Exists",
        "",
        "NoSchedule",
    )]);
    assert!(evaluate(&daemon, &node).should_run);
}

#[test]
fn node_name_and_node_selector() {
    let node = node("n1", &[("disk", "ssd")], &[]);
    let with_name = |name: &str| PodSpec {
        node_name: Some(name.to_owned()),
        ..PodSpec::default()
    };
    let with_selector = |pairs: &[(&str, &str)]| PodSpec {
        node_selector: Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..PodSpec::default()
    };
    let cases: Vec<(&str, PodSpec, Option<Unfit>)> = vec![
        ("same nodeName", with_name("n1"), None),
        (
            "other nodeName",
            with_name("n2"),
            Some(Unfit::OtherNodeName {
                wanted: "n2".to_owned(),
            }),
        ),
        ("selector met", with_selector(&[("disk", "ssd")]), None),
        (
            "selector value differs",
            with_selector(&[("disk", "hdd")]),
            Some(Unfit::NodeSelector),
        ),
        (
            "selector key missing",
            with_selector(&[("disk", "ssd"), ("gpu", "yes")]),
            Some(Unfit::NodeSelector),
        ),
    ];
    for (case, spec, unfit) in cases {
        let fit = evaluate(&spec, &node);
        assert_eq!(fit.unfit, unfit, "{case}");
        assert_eq!(fit.should_run, unfit.is_none(), "{case}");
        assert_eq!(fit.should_continue_running, unfit.is_none(), "{case}");
    }
}

#[test]
fn required_node_affinity_terms_are_ored_and_requirements_anded() {
    let node = node("n1", &[("zone", "a"), ("cores", "8")], &[]);
    let cases: Vec<(&str, Vec<NodeSelectorTerm>, bool)> = vec![
        (
            "In matches",
            vec![labels_term(vec![requirement("zone", "In", &["a", "b"])])],
            true,
        ),
        (
            "In misses",
            vec![labels_term(vec![requirement("zone", "In", &["b"])])],
            false,
        ),
        (
            "NotIn on a missing key matches",
            vec![labels_term(vec![requirement("rack", "NotIn", &["r1"])])],
            true,
        ),
        (
            "Exists and DoesNotExist",
            vec![labels_term(vec![
                requirement("zone", "Exists", &[]),
                requirement("gpu", "DoesNotExist", &[]),
            ])],
            true,
        ),
        (
            "Gt and Lt compare integers",
            vec![labels_term(vec![
                requirement("cores", "Gt", &["4"]),
                requirement("cores", "Lt", &["16"]),
            ])],
            true,
        ),
        (
            "Gt on a non-integer value misses",
            vec![labels_term(vec![requirement("zone", "Gt", &["1"])])],
            false,
        ),
        (
            "one requirement of a term misses: the term misses",
            vec![labels_term(vec![
                requirement("zone", "In", &["a"]),
                requirement("cores", "In", &["4"]),
            ])],
            false,
        ),
        (
            "terms are ORed",
            vec![
                labels_term(vec![requirement("zone", "In", &["b"])]),
                labels_term(vec![requirement("zone", "In", &["a"])]),
            ],
            true,
        ),
        (
            "an empty term matches nothing",
            vec![NodeSelectorTerm::default()],
            false,
        ),
        ("no terms match nothing", vec![], false),
        (
            "matchFields metadata.name pins the node",
            vec![fields_term(vec![requirement(
                "metadata.name",
                "In",
                &["n1"],
            )])],
            true,
        ),
        (
            "matchFields naming another node",
            vec![fields_term(vec![requirement(
                "metadata.name",
                "In",
                &["n2"],
            )])],
            false,
        ),
        (
            "matchFields on another field",
            vec![fields_term(vec![requirement(
                "metadata.uid",
                "In",
                &["n1"],
            )])],
            false,
        ),
    ];
    for (case, terms, fits) in cases {
        let fit = evaluate(&affinity(terms), &node);
        assert_eq!(fit.should_run, fits, "{case}");
        let expected = (!fits).then_some(Unfit::NodeAffinity);
        assert_eq!(fit.unfit, expected, "{case}");
    }
}

#[test]
fn placement_is_reported_before_taints() {
    let node = node("n1", &[], &[("dedicated", "gpu", "NoExecute")]);
    let mut spec = affinity(vec![fields_term(vec![requirement(
        "metadata.name",
        "In",
        &["n2"],
    )])]);
    spec.tolerations = None;
    let fit = evaluate(&spec, &node);
    assert_eq!(fit.unfit, Some(Unfit::NodeAffinity));
    assert!(!fit.should_continue_running);
}

/// (case, host network, node taints, should_run, should_continue_running)
type DaemonCase = (
    &'static str,
    bool,
    Vec<(&'static str, &'static str)>,
    bool,
    bool,
);

#[test]
fn daemon_pods_tolerate_what_upstream_adds_and_nothing_else() {
    let cases: Vec<DaemonCase> = vec![
        (
            "not ready",
            false,
            vec![("node.kubernetes.io/not-ready", "NoExecute")],
            true,
            true,
        ),
        (
            "unreachable",
            false,
            vec![("node.kubernetes.io/unreachable", "NoExecute")],
            true,
            true,
        ),
        (
            "disk pressure",
            false,
            vec![("node.kubernetes.io/disk-pressure", "NoSchedule")],
            true,
            true,
        ),
        (
            "memory pressure",
            false,
            vec![("node.kubernetes.io/memory-pressure", "NoSchedule")],
            true,
            true,
        ),
        (
            "PID pressure",
            false,
            vec![("node.kubernetes.io/pid-pressure", "NoSchedule")],
            true,
            true,
        ),
        (
            "cordoned",
            false,
            vec![(UNSCHEDULABLE_TAINT_KEY, "NoSchedule")],
            true,
            true,
        ),
        (
            "network unavailable, pod network",
            false,
            vec![(NETWORK_UNAVAILABLE_TAINT_KEY, "NoSchedule")],
            false,
            true,
        ),
        (
            "network unavailable, host network",
            true,
            vec![(NETWORK_UNAVAILABLE_TAINT_KEY, "NoSchedule")],
            true,
            true,
        ),
        (
            "disk pressure as NoExecute is not tolerated",
            false,
            vec![("node.kubernetes.io/disk-pressure", "NoExecute")],
            false,
            false,
        ),
        (
            "a user's NoExecute taint evicts",
            false,
            vec![("dedicated", "NoExecute")],
            false,
            false,
        ),
        (
            "a user's NoSchedule taint keeps new pods off",
            false,
            vec![("dedicated", "NoSchedule")],
            false,
            true,
        ),
    ];
    for (case, host_network, taints, run, stay) in cases {
        let spec = with_daemon_tolerations(&PodSpec {
            host_network: Some(host_network),
            ..PodSpec::default()
        });
        let taints: Vec<(&str, &str, &str)> = taints.iter().map(|(k, e)| (*k, "", *e)).collect();
        let fit = evaluate(&spec, &node("n1", &[], &taints));
        assert_eq!(fit.should_run, run, "{case}: should_run");
        assert_eq!(fit.should_continue_running, stay, "{case}: continue");
    }
}

#[test]
fn daemon_tolerations_are_added_once_and_keep_the_templates() {
    let own = toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute");
    let spec = tolerating(vec![own.clone(), toleration("dedicated", "Exists", "", "")]);
    let once = with_daemon_tolerations(&spec);
    let twice = with_daemon_tolerations(&once);
    assert_eq!(once, twice, "adding them again changes nothing");
    let tolerations = once.tolerations.unwrap_or_default();
    assert_eq!(tolerations.len(), 2 + DAEMON_TOLERATIONS.len() - 1);
    assert_eq!(
        tolerations[0], own,
        "the template's own toleration is kept first"
    );
}

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use k8s_openapi::jiff::Timestamp;
use std::borrow::Cow;

use super::*;
use crate::api::common::{UpdatePriorityOrderTerm, UpdatePriorityWeightTerm};
use crate::workload::lifecycle::LifecycleState;

/// Labels written as `"k=v,k2=v2"`; parts without `=` are ignored, as in OpenKruise's tests.
fn labels(spec: &str) -> BTreeMap<String, String> {
    spec.split(',')
        .filter_map(|part| part.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn pods(specs: &[&str]) -> Vec<PodView<'static>> {
    specs
        .iter()
        .enumerate()
        .map(|(i, spec)| PodView {
            name: format!("pod-{i}"),
            labels: Cow::Owned(labels(spec)),
            ..PodView::default()
        })
        .collect()
}

fn term(key: &str, value: &str) -> UpdateScatterTerm {
    UpdateScatterTerm {
        key: key.to_owned(),
        value: value.to_owned(),
    }
}

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

/// A scheduled, running, ready pod created at `created`, ready since `created + 10`.
fn running(name: &str, created: i64) -> PodView<'static> {
    PodView {
        name: name.to_owned(),
        node_name: "node-1".to_owned(),
        phase: "Running".to_owned(),
        ready: true,
        ready_since: Some(at(created + 10)),
        created: Some(at(created)),
        ..PodView::default()
    }
}

#[rustfmt::skip]
#[test]
fn default_order_table() {
    let base = running("base", 100);
    let cases: Vec<(&str, PodView<'_>, PodView<'_>)> = vec![
        ("unscheduled before scheduled", PodView { node_name: String::new(), ..base.clone() }, base.clone()),
        ("empty node name is unscheduled", PodView { node_name: String::new(), ..base.clone() }, base.clone()),
        ("Pending before Running", PodView { phase: "Pending".into(), ..base.clone() }, base.clone()),
        ("Pending before Unknown", PodView { phase: "Pending".into(), ..base.clone() }, PodView { phase: "Unknown".into(), ..base.clone() }),
        ("Unknown before Running", PodView { phase: "Unknown".into(), ..base.clone() }, base.clone()),
        ("Failed ranks as Pending", PodView { phase: "Failed".into(), ..base.clone() }, PodView { phase: "Unknown".into(), ..base.clone() }),
        ("not ready before ready", PodView { ready: false, ..base.clone() }, base.clone()),
        ("ready for less time first", PodView { ready_since: Some(at(500)), ..base.clone() }, base.clone()),
        ("unknown ready time first", PodView { ready_since: None, ..base.clone() }, base.clone()),
        ("more restarts first", PodView { max_restarts: 3, ..base.clone() }, PodView { max_restarts: 1, ..base.clone() }),
        ("newer first", running("new", 200), running("old", 100)),
        ("unknown creation time first", PodView { created: None, ..base.clone() }, base.clone()),
        ("scheduling outranks phase", PodView { node_name: String::new(), phase: "Running".into(), ..base.clone() }, PodView { phase: "Pending".into(), ..base.clone() }),
        ("readiness outranks restarts", PodView { ready: false, ..base.clone() }, PodView { max_restarts: 9, ..base.clone() }),
        ("ready time not compared when not ready", PodView { ready: false, ready_since: Some(at(1)), max_restarts: 2, ..base.clone() }, PodView { ready: false, ready_since: Some(at(900)), ..base.clone() }),
    ];
    for (name, first, second) in &cases {
        assert_eq!(default_order(first, second), Ordering::Less, "{name}");
        assert_eq!(default_order(second, first), Ordering::Greater, "{name} (reversed)");
    }
    assert_eq!(default_order(&base, &base.clone()), Ordering::Equal);
}

fn weights(terms: &[(i32, &str)]) -> UpdatePriorityStrategy {
    UpdatePriorityStrategy {
        weight_priority: terms
            .iter()
            .map(|(weight, spec)| UpdatePriorityWeightTerm {
                weight: *weight,
                match_selector: LabelSelector {
                    match_labels: Some(labels(spec)),
                    ..LabelSelector::default()
                },
            })
            .collect(),
        ..UpdatePriorityStrategy::default()
    }
}

fn orders(keys: &[&str]) -> UpdatePriorityStrategy {
    UpdatePriorityStrategy {
        order_priority: keys
            .iter()
            .map(|k| UpdatePriorityOrderTerm {
                ordered_key: (*k).to_owned(),
            })
            .collect(),
        ..UpdatePriorityStrategy::default()
    }
}

/// OpenKruise's `TestCompare`, where "true" for equal pods is its default: None here.
#[rustfmt::skip]
#[test]
fn priority_compare_follows_openkruise() {
    let two = weights(&[(20, "key=foo"), (10, "key=bar")]);
    let cases: Vec<(UpdatePriorityStrategy, &str, &str, Option<bool>)> = vec![
        (two.clone(), "", "", None),
        (two.clone(), "key=foo", "key=foo", None),
        (two.clone(), "key=bar", "key=foo", Some(false)),
        (two.clone(), "", "key=bar", Some(false)),
        (two.clone(), "", "key=foo", Some(false)),
        (two.clone(), "key=foo", "key=bar", Some(true)),
        (weights(&[(20, "key1=foo"), (10, "key2=bar"), (15, "key3=baz")]), "key1=foo", "key2=bar,key3=baz", Some(false)),
        (weights(&[(20, "key1=foo"), (10, "key2=bar"), (5, "key3=baz")]), "key2=bar,key3=baz", "key1=foo", Some(false)),
        (orders(&["key1", "key2"]), "", "", None),
        (orders(&["key1", "key2"]), "key1=o-10", "key1=o-5", Some(true)),
        (orders(&["key1", "key2"]), "key1=o-10", "key1=o-10", None),
        (orders(&["key1", "key2"]), "key1=o-10", "key1=o-20", Some(false)),
        (orders(&["key1", "key2"]), "key2=o-20", "key1=o-10", Some(false)),
        (orders(&["key1", "key2"]), "key2=o-20", "key2=o-10", Some(true)),
        (orders(&["key1", "key2"]), "", "key1=o-1", Some(true)),
        (orders(&["key1"]), "key1=abc", "key1=x-0", None),
    ];
    for (strategy, a, b, want) in &cases {
        assert_eq!(prefers(strategy, &labels(a), &labels(b)), *want, "{a:?} vs {b:?} under {strategy:?}");
    }
}

#[test]
fn int_suffixes() {
    let cases: &[(&str, i64)] = &[
        ("o-10", 10),
        ("sts-7", 7),
        ("10", 10),
        ("a1b2", 2),
        ("abc", 0),
        ("", 0),
        ("x-007", 7),
        ("x-99999999999999999999", 0),
        ("é9", 9),
    ];
    for (value, want) in cases {
        assert_eq!(int_suffix(value), *want, "{value:?}");
    }
}

#[test]
fn selectors() {
    let expr = |key: &str, operator: &str, values: &[&str]| LabelSelectorRequirement {
        key: key.to_owned(),
        operator: operator.to_owned(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
    };
    let with = |exprs: Vec<LabelSelectorRequirement>| LabelSelector {
        match_expressions: Some(exprs),
        ..LabelSelector::default()
    };
    let pod = labels("zone=a,tier=web");
    let cases: Vec<(&str, LabelSelector, Option<bool>)> = vec![
        (
            "empty selector matches all",
            LabelSelector::default(),
            Some(true),
        ),
        (
            "matchLabels hit",
            LabelSelector {
                match_labels: Some(labels("zone=a")),
                ..LabelSelector::default()
            },
            Some(true),
        ),
        (
            "matchLabels miss",
            LabelSelector {
                match_labels: Some(labels("zone=b")),
                ..LabelSelector::default()
            },
            Some(false),
        ),
        (
            "In",
            with(vec![expr("zone", "In", &["a", "b"])]),
            Some(true),
        ),
        (
            "In without the key",
            with(vec![expr("rack", "In", &["a"])]),
            Some(false),
        ),
        (
            "NotIn",
            with(vec![expr("zone", "NotIn", &["a"])]),
            Some(false),
        ),
        (
            "NotIn without the key",
            with(vec![expr("rack", "NotIn", &["a"])]),
            Some(true),
        ),
        (
            "Exists",
            with(vec![expr("tier", "Exists", &[])]),
            Some(true),
        ),
        (
            "DoesNotExist",
            with(vec![expr("tier", "DoesNotExist", &[])]),
            Some(false),
        ),
        (
            "all requirements must hold",
            with(vec![
                expr("tier", "Exists", &[]),
                expr("zone", "In", &["b"]),
            ]),
            Some(false),
        ),
        (
            "In without values is invalid",
            with(vec![expr("zone", "In", &[])]),
            None,
        ),
        (
            "Exists with values is invalid",
            with(vec![expr("zone", "Exists", &["a"])]),
            None,
        ),
        (
            "unknown operator is invalid",
            with(vec![expr("zone", "Gt", &["1"])]),
            None,
        ),
    ];
    for (name, selector, want) in &cases {
        assert_eq!(selector_matches(selector, &pod), *want, "{name}");
    }
    // An invalid selector does not add its weight.
    let strategy = UpdatePriorityStrategy {
        weight_priority: vec![UpdatePriorityWeightTerm {
            weight: 50,
            match_selector: with(vec![expr("zone", "In", &[])]),
        }],
        ..UpdatePriorityStrategy::default()
    };
    assert_eq!(prefers(&strategy, &pod, &labels("")), None);
}

#[test]
fn priority_sort_orders_pods() {
    let set = pods(&["", "key=bar", "key=foo", "", "key=foo,extra=x"]);
    let strategy = weights(&[(20, "key=foo"), (10, "key=bar")]);
    // Ties go to the higher index: 4 before 2, 3 before 0.
    assert_eq!(
        priority_sort(&set, vec![0, 1, 2, 3, 4], &strategy),
        [4, 2, 1, 3, 0]
    );
    let set = pods(&["key1=o-1", "key2=o-9", "key1=o-5", "", "key1=o-5"]);
    assert_eq!(
        priority_sort(&set, vec![0, 1, 2, 3, 4], &orders(&["key1", "key2"])),
        [3, 4, 2, 0, 1]
    );
    // No terms: the incoming order stays.
    assert_eq!(
        priority_sort(&set, vec![2, 0, 1], &UpdatePriorityStrategy::default()),
        [2, 0, 1]
    );
}

/// OpenKruise's `TestScatterPodsByRule`: one term, labelA=AAA, every pod waiting.
#[rustfmt::skip]
#[test]
fn scatter_by_one_term_follows_openkruise() {
    let a = "labelA=AAA";
    let cases: Vec<(&str, Vec<&str>, Vec<usize>)> = vec![
        ("no label", vec![""], vec![0]),
        ("only one scattered pod", vec![a], vec![0]),
        ("odd scattered + odd ordinary", vec![a, "bbb"], vec![0, 1]),
        ("even scattered + even ordinary", vec!["", "", "", "", a, a], vec![4, 0, 1, 2, 3, 5]),
        ("odd scattered + odd ordinary, 3 each", vec!["", "", "", a, a, a], vec![3, 0, 1, 4, 2, 5]),
        ("even scattered + odd ordinary", vec!["", "", "", a, "", "", a], vec![3, 0, 1, 2, 4, 5, 6]),
        ("odd scattered + even ordinary", vec!["", "", "", "", "", "", a, a, a], vec![6, 0, 1, 2, 7, 3, 4, 5, 8]),
        // These two are the outputs of upstream's scatter_sort.go (the version we could read,
        // run under Go); a newer upstream test expects [2, 0, 3, 1, 4, 5] and
        // [2, 0, 4, 1, 5, 3, 6, 7, 8], from code we could not find.
        ("more scattered than ordinary, even", vec!["", "", a, a, a, a], vec![2, 3, 0, 4, 1, 5]),
        ("more scattered than ordinary, odd/even", vec!["", "", a, "", a, a, a, a, a], vec![2, 4, 0, 5, 6, 1, 7, 3, 8]),
        ("more scattered than ordinary, interleaved", vec!["", a, "", a, "", "", a, a, a], vec![1, 0, 3, 2, 6, 4, 7, 5, 8]),
        ("labels without a value are ignored", vec!["", "", "", "", "ee", "a", "", a, a, "labelA=AAA,labelB=BBB"], vec![7, 0, 1, 2, 3, 8, 4, 5, 6, 9]),
    ];
    for (name, specs, want) in &cases {
        let set = pods(specs);
        let got = scatter_by_term(&set, (0..set.len()).collect(), &term("labelA", "AAA"));
        assert_eq!(&got, want, "{name}");
    }
}

/// Name, pod labels, scatter terms, expected order.
type SortCase<'a> = (&'a str, Vec<&'a str>, Vec<UpdateScatterTerm>, Vec<usize>);
/// Matched and unmatched pods in the whole set, then among those waiting.
type GroupInput = (usize, usize, usize, usize);

/// OpenKruise's `TestSort` for the scatter strategy: all pods exist, the first
/// `expected.len()` are waiting.
#[rustfmt::skip]
#[test]
fn scatter_sort_follows_openkruise() {
    let (a, b, c) = ("labelA=AAA", "labelB=BBB", "labelC=CCC");
    let ab = "labelA=AAA,labelB=BBB";
    let (ta, tb, tc) = (term("labelA", "AAA"), term("labelB", "BBB"), term("labelC", "CCC"));
    let cases: Vec<SortCase<'_>> = vec![
        ("a scattered pod alone", vec![ab], vec![ta.clone()], vec![0]),
        ("all ordinary pods", vec![""; 6], vec![], vec![0, 1, 2, 3, 4, 5]),
        ("one term", vec!["", "", "", "", a, a], vec![ta.clone()], vec![4, 0, 1, 2, 3, 5]),
        ("one term, other labels", vec!["", "", "", "", "sdfb=eee", "dsf=same", b, a, a, ab], vec![tb.clone()], vec![6, 0, 1, 2, 3, 4, 5, 7, 8, 9]),
        ("two terms, one label each", vec![b, b, "", "", a, a], vec![ta.clone(), tb.clone()], vec![0, 4, 2, 3, 5, 1]),
        ("two terms, a pod with both", vec!["", "", "", b, ab, a], vec![ta.clone(), tb.clone()], vec![4, 0, 1, 2, 5, 3]),
        ("two terms, B then A", vec!["", "", "", "", "sdfb=eee", "dsf=same", b, a, a, b], vec![tb.clone(), ta.clone()], vec![7, 6, 0, 1, 2, 3, 4, 5, 9, 8]),
        ("two terms, A then B", vec!["", "", "", "", "sdfb=eee", "dsf=same", b, a, a, b], vec![ta.clone(), tb.clone()], vec![6, 7, 0, 1, 2, 3, 4, 5, 8, 9]),
        ("same pods carry both, even/even", vec!["", "", "", "", "sdfb=eee", "dsf=same", ab, "", "", ab], vec![ta.clone(), tb.clone()], vec![6, 0, 1, 2, 3, 4, 5, 7, 8, 9]),
        ("same pods carry both, even/odd", vec!["", "", "", "sdfb=eee", "dsf=same", ab, "", "", ab], vec![ta.clone(), tb.clone()], vec![5, 0, 1, 2, 3, 4, 6, 7, 8]),
        ("odd/odd, some not waiting", vec!["", "", "", a, "sdfb=eee", "dsf=same", ab, "", "", ""], vec![ta.clone(), tb.clone()], vec![3, 0, 1, 2, 4, 5, 7, 6]),
        ("odd/odd, last not waiting", vec!["", "", "", a, "", "", "sdfb=eee", "dsf=same", ab, "", "", ab], vec![ta.clone(), tb.clone()], vec![0, 1, 2, 4, 3, 5, 6, 7, 9, 10, 8]),
        ("more scattered than ordinary, even/even", vec!["", "", "", a, "sdfb=eee,labelA=AAA", "dsf=same", ab, "", "", ab], vec![ta.clone(), tb.clone()], vec![6, 3, 0, 1, 4, 2, 5, 7, 8, 9]),
        ("more scattered than ordinary, even/odd", vec!["", a, a, "sdfb=eee", "dsf=same", ab, "", "", ab], vec![ta.clone(), tb.clone()], vec![5, 1, 0, 3, 2, 4, 6, 7, 8]),
        ("more scattered than ordinary, odd/odd", vec![a, "", "", a, "sdfb=eee,labelA=AAA", "dsf=same", ab, "", "", ab], vec![ta.clone(), tb.clone()], vec![1, 0, 2, 3, 5, 4, 7, 6]),
        ("more scattered than ordinary, odd/odd, 12 pods", vec!["", "", a, a, "", a, "sdfb=eee", "dsf=same", ab, "", "", ab], vec![ta.clone(), tb.clone()], vec![0, 2, 1, 4, 3, 6, 7, 5, 9, 10, 8]),
        ("three terms, one label each", vec!["", a, a, b, b, c, c, c, c, c], vec![ta.clone(), tb.clone(), tc.clone()], vec![3, 1, 5, 0, 6, 7, 8, 9, 2, 4]),
        ("three terms, pods with two", vec!["", a, "labelA=AAA,labelC=CCC", "labelB=BBB,labelC=CCC", b, "", "", c, c, c], vec![ta.clone(), tb.clone(), tc.clone()], vec![3, 2, 0, 7, 8, 5, 6, 9, 1, 4]),
        ("continuous sort 1", vec!["", "", "", "", a, a, a], vec![ta.clone()], vec![0, 1, 4, 2, 3, 5]),
        ("continuous sort 2", vec![a, a, "", "", "", "", "", "", "", a], vec![ta.clone()], vec![2, 0, 3, 4, 5, 6, 1]),
    ];
    for (name, specs, terms, want) in &cases {
        let set = pods(specs);
        let got = scatter_sort(&set, (0..want.len()).collect(), terms);
        assert_eq!(&got, want, "{name}");
    }
}

/// OpenKruise's `TestGenerateRules`, plus terms no waiting pod matches.
#[test]
fn scatter_terms_by_frequency() {
    let set = pods(&["", "", "", "", "labelA=AAA", "labelA=AAA"]);
    let one = [term("labelA", "AAA")];
    assert_eq!(scatter_terms(&set, &[0, 1, 2, 3, 4, 5], &one), one);
    let set = pods(&["", "", "labelB=B", "labelB=BBB", "labelA=AAA", "labelA=AAA"]);
    let two = [term("labelA", "AAA"), term("labelB", "BBB")];
    assert_eq!(scatter_terms(&set, &[0, 1, 2, 3, 4, 5], &two), two);
    let set = pods(&["labelB=BBB", "labelB=BBB", "labelA=AAA", "labelC=none"]);
    let three = [
        term("labelA", "AAA"),
        term("labelB", "BBB"),
        term("labelC", "CCC"),
    ];
    assert_eq!(
        scatter_terms(&set, &[0, 1, 2, 3], &three),
        [term("labelB", "BBB"), term("labelA", "AAA")]
    );
}

#[test]
fn group_sizes() {
    let cases: &[(GroupInput, ScatterGroup)] = &[
        (
            (1, 4, 1, 4),
            ScatterGroup {
                count: 1,
                matched_size: 1,
                unmatched_size: 4,
                unmatched_remainder: 0,
            },
        ),
        (
            (2, 3, 2, 3),
            ScatterGroup {
                count: 2,
                matched_size: 1,
                unmatched_size: 2,
                unmatched_remainder: 0,
            },
        ),
        // Waiting pods denser in matched pods than the set: use the set's group sizes.
        (
            (4, 4, 1, 4),
            ScatterGroup {
                count: 1,
                matched_size: 1,
                unmatched_size: 1,
                unmatched_remainder: 3,
            },
        ),
    ];
    for ((tm, tu, um, uu), want) in cases {
        assert_eq!(
            group_by_density(*tm, *tu, *um, *uu),
            *want,
            "{tm} {tu} {um} {uu}"
        );
    }
}

#[test]
fn update_order_pipeline() {
    let mut set: Vec<PodView<'static>> = (0..6)
        .map(|i| running(&format!("pod-{i}"), 100 + i))
        .collect();
    set[1].ready = false;
    set[4].lifecycle = Some(LifecycleState::PreparingUpdate);
    set[5].labels = Cow::Owned(labels("key=foo"));
    // Default order: not ready first, then newer first; PreparingUpdate moves to the front.
    assert_eq!(
        update_order(&set, &[0, 1, 2, 3, 4, 5], None, &[]),
        [4, 1, 5, 3, 2, 0]
    );
    // Only waiting pods are ordered; unknown indexes are dropped.
    assert_eq!(update_order(&set, &[0, 2, 9], None, &[]), [2, 0]);
    // Priority overrides the default order (ties by higher index); PreparingUpdate still first.
    let strategy = weights(&[(10, "key=foo")]);
    assert_eq!(
        update_order(&set, &[0, 1, 2, 3, 4, 5], Some(&strategy), &[]),
        [4, 5, 3, 2, 1, 0]
    );
    // Scatter: pods 3 and 2 are next to each other in the default order; with zone=a
    // scattered one goes first and the other last.
    for i in [2, 3] {
        set[i].labels = Cow::Owned(labels("zone=a"));
    }
    set[4].lifecycle = None;
    set[5].labels.to_mut().clear();
    assert_eq!(
        update_order(&set, &[0, 1, 2, 3, 4, 5], None, &[]),
        [1, 5, 4, 3, 2, 0]
    );
    let order = update_order(&set, &[0, 1, 2, 3, 4, 5], None, &[term("zone", "a")]);
    assert_eq!(order, [3, 1, 5, 4, 0, 2]);
}

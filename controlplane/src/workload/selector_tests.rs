//! `selector_selects_template`: every operator, valid and invalid requirements, empty
//! selectors, and messages that name the field. `selector_selects_created_pod`: a selector
//! naming a label the controller sets, told as that label against the requirement.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::{
    CreatedPodUnselected, SelectorMismatch, selector_selects_created_pod, selector_selects_template,
};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn requirement(key: &str, operator: &str, values: Option<&[&str]>) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.to_owned(),
        operator: operator.to_owned(),
        values: values.map(|v| v.iter().map(|s| (*s).to_owned()).collect()),
    }
}

fn selector(
    match_labels: Option<&[(&str, &str)]>,
    expressions: Option<Vec<LabelSelectorRequirement>>,
) -> LabelSelector {
    LabelSelector {
        match_labels: match_labels.map(labels),
        match_expressions: expressions,
    }
}

/// The words the refusal must contain, or `None` when the selector selects the template.
type Want = Option<&'static [&'static str]>;

#[test]
fn selects_the_template_or_says_which_field_does_not() {
    let template = labels(&[("app", "web"), ("tier", "front")]);
    let cases: Vec<(&str, LabelSelector, Want)> = vec![
        (
            "no fields",
            selector(None, None),
            Some(&["spec.selector is empty"]),
        ),
        (
            "empty lists and maps",
            selector(Some(&[]), Some(vec![])),
            Some(&["spec.selector is empty"]),
        ),
        (
            "matchLabels equal",
            selector(Some(&[("app", "web")]), None),
            None,
        ),
        (
            "matchLabels missing",
            selector(Some(&[("app", "web"), ("zone", "a")]), None),
            Some(&["spec.selector.matchLabels", "zone=a", "has no zone"]),
        ),
        (
            "matchLabels differ",
            selector(Some(&[("app", "db")]), None),
            Some(&["spec.selector.matchLabels", "app=db", "has app=web"]),
        ),
        (
            "In met",
            selector(
                None,
                Some(vec![requirement("tier", "In", Some(&["back", "front"]))]),
            ),
            None,
        ),
        (
            "In with another value",
            selector(None, Some(vec![requirement("tier", "In", Some(&["back"]))])),
            Some(&["spec.selector.matchExpressions[0]", "tier In", "tier=front"]),
        ),
        (
            "In on a missing key",
            selector(None, Some(vec![requirement("zone", "In", Some(&["a"]))])),
            Some(&["matchExpressions[0]", "zone is not set"]),
        ),
        (
            "NotIn met by another value",
            selector(
                None,
                Some(vec![requirement("tier", "NotIn", Some(&["back"]))]),
            ),
            None,
        ),
        (
            "NotIn met by a missing key",
            selector(None, Some(vec![requirement("zone", "NotIn", Some(&["a"]))])),
            None,
        ),
        (
            "NotIn of the template's value",
            selector(
                Some(&[("app", "web")]),
                Some(vec![requirement("tier", "NotIn", Some(&["front"]))]),
            ),
            Some(&["spec.selector.matchExpressions[0]", "tier NotIn [front]"]),
        ),
        (
            "Exists met",
            selector(None, Some(vec![requirement("app", "Exists", None)])),
            None,
        ),
        (
            "Exists unmet (second requirement)",
            selector(
                None,
                Some(vec![
                    requirement("app", "Exists", Some(&[])),
                    requirement("zone", "Exists", None),
                ]),
            ),
            Some(&["spec.selector.matchExpressions[1]", "zone Exists"]),
        ),
        (
            "DoesNotExist met",
            selector(
                None,
                Some(vec![requirement("canary", "DoesNotExist", None)]),
            ),
            None,
        ),
        (
            "DoesNotExist of a template label",
            selector(None, Some(vec![requirement("app", "DoesNotExist", None)])),
            Some(&["matchExpressions[0]", "app DoesNotExist", "app=web"]),
        ),
        (
            "In without values",
            selector(None, Some(vec![requirement("app", "In", None)])),
            Some(&["matchExpressions[0]", "is invalid", "at least one value"]),
        ),
        (
            "NotIn with empty values",
            selector(None, Some(vec![requirement("zone", "NotIn", Some(&[]))])),
            Some(&["matchExpressions[0]", "is invalid", "at least one value"]),
        ),
        (
            "Exists with values",
            selector(
                None,
                Some(vec![requirement("app", "Exists", Some(&["web"]))]),
            ),
            Some(&["matchExpressions[0]", "take no values"]),
        ),
        (
            "DoesNotExist with values",
            selector(
                None,
                Some(vec![requirement("canary", "DoesNotExist", Some(&["x"]))]),
            ),
            Some(&["matchExpressions[0]", "take no values"]),
        ),
        (
            "unknown operator",
            selector(
                None,
                Some(vec![requirement("app", "Equals", Some(&["web"]))]),
            ),
            Some(&[
                "matchExpressions[0]",
                "app Equals",
                "In, NotIn, Exists or DoesNotExist",
            ]),
        ),
        (
            "labels and every operator met",
            selector(
                Some(&[("app", "web")]),
                Some(vec![
                    requirement("tier", "In", Some(&["front"])),
                    requirement("tier", "NotIn", Some(&["back"])),
                    requirement("app", "Exists", None),
                    requirement("canary", "DoesNotExist", None),
                ]),
            ),
            None,
        ),
    ];
    for (name, selector, want) in cases {
        let got = selector_selects_template(&selector, &template);
        match (want, got) {
            (None, Ok(())) => {}
            (None, Err(err)) => panic!("{name}: refused: {err}"),
            (Some(_), Ok(())) => panic!("{name}: accepted"),
            (Some(words), Err(err)) => {
                let message = err.to_string();
                for word in words {
                    assert!(message.contains(word), "{name}: {message:?} lacks {word:?}");
                }
            }
        }
    }
}

#[test]
fn a_template_without_labels_is_selected_by_nothing_positive() {
    let none = BTreeMap::new();
    let exists = selector(None, Some(vec![requirement("app", "Exists", None)]));
    assert!(matches!(
        selector_selects_template(&exists, &none),
        Err(SelectorMismatch::RequirementUnmet { index: 0, .. })
    ));
    let absent = selector(None, Some(vec![requirement("app", "DoesNotExist", None)]));
    assert_eq!(selector_selects_template(&absent, &none), Ok(()));
}

/// The labels a pod-set controller puts on `web-x7k2p` / `web-1` after the template's
/// `app=web`.
fn created(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut all = labels(&[("app", "web")]);
    all.extend(labels(pairs));
    all
}

#[test]
fn a_created_pod_is_selected_or_the_label_the_controller_set_is_named() {
    let clone = created(&[
        ("apps.kruise.io/cloneset-instance-id", "x7k2p"),
        ("controller-revision-hash", "web-5d8f9c"),
        ("pod-template-hash", "5d8f9c"),
        ("lifecycle.apps.kruise.io/state", "PreparingNormal"),
    ]);
    let ordinal = created(&[
        ("statefulset.kubernetes.io/pod-name", "web-1"),
        ("apps.kubernetes.io/pod-index", "1"),
        ("controller-revision-hash", "web-5d8f9c"),
    ]);
    let app = ("app", "web");
    let cases: Vec<(&str, LabelSelector, &BTreeMap<String, String>, Want)> = vec![
        (
            "the selector names only template labels",
            selector(Some(&[app]), None),
            &clone,
            None,
        ),
        (
            "a pod name the pod has",
            selector(
                Some(&[app]),
                Some(vec![requirement(
                    "statefulset.kubernetes.io/pod-name",
                    "In",
                    Some(&["web-0", "web-1"]),
                )]),
            ),
            &ordinal,
            None,
        ),
        (
            "instance id",
            selector(
                Some(&[app, ("apps.kruise.io/cloneset-instance-id", "abcde")]),
                None,
            ),
            &clone,
            Some(&[
                "spec.selector.matchLabels requires apps.kruise.io/cloneset-instance-id=abcde",
                "the controller sets apps.kruise.io/cloneset-instance-id=x7k2p",
                "(pod web-x7k2p)",
                "no pods are created",
            ]),
        ),
        (
            "revision hash",
            selector(Some(&[app, ("controller-revision-hash", "abc")]), None),
            &clone,
            Some(&[
                "requires controller-revision-hash=abc",
                "sets controller-revision-hash=web-5d8f9c",
            ]),
        ),
        (
            "template hash in a list",
            selector(
                Some(&[app]),
                Some(vec![requirement(
                    "pod-template-hash",
                    "In",
                    Some(&["b", "a"]),
                )]),
            ),
            &clone,
            Some(&[
                "spec.selector.matchExpressions[0] requires pod-template-hash in (b,a)",
                "sets pod-template-hash=5d8f9c",
            ]),
        ),
        (
            "lifecycle state",
            selector(
                Some(&[app]),
                Some(vec![requirement(
                    "lifecycle.apps.kruise.io/state",
                    "NotIn",
                    Some(&["PreparingNormal"]),
                )]),
            ),
            &clone,
            Some(&[
                "requires lifecycle.apps.kruise.io/state notin (PreparingNormal)",
                "sets lifecycle.apps.kruise.io/state=PreparingNormal",
            ]),
        ),
        (
            "pod name must be unset",
            selector(
                Some(&[app]),
                Some(vec![
                    requirement("app", "Exists", None),
                    requirement("statefulset.kubernetes.io/pod-name", "DoesNotExist", None),
                ]),
            ),
            &ordinal,
            Some(&[
                "spec.selector.matchExpressions[1] requires statefulset.kubernetes.io/pod-name to be unset",
                "sets statefulset.kubernetes.io/pod-name=web-1",
            ]),
        ),
        (
            "a label no pod carries, by matchLabels",
            selector(Some(&[app, ("zone", "a")]), None),
            &clone,
            Some(&[
                "spec.selector.matchLabels requires zone=a",
                "have no zone (pod web-x7k2p)",
            ]),
        ),
        (
            "a label no pod carries, by Exists",
            selector(
                Some(&[app]),
                Some(vec![requirement("zone", "Exists", None)]),
            ),
            &clone,
            Some(&["requires zone to be set", "have no zone"]),
        ),
        (
            "empty selector",
            selector(None, None),
            &clone,
            Some(&["spec.selector is empty", "no pods are created"]),
        ),
    ];
    for (name, selector, pod_labels, want) in cases {
        let result = selector_selects_created_pod(&selector, "web-x7k2p", pod_labels);
        match (want, result) {
            (None, Ok(())) => {}
            (None, Err(err)) => panic!("{name}: refused: {err}"),
            (Some(_), Ok(())) => panic!("{name}: the pod was selected"),
            (Some(words), Err(err)) => {
                let message = err.to_string();
                for word in words {
                    assert!(message.contains(word), "{name}: {message:?} lacks {word:?}");
                }
            }
        }
    }
}

#[test]
fn a_created_pod_refusal_keeps_its_parts() {
    let s = selector(Some(&[("controller-revision-hash", "abc")]), None);
    let pod = labels(&[("controller-revision-hash", "web-5d8f9c")]);
    assert_eq!(
        selector_selects_created_pod(&s, "web-0", &pod),
        Err(CreatedPodUnselected::LabelSet {
            field: "spec.selector.matchLabels".into(),
            requirement: "controller-revision-hash=abc".into(),
            key: "controller-revision-hash".into(),
            value: "web-5d8f9c".into(),
            pod: "web-0".into(),
        })
    );
    let invalid = selector(None, Some(vec![requirement("x", "In", None)]));
    assert!(matches!(
        selector_selects_created_pod(&invalid, "web-0", &pod),
        Err(CreatedPodUnselected::Selector(
            SelectorMismatch::InvalidRequirement { .. }
        ))
    ));
}

//! `selector_selects_template`: every operator, valid and invalid requirements, empty
//! selectors, and messages that name the field.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::{SelectorMismatch, selector_selects_template};

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

//! Label selectors as Kubernetes evaluates and prints them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// `metav1.LabelSelectorAsSelector(...).Matches(labels)`: None when the selector is
/// invalid (OpenKruise then ignores the weight term). An empty selector matches all pods.
pub fn selector_matches(
    selector: &LabelSelector,
    labels: &BTreeMap<String, String>,
) -> Option<bool> {
    let mut matches = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    for requirement in selector.match_expressions.iter().flatten() {
        let values = requirement.values.as_deref().unwrap_or_default();
        let value = labels.get(&requirement.key);
        let met = match requirement.operator.as_str() {
            "In" if !values.is_empty() => value.is_some_and(|v| values.contains(v)),
            "NotIn" if !values.is_empty() => value.is_none_or(|v| !values.contains(v)),
            "Exists" if values.is_empty() => value.is_some(),
            "DoesNotExist" if values.is_empty() => value.is_none(),
            _ => return None,
        };
        matches &= met;
    }
    Some(matches)
}

/// Why a workload's selector does not select its own template's labels. Such a workload
/// must not create pods: it could not claim them, and would create more without end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorMismatch {
    #[error("spec.selector is empty, so it would select every pod in the namespace")]
    Empty,
    #[error(
        "spec.selector.matchLabels requires the label {key}={value}, but spec.template.metadata.labels has no {key}"
    )]
    LabelMissing { key: String, value: String },
    #[error(
        "spec.selector.matchLabels requires the label {key}={want}, but spec.template.metadata.labels has {key}={got}"
    )]
    LabelDiffers {
        key: String,
        want: String,
        got: String,
    },
    #[error("spec.selector.matchExpressions[{index}] ({key} {operator}) is invalid: {why}")]
    InvalidRequirement {
        index: usize,
        key: String,
        operator: String,
        why: &'static str,
    },
    #[error(
        "spec.selector.matchExpressions[{index}] ({key} {operator} [{values}]) does not select spec.template.metadata.labels, where {found}"
    )]
    RequirementUnmet {
        index: usize,
        key: String,
        operator: String,
        values: String,
        found: String,
    },
}

/// Whether `selector` is a valid, non-empty selector that selects a pod with `labels` (the
/// workload's template labels); the first reason it does not, naming the field.
pub fn selector_selects_template(
    selector: &LabelSelector,
    labels: &BTreeMap<String, String>,
) -> Result<(), SelectorMismatch> {
    let match_labels = selector.match_labels.as_ref().filter(|m| !m.is_empty());
    let expressions = selector.match_expressions.as_deref().unwrap_or_default();
    if match_labels.is_none() && expressions.is_empty() {
        return Err(SelectorMismatch::Empty);
    }
    for (key, want) in match_labels.into_iter().flatten() {
        match labels.get(key) {
            None => {
                return Err(SelectorMismatch::LabelMissing {
                    key: key.clone(),
                    value: want.clone(),
                });
            }
            Some(got) if got != want => {
                return Err(SelectorMismatch::LabelDiffers {
                    key: key.clone(),
                    want: want.clone(),
                    got: got.clone(),
                });
            }
            Some(_) => {}
        }
    }
    for (index, requirement) in expressions.iter().enumerate() {
        requirement_selects(index, requirement, labels)?;
    }
    Ok(())
}

fn requirement_selects(
    index: usize,
    requirement: &LabelSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Result<(), SelectorMismatch> {
    let values = requirement.values.as_deref().unwrap_or_default();
    let value = labels.get(&requirement.key);
    let invalid = |why| SelectorMismatch::InvalidRequirement {
        index,
        key: requirement.key.clone(),
        operator: requirement.operator.clone(),
        why,
    };
    let met = match requirement.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => {
            return Err(invalid("In and NotIn need at least one value"));
        }
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            return Err(invalid("Exists and DoesNotExist take no values"));
        }
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        _ => {
            return Err(invalid(
                "the operator must be In, NotIn, Exists or DoesNotExist",
            ));
        }
    };
    if met {
        return Ok(());
    }
    Err(SelectorMismatch::RequirementUnmet {
        index,
        key: requirement.key.clone(),
        operator: requirement.operator.clone(),
        values: values.join(","),
        found: match value {
            Some(v) => format!("{}={v}", requirement.key),
            None => format!("{} is not set", requirement.key),
        },
    })
}

/// The reason (of the Warning event, and of CloneSet's condition) when a selector does not
/// select the template's labels or the pods the controller creates.
pub const SELECTOR_MISMATCH: &str = "SelectorMismatch";

/// Why a workload's selector does not select a pod its controller is about to create,
/// though it may select the template: the pod carries a label the controller sets (an
/// instance id, a revision hash, a pod name, a lifecycle state), and the selector names
/// that label. Such a pod is never created: the controller could not claim it, and would
/// create another in its place without end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CreatedPodUnselected {
    #[error(
        "{field} requires {requirement}, but the controller sets {key}={value} on the pods it creates (pod {pod}), so it could never claim them; {key} is the controller's own label, and no pods are created while the selector names it"
    )]
    LabelSet {
        field: String,
        requirement: String,
        key: String,
        value: String,
        pod: String,
    },
    #[error(
        "{field} requires {requirement}, but the pods the controller creates have no {key} (pod {pod}), so it could never claim them; no pods are created while the selector names {key}"
    )]
    LabelUnset {
        field: String,
        requirement: String,
        key: String,
        pod: String,
    },
    #[error("{0}; no pods are created until the selector is fixed")]
    Selector(SelectorMismatch),
}

/// Whether `selector` selects the pod named `pod` with `labels`, as the controller is about
/// to create it (after every label it adds): the same rule as for the template, told as
/// the label the controller set against the selector's requirement.
pub fn selector_selects_created_pod(
    selector: &LabelSelector,
    pod: &str,
    labels: &BTreeMap<String, String>,
) -> Result<(), CreatedPodUnselected> {
    let mismatch = match selector_selects_template(selector, labels) {
        Ok(()) => return Ok(()),
        Err(mismatch) => mismatch,
    };
    let pod = pod.to_owned();
    let (field, requirement, key) = match mismatch {
        SelectorMismatch::LabelMissing { key, value } => {
            let requirement = format!("{key}={value}");
            ("spec.selector.matchLabels".to_owned(), requirement, key)
        }
        SelectorMismatch::LabelDiffers { key, want, got } => {
            return Err(CreatedPodUnselected::LabelSet {
                field: "spec.selector.matchLabels".to_owned(),
                requirement: format!("{key}={want}"),
                key,
                value: got,
                pod,
            });
        }
        SelectorMismatch::RequirementUnmet {
            index,
            key,
            operator,
            values,
            ..
        } => {
            let field = format!("spec.selector.matchExpressions[{index}]");
            (field, describe_requirement(&key, &operator, &values), key)
        }
        invalid @ (SelectorMismatch::Empty | SelectorMismatch::InvalidRequirement { .. }) => {
            return Err(CreatedPodUnselected::Selector(invalid));
        }
    };
    Err(match labels.get(&key) {
        Some(value) => CreatedPodUnselected::LabelSet {
            field,
            requirement,
            value: value.clone(),
            key,
            pod,
        },
        None => CreatedPodUnselected::LabelUnset {
            field,
            requirement,
            key,
            pod,
        },
    })
}

/// A requirement in words: `key in (a,b)`, `key notin (a)`, `key to be set`, `key to be
/// unset`.
fn describe_requirement(key: &str, operator: &str, values: &str) -> String {
    match operator {
        "In" => format!("{key} in ({values})"),
        "NotIn" => format!("{key} notin ({values})"),
        "Exists" => format!("{key} to be set"),
        "DoesNotExist" => format!("{key} to be unset"),
        other => format!("{key} {other} ({values})"),
    }
}

/// `metav1.FormatLabelSelector` for a valid selector: `k=v` and `k in (a,b)` terms joined
/// by commas, as in `status.labelSelector` (what `kubectl scale` and HPAs read).
pub fn format_selector(selector: &LabelSelector) -> String {
    // Kubernetes sorts the requirements by key.
    let mut terms: Vec<(String, String)> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), format!("{k}={v}")))
        .collect();
    for requirement in selector.match_expressions.iter().flatten() {
        let mut values = requirement.values.clone().unwrap_or_default();
        values.sort();
        let key = &requirement.key;
        terms.push((
            key.clone(),
            match requirement.operator.as_str() {
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" => key.clone(),
                "DoesNotExist" => format!("!{key}"),
                other => format!("{key} {other}"),
            },
        ));
    }
    terms.sort();
    terms
        .into_iter()
        .map(|(_, term)| term)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
#[path = "selector_tests.rs"]
mod selector_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn selector(match_labels: &[(&str, &str)], exprs: &[(&str, &str, &[&str])]) -> LabelSelector {
        LabelSelector {
            match_labels: Some(labels(match_labels)),
            match_expressions: Some(
                exprs
                    .iter()
                    .map(|(key, op, values)| LabelSelectorRequirement {
                        key: (*key).to_owned(),
                        operator: (*op).to_owned(),
                        values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
                    })
                    .collect(),
            ),
        }
    }

    #[test]
    fn matches_and_formats_like_kubernetes() {
        let s = selector(
            &[("app", "web")],
            &[("tier", "In", &["b", "a"]), ("canary", "DoesNotExist", &[])],
        );
        assert_eq!(format_selector(&s), "app=web,!canary,tier in (a,b)");
        assert_eq!(
            selector_matches(&s, &labels(&[("app", "web"), ("tier", "a")])),
            Some(true)
        );
        assert_eq!(
            selector_matches(&s, &labels(&[("app", "web"), ("tier", "c")])),
            Some(false)
        );
        assert_eq!(
            selector_matches(
                &s,
                &labels(&[("app", "web"), ("tier", "a"), ("canary", "x")])
            ),
            Some(false)
        );
        let invalid = selector(&[], &[("x", "In", &[])]);
        assert_eq!(selector_matches(&invalid, &labels(&[])), None);
    }
}

//! Label selectors as Kubernetes evaluates and prints them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

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
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

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

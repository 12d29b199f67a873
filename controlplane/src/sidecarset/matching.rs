//! Which SidecarSets a pod matches (pure): its namespace against `namespace` and
//! `namespaceSelector`, its labels against `selector`, as OpenKruise's
//! `PodMatchedSidecarSet` reads them, except that an empty selector selects every pod (the
//! CRD lets one in only beside a namespace filter; OpenKruise's matched none).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::api::SidecarSet;
use crate::workload::selector::selector_matches;

/// The namespace whose pods no SidecarSet is injected into or upgrades: the cluster's own
/// machinery runs there, the control plane too with the shipped manifests.
pub const SYSTEM_NAMESPACE: &str = "kube-system";

/// The `app.kubernetes.io/name` values of Stevedore's own pods (control plane and agent),
/// which are never injected wherever they run: the webhook must not depend on itself.
pub const OWN_POD_NAMES: [&str; 2] = ["stevedore-controlplane", "stevedore-agent"];

const NAME_LABEL: &str = "app.kubernetes.io/name";

/// A pod as matching reads it.
#[derive(Clone, Copy, Debug)]
pub struct PodScope<'a> {
    /// The pod's namespace (`default` when the review leaves it empty).
    pub namespace: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

impl<'a> PodScope<'a> {
    /// The pod's namespace and labels; a pod without a namespace is in `fallback` (the
    /// review's namespace).
    pub fn of(pod: &'a Pod, fallback: &'a str, empty: &'a BTreeMap<String, String>) -> Self {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or(fallback);
        Self {
            namespace: if namespace.is_empty() {
                "default"
            } else {
                namespace
            },
            labels: pod.metadata.labels.as_ref().unwrap_or(empty),
        }
    }

    /// Whether no SidecarSet ever touches the pod: kube-system's and Stevedore's own.
    pub fn is_exempt(&self) -> bool {
        self.namespace == SYSTEM_NAMESPACE
            || (self.labels.get(NAME_LABEL))
                .is_some_and(|name| OWN_POD_NAMES.contains(&name.as_str()))
    }
}

/// Whether `set` needs the labels of the pod's namespace to decide.
pub fn needs_namespace_labels(set: &SidecarSet) -> bool {
    set.spec.namespace.is_empty() && set.spec.namespace_selector.is_some()
}

/// Whether `set` matches the pod; `namespace_labels` are the labels of its namespace
/// (read only when [`needs_namespace_labels`]; `None` then matches nothing).
pub fn matches(
    set: &SidecarSet,
    pod: &PodScope<'_>,
    namespace_labels: Option<&BTreeMap<String, String>>,
) -> bool {
    if pod.is_exempt() {
        return false;
    }
    if !set.spec.namespace.is_empty() && set.spec.namespace != pod.namespace {
        return false;
    }
    if let Some(selector) =
        (set.spec.namespace_selector.as_ref()).filter(|_| set.spec.namespace.is_empty())
    {
        let selected = namespace_labels.and_then(|labels| selector_matches(selector, labels));
        if selected != Some(true) {
            return false;
        }
    }
    match &set.spec.selector {
        Some(selector) => selector_matches(selector, pod.labels) == Some(true),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        (pairs.iter())
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn selector(pairs: &[(&str, &str)]) -> LabelSelector {
        LabelSelector {
            match_labels: Some(labels(pairs)),
            ..LabelSelector::default()
        }
    }

    fn set(
        selector: Option<LabelSelector>,
        namespace: &str,
        ns_selector: Option<LabelSelector>,
    ) -> SidecarSet {
        let mut set = SidecarSet::new("log", Default::default());
        set.spec.selector = selector;
        set.spec.namespace = namespace.to_owned();
        set.spec.namespace_selector = ns_selector;
        set
    }

    #[test]
    fn a_pod_matches_by_namespace_namespace_labels_and_labels() {
        let web = labels(&[("app", "web")]);
        let shop = labels(&[("team", "shop")]);
        let other = labels(&[("team", "other")]);
        let by_app = Some(selector(&[("app", "web")]));
        let by_team = Some(selector(&[("team", "shop")]));
        let cases = [
            (
                "selector only",
                set(by_app.clone(), "", None),
                "shop",
                &web,
                Some(&shop),
                true,
            ),
            (
                "selector misses",
                set(Some(selector(&[("app", "db")])), "", None),
                "shop",
                &web,
                Some(&shop),
                false,
            ),
            (
                "namespace named",
                set(by_app.clone(), "shop", None),
                "shop",
                &web,
                None,
                true,
            ),
            (
                "other namespace",
                set(by_app.clone(), "shop", None),
                "cart",
                &web,
                None,
                false,
            ),
            (
                "empty selector, namespace",
                set(None, "shop", None),
                "shop",
                &web,
                None,
                true,
            ),
            (
                "namespace labels match",
                set(by_app.clone(), "", by_team.clone()),
                "shop",
                &web,
                Some(&shop),
                true,
            ),
            (
                "namespace labels miss",
                set(by_app.clone(), "", by_team.clone()),
                "cart",
                &web,
                Some(&other),
                false,
            ),
            (
                "namespace labels unknown",
                set(by_app.clone(), "", by_team),
                "shop",
                &web,
                None,
                false,
            ),
            (
                "kube-system never",
                set(by_app.clone(), "", None),
                "kube-system",
                &web,
                None,
                false,
            ),
        ];
        for (case, set, namespace, pod_labels, ns_labels, expected) in cases {
            let pod = PodScope {
                namespace,
                labels: pod_labels,
            };
            assert_eq!(matches(&set, &pod, ns_labels), expected, "{case}");
        }
    }

    #[test]
    fn stevedore_s_own_pods_are_never_matched() {
        let own = labels(&[(NAME_LABEL, "stevedore-controlplane")]);
        let set = set(None, "stevedore", None);
        let pod = PodScope {
            namespace: "stevedore",
            labels: &own,
        };
        assert!(pod.is_exempt());
        assert!(!matches(&set, &pod, None));
    }

    #[test]
    fn only_a_namespace_selector_without_a_namespace_reads_namespace_labels() {
        let by_team = Some(selector(&[("team", "shop")]));
        assert!(needs_namespace_labels(&set(None, "", by_team.clone())));
        assert!(!needs_namespace_labels(&set(None, "shop", by_team)));
        assert!(!needs_namespace_labels(&set(None, "shop", None)));
    }
}

//! Which workload a change of an object it may own concerns, for any owner kind
//! (kube-runtime's `trigger_owners`): the object's controller if it is of that kind, and
//! for an orphan, every workload in its namespace whose selector matches it (it may be
//! adopted).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::Resource;

use crate::controller::ObjectKey;
use crate::workload::ownership::controller_of;
use crate::workload::selector::selector_matches;

/// Whether `owner` names an object of kind `O` (same kind, same API group).
pub fn refers_to<O: Resource<DynamicType = ()>>(owner: &OwnerReference) -> bool {
    let group = owner
        .api_version
        .rsplit_once('/')
        .map_or("", |(group, _version)| group);
    owner.kind == O::kind(&()) && group == O::group(&())
}

/// The keys of the workloads of kind `O` a change of `meta` concerns. With
/// `orphan_lookup`, an orphan concerns every workload among `owners` in its namespace
/// whose selector (`selector_of`) matches its labels; without, only its controller.
pub fn owner_keys<O: Resource<DynamicType = ()>>(
    meta: &ObjectMeta,
    owners: &[Arc<O>],
    selector_of: impl Fn(&O) -> &LabelSelector,
    orphan_lookup: bool,
) -> Vec<ObjectKey> {
    let namespace = meta.namespace.clone().unwrap_or_default();
    if let Some(owner) = controller_of(meta) {
        return refers_to::<O>(owner)
            .then(|| ObjectKey::new(namespace, owner.name.clone()))
            .into_iter()
            .collect();
    }
    if !orphan_lookup {
        return Vec::new();
    }
    let empty = Default::default();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    owners
        .iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(&namespace))
        .filter(|o| selector_matches(selector_of(o), labels) == Some(true))
        .map(|o| ObjectKey::of(o.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::api::CloneSet;
    use crate::api::cloneset::CloneSetSpec;

    fn cloneset(namespace: &str, name: &str, app: &str) -> Arc<CloneSet> {
        let mut set = CloneSet::new(name, CloneSetSpec::default());
        set.metadata.namespace = Some(namespace.to_owned());
        set.spec.selector = LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_owned(), app.to_owned())])),
            match_expressions: None,
        };
        Arc::new(set)
    }

    fn object(app: &str, controller: Option<(&str, &str, &str)>) -> ObjectMeta {
        ObjectMeta {
            namespace: Some("ns".to_owned()),
            labels: Some(BTreeMap::from([("app".to_owned(), app.to_owned())])),
            owner_references: controller.map(|(api_version, kind, name)| {
                vec![OwnerReference {
                    api_version: api_version.to_owned(),
                    kind: kind.to_owned(),
                    name: name.to_owned(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_controlled_object_concerns_its_controller_of_the_kind_only() {
        let sets = [
            cloneset("ns", "web", "web"),
            cloneset("other", "web2", "web"),
        ];
        fn selector(set: &CloneSet) -> &LabelSelector {
            &set.spec.selector
        }
        let key = |name: &str| ObjectKey::new("ns", name);
        let table = [
            (
                object("web", Some(("apps.kruise.io/v1alpha1", "CloneSet", "a"))),
                true,
                vec![key("a")],
            ),
            (
                object("web", Some(("apps.kruise.io/v1beta1", "CloneSet", "a"))),
                false,
                vec![key("a")],
            ),
            (
                object("web", Some(("apps/v1", "CloneSet", "a"))),
                true,
                vec![],
            ),
            (
                object("web", Some(("apps.kruise.io/v1alpha1", "StatefulSet", "a"))),
                true,
                vec![],
            ),
            (object("web", None), true, vec![key("web")]),
            (object("web", None), false, vec![]),
            (object("db", None), true, vec![]),
        ];
        for (i, (meta, orphan_lookup, want)) in table.into_iter().enumerate() {
            assert_eq!(
                owner_keys(&meta, &sets, selector, orphan_lookup),
                want,
                "case {i}"
            );
        }
    }
}

//! Finding a cached object of any kind by its kind's name, namespace and name: what a
//! reconciler's expectations ask of the caches (`controller::expectations::Seen`), so that
//! no reconciler matches a kind's name to its store by hand. The stores register a finder
//! per kind as they start ([`super::stores::StoreRegistry::watch`]).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

/// The metadata of a cached object of any kind.
pub trait ObjectMetadata: Send + Sync {
    fn metadata(&self) -> &ObjectMeta;
}

impl<K: Resource + Send + Sync> ObjectMetadata for K {
    fn metadata(&self) -> &ObjectMeta {
        self.meta()
    }
}

/// Whether the objects of a scope are found by namespace and name, or by name alone.
pub trait KnownScope {
    const NAMESPACED: bool;
}

impl KnownScope for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl KnownScope for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// Finds an object of one kind in its store by namespace and name (the namespace is not
/// read for a cluster-scoped kind).
pub type Finder = Arc<dyn Fn(&str, &str) -> Option<Arc<dyn ObjectMetadata>> + Send + Sync>;

/// The finder of the objects in `store`.
pub fn finder<K>(store: Store<K>) -> Finder
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    K::Scope: KnownScope,
{
    Arc::new(move |namespace: &str, name: &str| {
        let reference = ObjectRef::new(name);
        let reference = if K::Scope::NAMESPACED {
            reference.within(namespace)
        } else {
            reference
        };
        let object: Arc<dyn ObjectMetadata> = store.get(&reference)?;
        Some(object)
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Node};
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;

    use super::*;

    fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            namespace: namespace.map(str::to_owned),
            uid: Some(format!("{name}-uid")),
            ..ObjectMeta::default()
        }
    }

    fn found(find: &Finder, namespace: &str, name: &str) -> Option<String> {
        find(namespace, name).and_then(|object| object.metadata().uid.clone())
    }

    #[test]
    fn a_namespaced_object_is_found_in_its_namespace_and_a_cluster_one_by_name_alone() {
        let mut maps = Writer::<ConfigMap>::default();
        maps.apply_watcher_event(&watcher::Event::Apply(ConfigMap {
            metadata: meta(Some("ns"), "settings"),
            ..ConfigMap::default()
        }));
        let mut nodes = Writer::<Node>::default();
        nodes.apply_watcher_event(&watcher::Event::Apply(Node {
            metadata: meta(None, "worker"),
            ..Node::default()
        }));
        let (maps, nodes) = (finder(maps.as_reader()), finder(nodes.as_reader()));
        let cases = [
            (&maps, "ns", "settings", Some("settings-uid")),
            (&maps, "other", "settings", None),
            (&maps, "ns", "missing", None),
            (&nodes, "any-namespace", "worker", Some("worker-uid")),
            (&nodes, "", "worker", Some("worker-uid")),
            (&nodes, "", "missing", None),
        ];
        for (find, namespace, name, want) in cases {
            let got = found(find, namespace, name);
            assert_eq!(got.as_deref(), want, "{namespace}/{name}");
        }
    }
}

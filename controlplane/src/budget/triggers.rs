//! Which budgets a change concerns: the budget itself; for a pod, a CloneSet or an
//! Advanced StatefulSet, every budget in its namespace (budgets are few per namespace,
//! and a pod that appears after its budget must be counted: kruise #1857).

use std::sync::Arc;

use kube::Resource;
use kube::runtime::reflector::Store;

use crate::api::PodUnavailableBudget;
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::Triggers;

/// The budgets in `namespace`.
fn in_namespace(budgets: &Store<PodUnavailableBudget>, namespace: Option<&str>) -> Vec<ObjectKey> {
    (budgets.state().iter())
        .filter(|budget| budget.metadata.namespace.as_deref() == namespace)
        .map(|budget| ObjectKey::of(budget.as_ref()))
        .collect()
}

/// Maps any object to the budgets in its namespace.
fn budgets_near<T: Resource>(
    budgets: &Store<PodUnavailableBudget>,
) -> impl FnMut(&Arc<T>) -> Vec<ObjectKey> + Send + 'static {
    let budgets = budgets.clone();
    move |object| in_namespace(&budgets, object.meta().namespace.as_deref())
}

/// What the PodUnavailableBudget controller listens to: its budgets, and pods, CloneSets
/// and Advanced StatefulSets, each waking every budget in its namespace.
pub fn watches(
    changes: &Changes,
    budgets: &Store<PodUnavailableBudget>,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    Triggers::of(budgets, queue)
        .watch_own(&changes.podunavailablebudgets)
        .watch(&changes.pods, budgets_near(budgets))
        .watch(&changes.clonesets, budgets_near(budgets))
        .watch(&changes.statefulsets, budgets_near(budgets))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;
    use serde_json::json;

    use super::*;

    fn budget(namespace: &str, name: &str) -> PodUnavailableBudget {
        serde_json::from_value(json!({
            "apiVersion": "policy.kruise.io/v1alpha1",
            "kind": "PodUnavailableBudget",
            "metadata": { "name": name, "namespace": namespace },
            "spec": { "maxUnavailable": 1 },
        }))
        .expect("a budget")
    }

    #[test]
    fn an_object_concerns_every_budget_in_its_namespace_only() {
        let mut writer = Writer::<PodUnavailableBudget>::default();
        for (namespace, name) in [("a", "one"), ("a", "two"), ("b", "three")] {
            writer.apply_watcher_event(&watcher::Event::Apply(budget(namespace, name)));
        }
        let mut near = budgets_near::<Pod>(&writer.as_reader());
        let pod = |namespace: Option<&str>| {
            let mut pod = Pod::default();
            pod.metadata.namespace = namespace.map(str::to_owned);
            Arc::new(pod)
        };
        let mut names: Vec<String> = near(&pod(Some("a"))).into_iter().map(|k| k.name).collect();
        names.sort();
        assert_eq!(names, ["one", "two"]);
        assert!(near(&pod(Some("c"))).is_empty());
        assert!(near(&pod(None)).is_empty());
    }
}

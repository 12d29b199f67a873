//! Which budgets a change concerns: the budget itself; for a pod, a CloneSet or an
//! Advanced StatefulSet, every budget in its namespace (budgets are few per namespace,
//! and a pod that appears after its budget must be counted: kruise #1857).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
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

/// What the PodUnavailableBudget controller listens to: its budgets, and pods, CloneSets
/// and Advanced StatefulSets, each waking every budget in its namespace.
pub fn watches(
    changes: &Changes,
    budgets: &Store<PodUnavailableBudget>,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    let near = |budgets: Store<PodUnavailableBudget>| {
        move |meta: &ObjectMeta| in_namespace(&budgets, meta.namespace.as_deref())
    };
    let (pods, clonesets, statefulsets) = (
        near(budgets.clone()),
        near(budgets.clone()),
        near(budgets.clone()),
    );
    Triggers::of(budgets, queue)
        .watch_own(&changes.podunavailablebudgets)
        .watch(&changes.pods, move |pod| pods(&pod.metadata))
        .watch(&changes.clonesets, move |set| clonesets(&set.metadata))
        .watch(&changes.statefulsets, move |set| {
            statefulsets(&set.metadata)
        })
}

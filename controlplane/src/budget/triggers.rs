//! Which budgets a change concerns: the budget itself; for a pod, a CloneSet or an
//! Advanced StatefulSet, every budget in its namespace (budgets are few per namespace,
//! and a pod that appears after its budget must be counted: kruise #1857).

use kube::runtime::reflector::Store;
use tokio_util::sync::CancellationToken;

use crate::api::PodUnavailableBudget;
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::received;

/// The budgets in `namespace`.
fn in_namespace(budgets: &Store<PodUnavailableBudget>, namespace: Option<&str>) -> Vec<ObjectKey> {
    (budgets.state().iter())
        .filter(|budget| budget.metadata.namespace.as_deref() == namespace)
        .map(|budget| ObjectKey::of(budget.as_ref()))
        .collect()
}

/// Feeds `queue` from the shared watches until `shutdown`.
pub async fn run(
    changes: Changes,
    budgets: Store<PodUnavailableBudget>,
    queue: WorkQueue<ObjectKey>,
    shutdown: CancellationToken,
) {
    let mut budget_rx = changes.podunavailablebudgets.subscribe();
    let mut pod_rx = changes.pods.subscribe();
    let mut cloneset_rx = changes.clonesets.subscribe();
    let mut statefulset_rx = changes.statefulsets.subscribe();
    let all = || {
        (budgets.state().iter())
            .map(|budget| ObjectKey::of(budget.as_ref()))
            .collect()
    };
    let near = |namespace: Option<&String>| in_namespace(&budgets, namespace.map(String::as_str));
    loop {
        let keys = tokio::select! {
            () = shutdown.cancelled() => return,
            r = budget_rx.recv() => received(r, |budget| vec![ObjectKey::of(budget.as_ref())]),
            r = pod_rx.recv() => received(r, |pod| near(pod.metadata.namespace.as_ref())),
            r = cloneset_rx.recv() => received(r, |set| near(set.metadata.namespace.as_ref())),
            r = statefulset_rx.recv() => received(r, |set| near(set.metadata.namespace.as_ref())),
        };
        if !keys.queue(&queue, "PodUnavailableBudget", all) {
            return;
        }
    }
}

//! Which ContainerRecreateRequests a change concerns: a request itself and, when it
//! changes (finishes, say), the unfinished requests of the same pod that wait for it
//! (openkruise/rollouts#207: a second request must not stay Pending); for a pod, the
//! unfinished requests naming it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::runtime::reflector::Store;

use crate::api::ContainerRecreateRequest;
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::Triggers;

fn unfinished(request: &ContainerRecreateRequest) -> bool {
    !request
        .status
        .as_ref()
        .is_some_and(|s| s.phase.is_finished())
}

/// The unfinished requests for pod `name` in `namespace`.
fn waiting_on(
    requests: &[Arc<ContainerRecreateRequest>],
    namespace: &str,
    name: &str,
) -> Vec<ObjectKey> {
    requests
        .iter()
        .filter(|r| r.namespace().as_deref() == Some(namespace) && r.spec.pod_name == name)
        .filter(|r| unfinished(r))
        .map(|r| ObjectKey::of(r.as_ref()))
        .collect()
}

/// A request's change: the request and the others of its pod.
pub fn keys_for_request(
    request: &ContainerRecreateRequest,
    requests: &[Arc<ContainerRecreateRequest>],
) -> Vec<ObjectKey> {
    let own = ObjectKey::of(request);
    let namespace = request.namespace().unwrap_or_default();
    let mut keys = vec![own.clone()];
    keys.extend(
        waiting_on(requests, &namespace, &request.spec.pod_name)
            .into_iter()
            .filter(|k| *k != own),
    );
    keys
}

/// A pod's change: the unfinished requests naming it.
pub fn keys_for_pod(pod: &Pod, requests: &[Arc<ContainerRecreateRequest>]) -> Vec<ObjectKey> {
    waiting_on(
        requests,
        &pod.namespace().unwrap_or_default(),
        &pod.name_any(),
    )
}

/// What the ContainerRecreateRequest controller listens to: its requests (each change
/// also wakes the others of the same pod) and the pods they name.
pub fn watches(
    changes: &Changes,
    requests: &Store<ContainerRecreateRequest>,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    let (of_request, of_pod) = (requests.clone(), requests.clone());
    Triggers::of(requests, queue)
        .watch(&changes.containerrecreaterequests, move |request| {
            keys_for_request(request, &of_request.state())
        })
        .watch(&changes.pods, move |pod| keys_for_pod(pod, &of_pod.state()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(
        namespace: &str,
        name: &str,
        pod: &str,
        phase: Option<&str>,
    ) -> Arc<ContainerRecreateRequest> {
        let mut value = json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "ContainerRecreateRequest",
            "metadata": { "name": name, "namespace": namespace },
            "spec": { "podName": pod, "containers": [{ "name": "app" }] },
        });
        if let Some(phase) = phase {
            value["status"] = json!({ "phase": phase });
        }
        Arc::new(serde_json::from_value(value).expect("a request"))
    }

    fn names(keys: &[ObjectKey]) -> Vec<String> {
        keys.iter()
            .map(|k| format!("{}/{}", k.namespace, k.name))
            .collect()
    }

    #[test]
    fn a_finished_request_wakes_the_ones_waiting_for_its_pod() {
        let first = request("ns", "first", "web", Some("Completed"));
        let all = vec![
            first.clone(),
            request("ns", "second", "web", Some("Pending")),
            request("ns", "third", "web", None),
            request("ns", "done", "web", Some("Failed")),
            request("ns", "other-pod", "db", None),
            request("other", "other-ns", "web", None),
        ];
        assert_eq!(
            names(&keys_for_request(&first, &all)),
            ["ns/first", "ns/second", "ns/third"]
        );
    }

    #[test]
    fn a_pod_change_queues_its_unfinished_requests() {
        let all = vec![
            request("ns", "a", "web", Some("Recreating")),
            request("ns", "b", "web", Some("Completed")),
            request("ns", "c", "db", None),
        ];
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": "web", "namespace": "ns" }
        }))
        .expect("a pod");
        assert_eq!(names(&keys_for_pod(&pod, &all)), ["ns/a"]);
    }
}

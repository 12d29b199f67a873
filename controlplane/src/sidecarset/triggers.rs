//! What wakes a SidecarSet: its own changes, and a change of a pod it was injected into
//! (named in the pod's `kruise.io/sidecarset-injected-list`), e.g. a restarted sidecar
//! becoming ready, which finishes its upgrade.

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;

use super::marks::INJECTED_LIST_ANNOTATION;
use crate::api::SidecarSet;
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::Triggers;

/// The SidecarSets a pod names as injected.
pub fn keys_for_pod(pod: &Pod) -> Vec<ObjectKey> {
    (pod.metadata.annotations.as_ref())
        .and_then(|a| a.get(INJECTED_LIST_ANNOTATION))
        .map(|list| {
            list.split(',')
                .filter(|n| !n.is_empty())
                .map(|n| ObjectKey::new("", n))
                .collect()
        })
        .unwrap_or_default()
}

/// What the SidecarSet controller listens to.
pub fn watches(
    changes: &Changes,
    sidecarsets: &Store<SidecarSet>,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    Triggers::of(sidecarsets, queue)
        .watch(&changes.sidecarsets, |set| {
            vec![ObjectKey::of(set.as_ref())]
        })
        .watch(&changes.pods, |pod| keys_for_pod(pod))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pod_wakes_the_sidecarsets_it_names() {
        let pod = |annotations: serde_json::Value| -> Pod {
            serde_json::from_value(
                json!({ "metadata": { "name": "p", "annotations": annotations } }),
            )
            .expect("a pod")
        };
        let names = |pod: &Pod| {
            keys_for_pod(pod)
                .into_iter()
                .map(|k| k.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&pod(json!({ INJECTED_LIST_ANNOTATION: "log,mesh" }))),
            ["log", "mesh"]
        );
        assert!(names(&pod(json!({}))).is_empty());
        assert!(names(&pod(json!({ INJECTED_LIST_ANNOTATION: "" }))).is_empty());
    }
}

//! What the controller does with a pod's barrier ConfigMap, decided before any write
//! (pure): create it owned by the pod (with the keys already due), add the keys that fell
//! due, or replace one a former pod of the same name left (a StatefulSet's pod comes back
//! under its name before the garbage collector removes the old pod's ConfigMap, whose keys
//! would start every container at once).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};

use super::plan::{is_finished, keys_due};

/// The controller's step for one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BarrierStep {
    /// No ConfigMap yet: create it, owned by the pod, holding these keys.
    Create(Vec<String>),
    /// Add these keys to the pod's ConfigMap.
    Add(Vec<String>),
    /// The ConfigMap is a former pod's (the pod of this UID): delete it, then create the
    /// pod's own.
    ReplaceStale {
        former_pod: String,
    },
    /// A ConfigMap of that name the pod does not own and no pod did: someone else's, left
    /// alone (the pod's waiting containers stay waiting, reported).
    Foreign,
    Nothing,
}

/// The step for `pod` given its barrier ConfigMap as read (`None`: not found).
pub fn barrier_step(pod: &Pod, barrier: Option<&ConfigMap>) -> BarrierStep {
    // A pod on its way out (perhaps a stale view of the former pod of that name) must not
    // judge whose the ConfigMap is.
    if is_finished(pod) {
        return BarrierStep::Nothing;
    }
    let Some(barrier) = barrier else {
        return BarrierStep::Create(keys_due(pod, &BTreeSet::new()));
    };
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let owners = barrier
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default();
    let pod_owners: Vec<&str> = (owners.iter())
        .filter(|o| o.kind == "Pod" && o.api_version == "v1")
        .map(|o| o.uid.as_str())
        .collect();
    if !pod_owners.contains(&uid) {
        return match pod_owners.first() {
            Some(former) => BarrierStep::ReplaceStale {
                former_pod: (*former).to_owned(),
            },
            None => BarrierStep::Foreign,
        };
    }
    let present: BTreeSet<String> = (barrier.data.iter().flatten())
        .map(|(key, _)| key.clone())
        .collect();
    let due = keys_due(pod, &present);
    if due.is_empty() {
        BarrierStep::Nothing
    } else {
        BarrierStep::Add(due)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::launchpriority::plan::barrier_env;

    fn pod(ready: &[&str]) -> Pod {
        let status = |name: &str| json!({ "name": name, "ready": ready.contains(&name), "restartCount": 0, "image": "i", "imageID": "" });
        serde_json::from_value(json!({
            "metadata": { "name": "web", "uid": "u-now" },
            "spec": { "containers": [{ "name": "a" }, { "name": "b", "env": [barrier_env("web", -1)] }] },
            "status": { "phase": "Running", "containerStatuses": [status("a"), status("b")] },
        }))
        .expect("a pod")
    }

    fn barrier(owner: Option<&str>, data: Value) -> ConfigMap {
        let owners = owner
            .map(|uid| json!([{ "apiVersion": "v1", "kind": "Pod", "name": "web", "uid": uid }]));
        serde_json::from_value(json!({
            "metadata": { "name": "web-barrier", "ownerReferences": owners },
            "data": data,
        }))
        .expect("a ConfigMap")
    }

    #[test]
    fn each_state_of_the_configmap_has_its_step() {
        let cases = [
            (
                "none yet, nothing ready",
                pod(&[]),
                None,
                BarrierStep::Create(vec![]),
            ),
            (
                "none yet, first ready",
                pod(&["a"]),
                None,
                BarrierStep::Create(vec!["p_-1".into()]),
            ),
            (
                "own, key due",
                pod(&["a"]),
                Some(barrier(Some("u-now"), json!({}))),
                BarrierStep::Add(vec!["p_-1".into()]),
            ),
            (
                "own, key there",
                pod(&["a"]),
                Some(barrier(Some("u-now"), json!({ "p_-1": "true" }))),
                BarrierStep::Nothing,
            ),
            (
                "own, nothing due",
                pod(&[]),
                Some(barrier(Some("u-now"), json!(null))),
                BarrierStep::Nothing,
            ),
            (
                "a former pod's",
                pod(&["a"]),
                Some(barrier(Some("u-old"), json!({ "p_-1": "true" }))),
                BarrierStep::ReplaceStale {
                    former_pod: "u-old".into(),
                },
            ),
            (
                "nobody's pod's",
                pod(&["a"]),
                Some(barrier(None, json!({}))),
                BarrierStep::Foreign,
            ),
        ];
        for (case, pod, barrier, step) in cases {
            assert_eq!(barrier_step(&pod, barrier.as_ref()), step, "{case}");
        }
    }
}

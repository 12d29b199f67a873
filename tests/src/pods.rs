//! Reading pod state the way the suites assert on it.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::Timestamp;

/// The status (`"True"`, `"False"`, `"Unknown"`) of condition `type_`, if the pod has it.
pub fn condition(pod: &Pod, type_: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

pub fn is_ready(pod: &Pod) -> bool {
    condition(pod, "Ready").as_deref() == Some("True")
}

/// Ready, and not held by an in-place update: the workload controllers count a pod whose
/// `InPlaceUpdateReady` gate is closed as unavailable from the moment it closes, while a
/// real kubelet turns Ready False only after it (about a second later, more when busy). A
/// test that waits for "ready on the new image" by the spec's image and Ready alone can
/// see a pod whose image was just patched and that has not restarted yet.
pub fn is_serving(pod: &Pod) -> bool {
    is_ready(pod) && condition(pod, "InPlaceUpdateReady").as_deref() != Some("False")
}

pub fn is_running_and_ready(pod: &Pod) -> bool {
    let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    running && is_ready(pod)
}

/// When the container's current run started, if it is running.
pub fn started_at(status: &ContainerStatus) -> Option<Timestamp> {
    let running = status.state.as_ref()?.running.as_ref()?;
    running.started_at.as_ref().map(|t| t.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(phase: &str, ready: &str) -> Pod {
        serde_json::from_value(json!({ "status": { "phase": phase, "conditions": [
            { "type": "Ready", "status": ready },
            { "type": "InPlaceUpdateReady", "status": "False" }
        ] } }))
        .expect("valid pod")
    }

    #[test]
    fn reads_conditions_and_readiness() {
        assert_eq!(
            condition(&pod("Running", "True"), "InPlaceUpdateReady").as_deref(),
            Some("False")
        );
        assert_eq!(condition(&pod("Running", "True"), "KruisePodReady"), None);
        assert!(is_running_and_ready(&pod("Running", "True")));
        assert!(!is_running_and_ready(&pod("Pending", "True")));
        assert!(!is_running_and_ready(&pod("Running", "False")));
        assert!(!is_ready(&Pod::default()));
    }

    #[test]
    fn a_ready_pod_with_its_in_place_gate_closed_is_not_serving() {
        let with = |ready: &str, gate: Option<&str>| -> Pod {
            let mut conditions = vec![json!({ "type": "Ready", "status": ready })];
            conditions.extend(gate.map(|g| json!({ "type": "InPlaceUpdateReady", "status": g })));
            serde_json::from_value(json!({ "status": { "conditions": conditions } }))
                .expect("valid pod")
        };
        // (Ready, InPlaceUpdateReady; serving)
        let cases = [
            ("True", None, true),
            ("True", Some("True"), true),
            ("True", Some("False"), false),
            ("False", Some("True"), false),
            ("False", None, false),
        ];
        for (ready, gate, want) in cases {
            assert_eq!(is_serving(&with(ready, gate)), want, "{ready} {gate:?}");
        }
    }
}

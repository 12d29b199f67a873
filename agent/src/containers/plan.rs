//! Turns a `RestartContainersRequest` and the pod it names into a [`Plan`], checking
//! everything that can be checked before anything is touched.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use stevedore_proto::stevedore::agent::v1::RestartContainersRequest;

use super::operation::Plan;
use crate::pods::{KRUISE_POD_READY, condition_status};

/// Kubernetes' default `terminationGracePeriodSeconds`.
const DEFAULT_TERMINATION_GRACE: Duration = Duration::from_secs(30);
/// How long kubelet gets to start the new container (it may have to back off).
pub const RECREATE_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest grace period or min-started time accepted (one day).
const MAX_SECONDS: i64 = 86_400;

/// Why a restart request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("container_names must name at least one container")]
    NoContainers,
    #[error("container {0:?} is named twice")]
    Duplicate(String),
    #[error("pod has no container named {0:?}")]
    UnknownContainer(String),
    #[error("{field} must be between 0 and {MAX_SECONDS}, got {value}")]
    OutOfRange { field: &'static str, value: i64 },
}

fn seconds(field: &'static str, value: i64) -> Result<Duration, PlanError> {
    u64::try_from(value)
        .ok()
        .filter(|v| i64::try_from(*v).is_ok_and(|v| v <= MAX_SECONDS))
        .map(Duration::from_secs)
        .ok_or(PlanError::OutOfRange { field, value })
}

/// The plan for `request` on `pod` (already checked to be on this node, same UID).
pub fn plan_restart(request: &RestartContainersRequest, pod: &Pod) -> Result<Plan, PlanError> {
    if request.container_names.is_empty() {
        return Err(PlanError::NoContainers);
    }
    let spec = pod.spec.as_ref();
    let known: HashSet<&str> = spec
        .map(|s| s.containers.iter().map(|c| c.name.as_str()).collect())
        .unwrap_or_default();
    let mut seen = HashSet::new();
    for name in &request.container_names {
        if !known.contains(name.as_str()) {
            return Err(PlanError::UnknownContainer(name.clone()));
        }
        if !seen.insert(name.as_str()) {
            return Err(PlanError::Duplicate(name.clone()));
        }
    }
    let termination_grace = match request.termination_grace_period_seconds {
        Some(value) => seconds("termination_grace_period_seconds", value)?,
        None => spec
            .and_then(|s| s.termination_grace_period_seconds)
            .and_then(|v| seconds("pod terminationGracePeriodSeconds", v).ok())
            .unwrap_or(DEFAULT_TERMINATION_GRACE),
    };
    let unready_grace = seconds(
        "unready_grace_period_seconds",
        request.unready_grace_period_seconds,
    )?;
    let min_started = seconds("min_started_seconds", request.min_started_seconds)?;

    // Taking readiness away only means something when the pod is gated on
    // KruisePodReady; and if it is already False, someone else owns that.
    let gated = spec
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|g| g.condition_type == KRUISE_POD_READY));
    let current = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| condition_status(c, KRUISE_POD_READY));
    let mark_unready = !unready_grace.is_zero() && gated && current != Some("False");

    Ok(Plan {
        containers: request.container_names.clone(),
        ordered: request.ordered_recreate,
        termination_grace,
        unready_grace,
        min_started,
        mark_unready,
        timeout: termination_grace + min_started + RECREATE_TIMEOUT,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(gated: bool, kruise_ready: Option<&str>, grace: Option<i64>) -> Pod {
        let mut pod = json!({
            "spec": {
                "containers": [{ "name": "a" }, { "name": "b" }],
            },
            "status": { "conditions": [] },
        });
        if gated {
            pod["spec"]["readinessGates"] = json!([{ "conditionType": "KruisePodReady" }]);
        }
        if let Some(status) = kruise_ready {
            pod["status"]["conditions"] = json!([{ "type": "KruisePodReady", "status": status }]);
        }
        if let Some(grace) = grace {
            pod["spec"]["terminationGracePeriodSeconds"] = json!(grace);
        }
        serde_json::from_value(pod).expect("valid pod")
    }

    fn request(names: &[&str]) -> RestartContainersRequest {
        RestartContainersRequest {
            container_names: names.iter().map(|n| (*n).to_owned()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn rejections() {
        let cases = [
            (request(&[]), PlanError::NoContainers),
            (
                request(&["a", "z"]),
                PlanError::UnknownContainer("z".into()),
            ),
            (request(&["a", "a"]), PlanError::Duplicate("a".into())),
            (
                RestartContainersRequest {
                    min_started_seconds: -1,
                    ..request(&["a"])
                },
                PlanError::OutOfRange {
                    field: "min_started_seconds",
                    value: -1,
                },
            ),
            (
                RestartContainersRequest {
                    termination_grace_period_seconds: Some(MAX_SECONDS + 1),
                    ..request(&["a"])
                },
                PlanError::OutOfRange {
                    field: "termination_grace_period_seconds",
                    value: MAX_SECONDS + 1,
                },
            ),
        ];
        for (req, expected) in cases {
            assert_eq!(plan_restart(&req, &pod(false, None, None)), Err(expected));
        }
    }

    #[test]
    fn termination_grace_comes_from_request_then_pod_then_default() {
        let with = |req_grace, pod_grace| {
            let req = RestartContainersRequest {
                termination_grace_period_seconds: req_grace,
                ..request(&["a"])
            };
            plan_restart(&req, &pod(false, None, pod_grace)).map(|p| p.termination_grace.as_secs())
        };
        assert_eq!(with(Some(5), Some(60)), Ok(5));
        assert_eq!(with(None, Some(60)), Ok(60));
        assert_eq!(with(None, None), Ok(30));
    }

    #[test]
    fn marks_unready_only_when_gated_with_a_grace_and_not_already_false() {
        let cases = [
            // (gated, current KruisePodReady, unready grace, expected)
            (true, Some("True"), 3, true),
            (true, None, 3, true),
            (true, Some("False"), 3, false),
            (true, Some("True"), 0, false),
            (false, Some("True"), 3, false),
        ];
        for (gated, current, grace, expected) in cases {
            let req = RestartContainersRequest {
                unready_grace_period_seconds: grace,
                ..request(&["b", "a"])
            };
            let plan = plan_restart(&req, &pod(gated, current, None)).expect("valid");
            assert_eq!(
                plan.mark_unready, expected,
                "gated={gated} current={current:?} grace={grace}"
            );
            assert_eq!(plan.containers, ["b", "a"]);
        }
    }
}

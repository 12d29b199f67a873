//! Between NodePodProbe and the agent's API (pure): the spec as an `ApplyPodProbesRequest`
//! (ports already numbers, from `plan`), the agent's state updates folded into the
//! status, kept to the pods and probes the spec still lists.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use stevedore_proto::stevedore::agent::v1::{
    self as agent, ApplyPodProbesRequest, PodProbeStateUpdate, PodProbes, PodRef, pod_probe,
};

use crate::api::nodepodprobe::{
    ContainerProbe, ContainerProbeState, MAX_MESSAGE_CHARS, NodePodProbe, NodePodProbeStatus,
    PodProbeStatus, ProbeState,
};
use crate::api::podprobemarker::UriScheme;

/// A pod's identity in the status: namespace, name, UID.
pub type PodId = (String, String, String);

/// Every probe state the agent reported, per pod, per probe name.
pub type States = BTreeMap<PodId, BTreeMap<String, ContainerProbeState>>;

fn handler(probe: &ContainerProbe) -> Option<pod_probe::Handler> {
    let spec = &probe.probe;
    if let Some(exec) = &spec.exec {
        return Some(pod_probe::Handler::Exec(agent::ExecHandler {
            command: exec.command.clone(),
        }));
    }
    if let Some(tcp) = &spec.tcp_socket {
        return Some(pod_probe::Handler::TcpSocket(agent::TcpHandler {
            port: u32::from(tcp.port.0),
        }));
    }
    spec.http_get.as_ref().map(|http| {
        pod_probe::Handler::HttpGet(agent::HttpHandler {
            path: http.path.clone().unwrap_or_default(),
            port: u32::from(http.port.0),
            https: http.scheme == Some(UriScheme::Https),
            headers: (http.http_headers.iter())
                .map(|h| agent::HttpHeader {
                    name: h.name.clone(),
                    value: h.value.clone(),
                })
                .collect(),
        })
    })
}

/// The node's NodePodProbe as the agent's request.
pub fn apply_request(node: &str, probes: &NodePodProbe) -> ApplyPodProbesRequest {
    let pods = (probes.spec.pod_probes.iter())
        .map(|pod| PodProbes {
            pod: Some(PodRef {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                uid: pod.uid.clone(),
            }),
            ip: pod.ip.clone(),
            probes: (pod.probes.iter())
                .map(|probe| agent::PodProbe {
                    name: probe.name.clone(),
                    container_name: probe.container_name.clone(),
                    handler: handler(probe),
                    initial_delay_seconds: probe.probe.initial_delay_seconds(),
                    timeout_seconds: probe.probe.timeout_seconds(),
                    period_seconds: probe.probe.period_seconds(),
                    success_threshold: probe.probe.success_threshold(),
                    failure_threshold: probe.probe.failure_threshold(),
                })
                .collect(),
        })
        .collect();
    ApplyPodProbesRequest {
        node_name: node.to_owned(),
        list_uid: probes.metadata.uid.clone().unwrap_or_default(),
        generation: probes.metadata.generation.unwrap_or_default(),
        pods,
    }
}

/// A protobuf time (seconds, nanoseconds) as Kubernetes writes it.
fn time(seconds_and_nanos: Option<(i64, i32)>) -> Option<Time> {
    let (seconds, nanos) = seconds_and_nanos?;
    Timestamp::new(seconds, nanos).ok().map(Time)
}

/// The agent's message as the status holds it: cut to the schema's bound, so a longer one
/// cannot make the status write fail.
fn message(reported: &str) -> String {
    let limit = usize::try_from(MAX_MESSAGE_CHARS).unwrap_or(usize::MAX);
    reported.chars().take(limit).collect()
}

/// Folds one update into `states`: the probe's state, or its removal.
pub fn fold(states: &mut States, update: &PodProbeStateUpdate) {
    let Some(pod) = &update.pod else { return };
    let id = (pod.namespace.clone(), pod.name.clone(), pod.uid.clone());
    if update.removed {
        if let Some(probes) = states.get_mut(&id) {
            probes.remove(&update.probe_name);
            if probes.is_empty() {
                states.remove(&id);
            }
        }
        return;
    }
    let state = match agent::ProbeState::try_from(update.state) {
        Ok(agent::ProbeState::Succeeded) => ProbeState::Succeeded,
        Ok(agent::ProbeState::Failed) => ProbeState::Failed,
        _ => ProbeState::Unknown,
    };
    let recorded = ContainerProbeState {
        name: update.probe_name.clone(),
        state,
        last_probe_time: time(
            update
                .last_probe_time
                .as_ref()
                .map(|t| (t.seconds, t.nanos)),
        ),
        last_transition_time: time(
            (update.last_transition_time.as_ref()).map(|t| (t.seconds, t.nanos)),
        ),
        message: message(&update.message),
    };
    states
        .entry(id)
        .or_default()
        .insert(update.probe_name.clone(), recorded);
}

/// The status of `probes` from `states`: only pods and probes its spec lists, in the
/// spec's order, so a stale state of a gone pod is never written.
pub fn status(probes: &NodePodProbe, states: &States) -> NodePodProbeStatus {
    let pod_probe_statuses = (probes.spec.pod_probes.iter())
        .filter_map(|pod| {
            let id = (pod.namespace.clone(), pod.name.clone(), pod.uid.clone());
            let reported = states.get(&id)?;
            let probe_states: Vec<ContainerProbeState> = (pod.probes.iter())
                .filter_map(|probe| reported.get(&probe.name).cloned())
                .collect();
            (!probe_states.is_empty()).then(|| PodProbeStatus {
                name: pod.name.clone(),
                namespace: pod.namespace.clone(),
                uid: pod.uid.clone(),
                probe_states,
            })
        })
        .collect();
    NodePodProbeStatus { pod_probe_statuses }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node_probes() -> NodePodProbe {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "NodePodProbe",
            "metadata": { "name": "n1", "uid": "list-uid", "generation": 4 },
            "spec": { "podProbes": [{
                "name": "p", "namespace": "ns", "uid": "u1", "IP": "10.0.0.7",
                "probes": [
                    { "name": "m#exec", "containerName": "main", "probe": { "exec": { "command": ["cat", "/tmp/healthy"] }, "periodSeconds": 2 } },
                    { "name": "m#tcp", "containerName": "main", "probe": { "tcpSocket": { "port": 8080 } } },
                    { "name": "m#http", "containerName": "main", "probe": { "httpGet": { "port": 80, "path": "/x", "scheme": "HTTPS" }, "failureThreshold": 1 } },
                ],
            }] },
        }))
        .expect("valid NodePodProbe")
    }

    fn update(probe: &str, state: agent::ProbeState, removed: bool) -> PodProbeStateUpdate {
        PodProbeStateUpdate {
            pod: Some(PodRef {
                namespace: "ns".into(),
                name: "p".into(),
                uid: "u1".into(),
            }),
            probe_name: probe.into(),
            state: state.into(),
            last_probe_time: Some(prost_types::Timestamp {
                seconds: 100,
                nanos: 0,
            }),
            removed,
            ..PodProbeStateUpdate::default()
        }
    }

    #[test]
    fn the_request_carries_every_probe_with_its_timing() {
        let request = apply_request("n1", &node_probes());
        assert_eq!(
            (request.list_uid.as_str(), request.generation),
            ("list-uid", 4)
        );
        let probes = &request.pods[0].probes;
        assert_eq!(request.pods[0].ip, "10.0.0.7");
        assert_eq!(
            (
                probes[0].period_seconds,
                probes[0].timeout_seconds,
                probes[0].failure_threshold
            ),
            (2, 1, 3)
        );
        assert!(
            matches!(&probes[1].handler, Some(pod_probe::Handler::TcpSocket(t)) if t.port == 8080)
        );
        assert!(
            matches!(&probes[2].handler, Some(pod_probe::Handler::HttpGet(h)) if h.https && h.path == "/x" && h.port == 80)
        );
        assert_eq!(probes[2].failure_threshold, 1);
    }

    #[test]
    fn updates_fold_into_a_status_of_listed_probes_only() {
        let mut states = States::new();
        fold(
            &mut states,
            &update("m#exec", agent::ProbeState::Succeeded, false),
        );
        fold(
            &mut states,
            &update("m#tcp", agent::ProbeState::Failed, false),
        );
        fold(
            &mut states,
            &update("m#gone", agent::ProbeState::Failed, false),
        );
        let written = status(&node_probes(), &states);
        let pod = &written.pod_probe_statuses[0];
        let seen: Vec<(&str, ProbeState)> = pod
            .probe_states
            .iter()
            .map(|s| (s.name.as_str(), s.state))
            .collect();
        assert_eq!(
            seen,
            [
                ("m#exec", ProbeState::Succeeded),
                ("m#tcp", ProbeState::Failed)
            ]
        );
        assert!(pod.probe_states[0].last_probe_time.is_some());

        fold(
            &mut states,
            &update("m#exec", agent::ProbeState::Unknown, true),
        );
        fold(
            &mut states,
            &update("m#tcp", agent::ProbeState::Unknown, true),
        );
        fold(
            &mut states,
            &update("m#gone", agent::ProbeState::Unknown, true),
        );
        assert!(states.is_empty());
        assert!(
            status(&node_probes(), &states)
                .pod_probe_statuses
                .is_empty()
        );
    }

    #[test]
    fn a_message_longer_than_the_schema_allows_is_cut_to_it() {
        let mut states = States::new();
        let mut long = update("m#exec", agent::ProbeState::Failed, false);
        long.message = "é".repeat(2000);
        fold(&mut states, &long);
        let written = status(&node_probes(), &states);
        let message = &written.pod_probe_statuses[0].probe_states[0].message;
        assert_eq!(message.chars().count(), 1024);
    }
}

//! The node's probe list as the agent holds it (pure): an `ApplyPodProbesRequest` checked
//! and turned into one spec per probe, and what an apply changes — probes to start and
//! to stop (a changed spec is stopped and started again; an unchanged one keeps running,
//! with its state).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use stevedore_proto::stevedore::agent::v1::{ApplyPodProbesRequest, PodProbe, pod_probe};

use super::state::Thresholds;

/// One probe of one pod: the pod's identity (a pod recreated under its name is another
/// pod) and the probe's name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProbeKey {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub probe: String,
}

/// What a probe runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handler {
    Exec(Vec<String>),
    Tcp(u16),
    Http {
        path: String,
        port: u16,
        https: bool,
        headers: Vec<(String, String)>,
    },
}

/// One probe, checked, with core/v1 Probe's defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    pub ip: IpAddr,
    pub container: String,
    pub handler: Handler,
    pub initial_delay: Duration,
    pub timeout: Duration,
    pub period: Duration,
    pub thresholds: Thresholds,
}

/// Why a list was refused, naming the probe.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("pod {index}: pod, with namespace, name and uid, is required")]
    Pod { index: usize },
    #[error("pod {namespace}/{name}: ip {ip:?} is not an IP address")]
    Ip {
        namespace: String,
        name: String,
        ip: String,
    },
    #[error("pod {namespace}/{name}, probe {probe:?}: {why}")]
    Probe {
        namespace: String,
        name: String,
        probe: String,
        why: &'static str,
    },
}

fn or_default(value: u32, default: u32) -> u32 {
    if value == 0 { default } else { value }
}

fn port(value: u32) -> Result<u16, &'static str> {
    u16::try_from(value)
        .ok()
        .filter(|p| *p > 0)
        .ok_or("port must be from 1 to 65535")
}

fn handler(probe: &PodProbe) -> Result<Handler, &'static str> {
    match &probe.handler {
        Some(pod_probe::Handler::Exec(exec)) if exec.command.is_empty() => {
            Err("exec.command must not be empty")
        }
        Some(pod_probe::Handler::Exec(exec)) => Ok(Handler::Exec(exec.command.clone())),
        Some(pod_probe::Handler::TcpSocket(tcp)) => Ok(Handler::Tcp(port(tcp.port)?)),
        Some(pod_probe::Handler::HttpGet(http)) => Ok(Handler::Http {
            path: http.path.clone(),
            port: port(http.port)?,
            https: http.https,
            headers: http
                .headers
                .iter()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
        }),
        None => Err("a handler (exec, tcp_socket or http_get) is required"),
    }
}

fn probe_spec(ip: IpAddr, probe: &PodProbe) -> Result<ProbeSpec, &'static str> {
    if probe.name.is_empty() {
        return Err("name is required");
    }
    let seconds = |s: u32| Duration::from_secs(u64::from(s));
    Ok(ProbeSpec {
        ip,
        container: probe.container_name.clone(),
        handler: handler(probe)?,
        initial_delay: seconds(probe.initial_delay_seconds),
        timeout: seconds(or_default(probe.timeout_seconds, 1)),
        period: seconds(or_default(probe.period_seconds, 10)),
        thresholds: Thresholds {
            success: or_default(probe.success_threshold, 1),
            failure: or_default(probe.failure_threshold, 3),
        },
    })
}

/// Every probe of the request, keyed; the first bad pod or probe refuses the whole list.
pub fn desired_probes(
    request: &ApplyPodProbesRequest,
) -> Result<BTreeMap<ProbeKey, ProbeSpec>, SpecError> {
    let mut probes = BTreeMap::new();
    for (index, pod) in request.pods.iter().enumerate() {
        let Some(pod_ref) = pod
            .pod
            .as_ref()
            .filter(|p| !p.namespace.is_empty() && !p.name.is_empty() && !p.uid.is_empty())
        else {
            return Err(SpecError::Pod { index });
        };
        let (namespace, name) = (pod_ref.namespace.clone(), pod_ref.name.clone());
        let ip: IpAddr = pod.ip.parse().map_err(|_| SpecError::Ip {
            namespace: namespace.clone(),
            name: name.clone(),
            ip: pod.ip.clone(),
        })?;
        for probe in &pod.probes {
            let spec = probe_spec(ip, probe).map_err(|why| SpecError::Probe {
                namespace: namespace.clone(),
                name: name.clone(),
                probe: probe.name.clone(),
                why,
            })?;
            let key = ProbeKey {
                namespace: namespace.clone(),
                pod: name.clone(),
                uid: pod_ref.uid.clone(),
                probe: probe.name.clone(),
            };
            probes.insert(key, spec);
        }
    }
    Ok(probes)
}

/// What an apply changes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Probes to stop: gone, or with a changed spec.
    pub stop: Vec<ProbeKey>,
    /// Probes to start: new, or with a changed spec.
    pub start: Vec<ProbeKey>,
}

/// The probes to stop and start to go from `held` to `desired`.
pub fn changes(
    held: &BTreeMap<ProbeKey, ProbeSpec>,
    desired: &BTreeMap<ProbeKey, ProbeSpec>,
) -> Changes {
    let mut out = Changes::default();
    for (key, spec) in held {
        if desired.get(key) != Some(spec) {
            out.stop.push(key.clone());
        }
    }
    for (key, spec) in desired {
        if held.get(key) != Some(spec) {
            out.start.push(key.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use stevedore_proto::stevedore::agent::v1::{
        ExecHandler, HttpHandler, PodProbes, PodRef, TcpHandler,
    };

    use super::*;

    fn probe(name: &str, handler: Option<pod_probe::Handler>) -> PodProbe {
        PodProbe {
            name: name.into(),
            container_name: "main".into(),
            handler,
            ..PodProbe::default()
        }
    }

    fn exec() -> Option<pod_probe::Handler> {
        Some(pod_probe::Handler::Exec(ExecHandler {
            command: vec!["true".into()],
        }))
    }

    fn request(uid: &str, ip: &str, probes: Vec<PodProbe>) -> ApplyPodProbesRequest {
        ApplyPodProbesRequest {
            node_name: "n1".into(),
            pods: vec![PodProbes {
                pod: Some(PodRef {
                    namespace: "ns".into(),
                    name: "p".into(),
                    uid: uid.into(),
                }),
                ip: ip.into(),
                probes,
            }],
            ..ApplyPodProbesRequest::default()
        }
    }

    #[test]
    fn defaults_are_core_v1_probe_s() {
        let probes =
            desired_probes(&request("u", "10.0.0.7", vec![probe("m#a", exec())])).expect("valid");
        let spec = probes.values().next().expect("one probe");
        assert_eq!(
            (
                spec.timeout,
                spec.period,
                spec.initial_delay,
                spec.thresholds
            ),
            (
                Duration::from_secs(1),
                Duration::from_secs(10),
                Duration::ZERO,
                Thresholds {
                    success: 1,
                    failure: 3
                }
            )
        );
    }

    #[test]
    fn bad_lists_are_refused_naming_the_probe() {
        let tcp = |port| Some(pod_probe::Handler::TcpSocket(TcpHandler { port }));
        let http = |port| {
            Some(pod_probe::Handler::HttpGet(HttpHandler {
                port,
                ..HttpHandler::default()
            }))
        };
        let empty_exec = Some(pod_probe::Handler::Exec(ExecHandler { command: vec![] }));
        let cases = [
            (
                "no handler",
                request("u", "10.0.0.7", vec![probe("m#a", None)]),
                "handler",
            ),
            (
                "empty command",
                request("u", "10.0.0.7", vec![probe("m#a", empty_exec)]),
                "exec.command",
            ),
            (
                "port 0",
                request("u", "10.0.0.7", vec![probe("m#a", tcp(0))]),
                "port",
            ),
            (
                "port above 65535",
                request("u", "10.0.0.7", vec![probe("m#a", http(70000))]),
                "port",
            ),
            (
                "no name",
                request("u", "10.0.0.7", vec![probe("", exec())]),
                "name",
            ),
            (
                "bad ip",
                request("u", "nope", vec![probe("m#a", exec())]),
                "ip",
            ),
            (
                "no uid",
                request("", "10.0.0.7", vec![probe("m#a", exec())]),
                "uid",
            ),
        ];
        for (name, request, field) in cases {
            let err = desired_probes(&request).expect_err(name).to_string();
            assert!(err.contains(field), "{name}: {err}");
        }
    }

    #[test]
    fn an_apply_restarts_only_what_changed() {
        let held = desired_probes(&request(
            "u",
            "10.0.0.7",
            vec![probe("m#a", exec()), probe("m#b", exec())],
        ))
        .expect("valid");
        let mut changed = probe("m#b", exec());
        changed.period_seconds = 5;
        let cases = [
            (
                "same list",
                request(
                    "u",
                    "10.0.0.7",
                    vec![probe("m#a", exec()), probe("m#b", exec())],
                ),
                vec![],
                vec![],
            ),
            (
                "one removed",
                request("u", "10.0.0.7", vec![probe("m#a", exec())]),
                vec!["m#b"],
                vec![],
            ),
            (
                "one changed",
                request("u", "10.0.0.7", vec![probe("m#a", exec()), changed]),
                vec!["m#b"],
                vec!["m#b"],
            ),
            (
                "pod recreated",
                request("v", "10.0.0.7", vec![probe("m#a", exec())]),
                vec!["m#a", "m#b"],
                vec!["m#a"],
            ),
        ];
        for (name, request, stop, start) in cases {
            let desired = desired_probes(&request).expect("valid");
            let got = changes(&held, &desired);
            let names =
                |keys: &[ProbeKey]| keys.iter().map(|k| k.probe.clone()).collect::<Vec<_>>();
            assert_eq!(
                (names(&got.stop), names(&got.start)),
                (
                    stop.iter().map(|s| (*s).to_owned()).collect(),
                    start.iter().map(|s| (*s).to_owned()).collect()
                ),
                "{name}"
            );
        }
    }
}

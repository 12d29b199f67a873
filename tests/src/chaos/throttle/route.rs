//! Which apiserver address the control plane's container dials. kube's in-cluster
//! configuration (`Config::incluster_env`, what `Config::infer` falls back to in a pod)
//! reads `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT`, and a container's own
//! `env` wins over the ones the kubelet injects for the `kubernetes` Service. So setting
//! both on the Deployment routes the control plane through the proxy, and removing them
//! routes it back. Pure: the env lists and the patch that writes one.

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::EnvVar;
use serde_json::{Value, json};

pub const HOST: &str = "KUBERNETES_SERVICE_HOST";
pub const PORT: &str = "KUBERNETES_SERVICE_PORT";
/// Set beside the two by a chaos run (to the proxy's address), so a later run knows the
/// address is the harness's and not the operator's, and takes it away.
pub const MARKER: &str = "STEVEDORE_CHAOS_THROTTLE_PROXY";

/// `env` routed through the proxy at `proxy`; `None` when the container already names an
/// apiserver of its own (the harness would lose it on restore).
pub fn routed(env: &[EnvVar], proxy: SocketAddr) -> Option<Vec<EnvVar>> {
    if proxy_of(env).is_none() && env.iter().any(|e| e.name == HOST || e.name == PORT) {
        return None;
    }
    let mut out = without_ours(env);
    out.push(var(HOST, &proxy.ip().to_string()));
    out.push(var(PORT, &proxy.port().to_string()));
    out.push(var(MARKER, &proxy.to_string()));
    Some(out)
}

/// `env` without a chaos run's route; `None` when there is none to take away.
pub fn restored(env: &[EnvVar]) -> Option<Vec<EnvVar>> {
    proxy_of(env)?;
    Some(without_ours(env))
}

/// The proxy address a chaos run routed `env` through, if it did.
pub fn proxy_of(env: &[EnvVar]) -> Option<&str> {
    env.iter()
        .find(|e| e.name == MARKER)
        .map(|e| e.value.as_deref().unwrap_or_default())
}

/// The JSON patch that sets the env of container `index`, named `name` (tested first,
/// so a Deployment whose containers moved is refused rather than patched wrongly).
pub fn env_patch(index: usize, name: &str, env: &[EnvVar]) -> Value {
    let container = format!("/spec/template/spec/containers/{index}");
    json!([
        { "op": "test", "path": format!("{container}/name"), "value": name },
        { "op": "add", "path": format!("{container}/env"), "value": env },
    ])
}

fn without_ours(env: &[EnvVar]) -> Vec<EnvVar> {
    env.iter()
        .filter(|e| ![HOST, PORT, MARKER].contains(&e.name.as_str()))
        .cloned()
        .collect()
}

fn var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<EnvVar> {
        pairs.iter().map(|(n, v)| var(n, v)).collect()
    }

    const PROXY: &str = "198.18.0.1:40123";

    #[test]
    fn routing_sets_the_address_and_restoring_takes_only_it_away() {
        let proxy: SocketAddr = PROXY.parse().expect("address");
        let base = [("POD_NAME", "x"), ("STEVEDORE_LOG_FORMAT", "json")];
        let routed_base = [
            ("POD_NAME", "x"),
            ("STEVEDORE_LOG_FORMAT", "json"),
            (HOST, "198.18.0.1"),
            (PORT, "40123"),
            (MARKER, PROXY),
        ];
        // (case, env before, routed, restored)
        type Row<'a> = (
            &'a str,
            Vec<EnvVar>,
            Option<Vec<EnvVar>>,
            Option<Vec<EnvVar>>,
        );
        let rows: Vec<Row<'_>> = vec![
            (
                "a plain env is routed and has nothing to restore",
                env(&base),
                Some(env(&routed_base)),
                None,
            ),
            (
                "a routed env is routed again to the new proxy and restored to the plain one",
                env(&[
                    ("POD_NAME", "x"),
                    (HOST, "198.18.0.1"),
                    (PORT, "39999"),
                    (MARKER, "198.18.0.1:39999"),
                    ("STEVEDORE_LOG_FORMAT", "json"),
                ]),
                Some(env(&routed_base)),
                Some(env(&base)),
            ),
            (
                "an operator's own apiserver address is never routed nor taken away",
                env(&[("POD_NAME", "x"), (HOST, "10.0.0.1"), (PORT, "6443")]),
                None,
                None,
            ),
            (
                "an empty env is routed",
                Vec::new(),
                Some(env(&routed_base[2..])),
                None,
            ),
        ];
        for (case, before, want_routed, want_restored) in rows {
            assert_eq!(routed(&before, proxy), want_routed, "{case}");
            assert_eq!(restored(&before), want_restored, "{case}");
        }
    }

    #[test]
    fn the_route_names_its_proxy_and_the_patch_checks_the_container_it_writes() {
        let proxy: SocketAddr = PROXY.parse().expect("address");
        let routed_env = routed(&[], proxy).expect("routed");
        assert_eq!(proxy_of(&routed_env), Some(PROXY));
        assert_eq!(proxy_of(&[]), None);
        let patch = env_patch(1, "controlplane", &routed_env);
        assert_eq!(patch[0]["op"], "test");
        assert_eq!(patch[0]["path"], "/spec/template/spec/containers/1/name");
        assert_eq!(patch[0]["value"], "controlplane");
        assert_eq!(patch[1]["op"], "add");
        assert_eq!(patch[1]["path"], "/spec/template/spec/containers/1/env");
        assert_eq!(patch[1]["value"][0]["name"], HOST);
        assert_eq!(patch[1]["value"][1]["value"], "40123");
    }
}

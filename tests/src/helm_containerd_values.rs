//! The chart's containerd values rendered offline (`helm template`, no cluster): the
//! socket and registry configuration of containerd's defaults and of k3s's, as a person
//! installing on either would set them. The cluster suite `helm_chart` covers the other
//! values; this runs wherever the cached helm is, without a cluster.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::{Value, json};

use crate::cluster::pinned_version;
use crate::helm::{chart_dir, container_env, find, objects};

/// The helm `cluster.sh tools` builds: `STEVEDORE_HELM`, else the pinned version in the
/// cache (`~/.cache/stevedore/helm-<HELM_VERSION>/bin/helm`).
fn cached_helm() -> Result<PathBuf> {
    if let Some(helm) = std::env::var_os("STEVEDORE_HELM") {
        return Ok(helm.into());
    }
    let version = pinned_version("HELM_VERSION")?;
    let cache = std::env::var_os("STEVEDORE_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("stevedore")))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/stevedore")))
        .context("neither STEVEDORE_CACHE, XDG_CACHE_HOME nor HOME is set")?;
    let helm = cache.join(format!("helm-{version}/bin/helm"));
    ensure!(
        helm.exists(),
        "{} is not built yet: run deploy/local/cluster.sh tools",
        helm.display()
    );
    Ok(helm)
}

/// `helm template` of the chart with the required values and `sets`, as objects.
fn render(sets: &[&str]) -> Result<Vec<Value>> {
    let mut command = Command::new(cached_helm()?);
    command
        .arg("template")
        .arg("stevedore")
        .arg(chart_dir())
        .args(["--namespace", "stevedore-system"])
        .args(["--set", "images.registry=registry.example"])
        .args([
            "--set",
            "networkPolicy.apiserver[0].ipBlock.cidr=192.0.2.10/32",
        ]);
    for set in sets {
        command.args(["--set", set]);
    }
    let output = command.output().context("running helm template")?;
    if !output.status.success() {
        bail!(
            "helm template {sets:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    objects(&String::from_utf8_lossy(&output.stdout))
}

/// Where the agent's DaemonSet finds containerd: the host directory of the socket, the
/// socket path inside the container, and the host's registry configuration directory.
fn containerd_wiring(objects: &[Value]) -> Result<(Value, Value, Value)> {
    let ds = find(objects, "DaemonSet", "stevedore-agent")?;
    let pod = &ds["spec"]["template"]["spec"];
    let volume = |name: &str| -> Result<Value> {
        let volumes = pod["volumes"].as_array().context("no volumes")?;
        let volume = volumes.iter().find(|v| v["name"] == name);
        Ok(volume.with_context(|| format!("no volume {name}"))?["hostPath"]["path"].clone())
    };
    let mounts = pod["containers"][0]["volumeMounts"]
        .as_array()
        .context("no volume mounts")?;
    let socket_mount = mounts.iter().find(|m| m["name"] == "containerd");
    ensure!(
        socket_mount.map(|m| &m["mountPath"]) == Some(&json!("/run/containerd")),
        "the socket's directory is not mounted at /run/containerd: {mounts:?}"
    );
    let socket = container_env(ds, "STEVEDORE_CONTAINERD_SOCKET").cloned();
    Ok((
        volume("containerd")?,
        socket.unwrap_or(Value::Null),
        volume("registry-config")?,
    ))
}

#[test]
fn containerd_socket_values_for_containerd_and_k3s() -> Result<()> {
    let cases: [(&str, &[&str], [&str; 3]); 2] = [
        (
            "containerd's defaults",
            &[],
            [
                "/run/containerd",
                "/run/containerd/containerd.sock",
                "/etc/containerd/certs.d",
            ],
        ),
        (
            "k3s",
            &[
                "agent.containerdSocket=/run/k3s/containerd/containerd.sock",
                "agent.registryConfigDir=/var/lib/rancher/k3s/agent/etc/containerd/certs.d",
            ],
            [
                "/run/k3s/containerd",
                "/run/containerd/containerd.sock",
                "/var/lib/rancher/k3s/agent/etc/containerd/certs.d",
            ],
        ),
    ];
    for (name, sets, [host_dir, socket, registry_dir]) in cases {
        let wiring = containerd_wiring(&render(sets)?)?;
        let expected = (json!(host_dir), json!(socket), json!(registry_dir));
        ensure!(
            wiring == expected,
            "{name}: (socket dir, socket, registry dir) {wiring:?}, expected {expected:?}"
        );
    }
    Ok(())
}

//! Reading `/metrics`, which both binaries serve on localhost only: the agent's (host
//! network) from this machine, the control plane's through `kubectl port-forward`.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

use crate::ClusterInfo;

/// The control plane's metrics port (its `--metrics-addr` default, on localhost).
pub const CONTROLPLANE_METRICS_PORT: u16 = 10354;
/// The agent's metrics port (its `--metrics-addr` default, on the node's localhost).
pub const AGENT_METRICS_PORT: u16 = 10353;

/// A plain HTTP/1.0 GET: (status code, body).
pub async fn http_get(addr: &str, path: &str) -> Result<(u16, String)> {
    let connect = tokio::net::TcpStream::connect(addr);
    let mut stream = tokio::time::timeout(Duration::from_secs(5), connect)
        .await
        .with_context(|| format!("connecting to {addr}"))??;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("GET {addr}{path}: no status line"))?;
    let body = response
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    Ok((code, body))
}

/// `GET /metrics` of `port` on localhost inside pod `namespace/pod`, through
/// `kubectl port-forward` to an ephemeral local port.
pub async fn pod_metrics(
    cluster: &ClusterInfo,
    namespace: &str,
    pod: &str,
    port: u16,
) -> Result<String> {
    let mut child = tokio::process::Command::new(&cluster.kubectl)
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["-n", namespace, "port-forward", &format!("pod/{pod}")])
        .arg(format!(":{port}"))
        .args(["--address", "127.0.0.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting kubectl port-forward")?;
    let stdout = child.stdout.take().context("port-forward stdout")?;
    // "Forwarding from 127.0.0.1:41234 -> 10354"
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .context("kubectl port-forward did not start in 20 s")??
        .context("kubectl port-forward exited")?;
    // Keep reading: kubectl writes a line per connection and dies on a closed pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let local = first
        .strip_prefix("Forwarding from ")
        .and_then(|rest| rest.split_whitespace().next())
        .with_context(|| format!("unexpected port-forward output: {first}"))?
        .to_owned();
    let result = http_get(&local, "/metrics").await;
    let _ = child.kill().await;
    let (code, body) = result?;
    if code != 200 {
        bail!("GET {pod}:{port}/metrics through port-forward: {code}");
    }
    Ok(body)
}

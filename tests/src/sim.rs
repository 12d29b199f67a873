//! Simulated nodes with real agents (`deploy/local/sim-agents.sh`): kwok nodes whose agent
//! runs as a process on this machine, so the control plane's agent path can be exercised
//! on many nodes, and an agent can be killed and brought back.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cluster::{ClusterInfo, repo_root};

/// The admin endpoint's port is the gRPC port plus this (`ADMIN_OFFSET` in the script).
const ADMIN_OFFSET: u32 = 5000;

/// The nodes `PREFIX-000 ...` and their agents; `down` (or drop) removes them.
pub struct SimAgents {
    pub prefix: String,
    pub count: usize,
    state_dir: PathBuf,
}

fn script(args: &[&str]) -> Result<()> {
    script_with(args, &[])
}

fn script_with(args: &[&str], env: &[(&str, &str)]) -> Result<()> {
    let mut command = Command::new(repo_root().join("deploy/local/sim-agents.sh"));
    command.envs(env.iter().copied());
    // Tests run debug agents unless the caller chose a profile (the script's own default,
    // release, is for benchmarks and people).
    if std::env::var_os("STEVEDORE_PROFILE").is_none() {
        command.env("STEVEDORE_PROFILE", "dev");
    }
    let output = command
        .args(args)
        .output()
        .context("running deploy/local/sim-agents.sh")?;
    if !output.status.success() {
        bail!(
            "sim-agents.sh {} failed with {}:\n{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

impl SimAgents {
    /// Creates `count` nodes named `<prefix>-NNN`, each with a running, ready agent.
    pub fn up(cluster: &ClusterInfo, prefix: &str, count: usize) -> Result<Self> {
        if let Err(err) = script(&["up", &count.to_string(), prefix]) {
            // Remove what did come up (nodes, agents), so a failed start leaves nothing.
            let _ = script(&["down", prefix]);
            return Err(err);
        }
        Ok(Self {
            prefix: prefix.to_owned(),
            count,
            state_dir: cluster.state_dir.clone(),
        })
    }

    /// The name of node `i`.
    pub fn node(&self, i: usize) -> String {
        format!("{}-{i:03}", self.prefix)
    }

    /// Kills node `i`'s agent (SIGKILL) and waits until it is dead: its node stays, its
    /// agent stops answering.
    pub fn kill(&self, i: usize) -> Result<()> {
        let pid_file = self.dir().join(format!("{}.pid", self.node(i)));
        let pid = std::fs::read_to_string(&pid_file)
            .with_context(|| format!("reading {}", pid_file.display()))?;
        let status = Command::new("kill")
            .args(["-KILL", pid.trim()])
            .status()
            .context("running kill")?;
        if !status.success() {
            bail!("kill -KILL {} failed", pid.trim());
        }
        // Dying takes a moment; `restart` must not find it still there and skip it.
        let proc_stat = PathBuf::from(format!("/proc/{}/stat", pid.trim()));
        for _ in 0..300 {
            let Ok(stat) = std::fs::read_to_string(&proc_stat) else {
                return Ok(());
            };
            // The state follows the command in parentheses; a zombie is dead.
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            if state.is_some_and(|s| s.starts_with('Z')) {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        bail!(
            "agent process {} still alive 30 s after SIGKILL",
            pid.trim()
        )
    }

    /// The text of node `i`'s agent `/metrics` (its admin endpoint on 127.0.0.1).
    pub async fn metrics(&self, i: usize) -> Result<String> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let port_file = self.dir().join(format!("{}.port", self.node(i)));
        let port: u32 = std::fs::read_to_string(&port_file)
            .with_context(|| format!("reading {}", port_file.display()))?
            .trim()
            .parse()
            .context("agent port")?;
        let addr = format!("127.0.0.1:{}", port + ADMIN_OFFSET);
        let connect = tokio::net::TcpStream::connect(&addr);
        let mut stream = tokio::time::timeout(std::time::Duration::from_secs(5), connect)
            .await
            .with_context(|| format!("connecting to {addr}"))??;
        stream
            .write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        if !response.starts_with("HTTP/1.0 200") && !response.starts_with("HTTP/1.1 200") {
            bail!(
                "GET {addr}/metrics: {}",
                response.lines().next().unwrap_or_default()
            );
        }
        Ok(response)
    }

    fn dir(&self) -> PathBuf {
        self.state_dir.join("sim-agents").join(&self.prefix)
    }

    /// Starts every agent that is not running (after `kill`), from the binary they ran.
    pub fn restart(&self) -> Result<()> {
        script_with(
            &["up", &self.count.to_string(), &self.prefix],
            &[("STEVEDORE_SIM_REUSE_AGENT", "1")],
        )
    }

    /// Stops the agents and deletes the nodes.
    pub fn down(&self) -> Result<()> {
        script(&["down", &self.prefix])
    }
}

impl Drop for SimAgents {
    fn drop(&mut self) {
        if let Err(err) = self.down() {
            eprintln!("removing simulated nodes {}: {err:#}", self.prefix);
        }
    }
}

//! Simulated nodes with real agents (`deploy/local/sim-agents.sh`): kwok nodes whose agent
//! runs as a process on this machine, so the control plane's agent path can be exercised
//! on many nodes, and an agent can be killed and brought back.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cluster::{ClusterInfo, repo_root};

/// The nodes `PREFIX-000 ...` and their agents; `down` (or drop) removes them.
pub struct SimAgents {
    pub prefix: String,
    pub count: usize,
    state_dir: PathBuf,
}

fn script(args: &[&str]) -> Result<()> {
    let output = Command::new(repo_root().join("deploy/local/sim-agents.sh"))
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

    /// Kills node `i`'s agent (SIGKILL): its node stays, its agent stops answering.
    pub fn kill(&self, i: usize) -> Result<()> {
        let pid_file = self
            .state_dir
            .join("sim-agents")
            .join(&self.prefix)
            .join(format!("{}.pid", self.node(i)));
        let pid = std::fs::read_to_string(&pid_file)
            .with_context(|| format!("reading {}", pid_file.display()))?;
        let status = Command::new("kill")
            .args(["-KILL", pid.trim()])
            .status()
            .context("running kill")?;
        if !status.success() {
            bail!("kill -KILL {} failed", pid.trim());
        }
        Ok(())
    }

    /// Starts every agent that is not running (after `kill`).
    pub fn restart(&self) -> Result<()> {
        script(&["up", &self.count.to_string(), &self.prefix])
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

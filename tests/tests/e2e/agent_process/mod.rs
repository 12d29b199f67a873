//! The agent binary as a process of its own on this machine, against the containerd
//! under test (the cluster's unless the test's environment names another): its stdout and stderr captured in a file, its gRPC API on a Unix socket of
//! its own (no token needed there), `/metrics` on a loopback port. Killed with SIGKILL,
//! on purpose or when dropped.

#![allow(
    dead_code,
    reason = "each test binary uses its own part of the helpers"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use stevedore_tests::scratch::free_loopback_addr;
use stevedore_tests::{ClusterInfo, poll_until};
use tonic::transport::Channel;

/// Builds the agent binary into the target directory this test binary was built in, and
/// returns its path. It builds through `deploy/local/lib/binaries.sh` as the deploy and the
/// test build do (the whole workspace, without the variables cargo sets for this test
/// process), so the build is a no-op: a `cargo build -p stevedore-agent` of its own from
/// here resolved features apart and saw `CARGO_MANIFEST_DIR` set, which recompiled ring and
/// all that depends on it, and the next workspace build compiled it all back (minutes of
/// every CI run). Cargo's lock serialises concurrent builds.
fn agent_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    // <target>/<profile>/deps/<test binary>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("the test binary's profile directory")?;
    let target = profile_dir.parent().context("the target directory")?;
    let built = Command::new("bash")
        .args([
            "-c",
            "source deploy/local/lib/binaries.sh && cargo_build_binaries dev -q",
        ])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(stevedore_tests::cluster::repo_root())
        .status()
        .context("running bash to build the agent")?;
    ensure!(
        built.success(),
        "building the workspace's binaries (cargo_build_binaries dev) failed"
    );
    Ok(profile_dir.join("stevedore-agent"))
}

/// A running agent process.
pub struct AgentProcess {
    child: Child,
    dir: PathBuf,
    pub unix: PathBuf,
    /// Health and metrics endpoint.
    pub admin: String,
    pub log: PathBuf,
}

impl AgentProcess {
    /// Starts the agent for the cluster's node (`name` tells test runs' files apart), with
    /// `extra` flags and `RUST_LOG=debug`, and waits until it is ready.
    pub async fn start(cluster: &ClusterInfo, name: &str, extra: &[&str]) -> Result<Self> {
        let binary = tokio::task::spawn_blocking(agent_binary).await??;
        let dir = std::env::temp_dir().join(format!(
            "stevedore-agent-process-{name}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir)?;
        let unix = dir.join("agent.sock");
        let log = dir.join("agent.log");
        let admin = free_loopback_addr()?;
        let grpc = free_loopback_addr()?;
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let child = Command::new(binary)
            .arg("--node-name")
            .arg(&cluster.node_name)
            .arg("--containerd-socket")
            .arg(&cluster.containerd.socket)
            .args(["--containerd-namespace", "k8s.io"])
            .args(["--grpc-addr", &grpc])
            .args(["--health-addr", &admin, "--metrics-addr", &admin])
            .arg("--unix-socket")
            .arg(&unix)
            .args(["--insecure-registry", &cluster.registry])
            .args(["--insecure-registry", &cluster.auth_registry])
            .args(["--max-concurrent-pulls", "3", "--pull-timeout", "120"])
            .args(extra)
            .env("KUBECONFIG", &cluster.kubeconfig)
            .env("RUST_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .context("starting the agent binary")?;
        let mut agent = Self {
            child,
            dir,
            unix,
            admin,
            log,
        };
        let ready = poll_until("the agent process ready", Duration::from_secs(60), || {
            let exited = agent.child.try_wait();
            let admin = agent.admin.clone();
            async move {
                if let Some(status) = exited? {
                    bail!("the agent exited with {status}");
                }
                let (code, _) = stevedore_tests::metrics::http_get(&admin, "/readyz").await?;
                Ok((code == 200).then_some(()))
            }
        })
        .await;
        if let Err(err) = ready {
            bail!(
                "{err:#}\nagent log:\n{}",
                agent.log_text().unwrap_or_default()
            );
        }
        Ok(agent)
    }

    /// A gRPC channel over the agent's Unix socket.
    pub async fn channel(&self) -> Result<Channel> {
        stevedore_tests::grpc::unix_channel(self.unix.clone()).await
    }

    /// What the agent wrote to stdout and stderr so far.
    pub fn log_text(&self) -> Result<String> {
        Ok(std::fs::read_to_string(&self.log)?)
    }

    /// The agent's `/metrics` text.
    pub async fn metrics(&self) -> Result<String> {
        let (code, body) = stevedore_tests::metrics::http_get(&self.admin, "/metrics").await?;
        ensure!(code == 200, "GET /metrics answered {code}");
        Ok(body)
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the agent with SIGKILL (no shutdown of any kind) and reaps it.
    pub fn kill(&mut self) -> Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

//! Faults on the processes under the cluster: kube-apiserver restarted with the arguments
//! it runs with (as `deploy/local/lib/common.sh`'s `start_daemon` started it: `setsid`, its
//! log appended, its pid file rewritten), and a simulated node's agent killed and started
//! again as `sim-agents.sh up` does.

use std::fs::OpenOptions;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};

use super::faults::signal;
use super::pool::Pool;
use crate::TestContext;

const APISERVER: &str = "kube-apiserver";
/// How long the apiserver may take to stop on SIGTERM (stop_daemon waits 20 s too).
const STOP: Duration = Duration::from_secs(20);
const READY: Duration = Duration::from_secs(90);

/// The arguments of a process from its /proc/PID/cmdline text (NUL-separated). Pure.
pub fn argv_of(cmdline: &[u8]) -> Vec<String> {
    cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Whether /proc/PID/stat says the process is gone or a zombie. Pure.
pub fn dead(stat: Option<&str>) -> bool {
    let Some(stat) = stat else { return true };
    // The state follows the command in parentheses.
    let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
    state.is_none_or(|s| s.starts_with('Z'))
}

fn wait_dead(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        if dead(stat.as_deref()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

fn read_pid(file: &Path) -> Result<u32> {
    std::fs::read_to_string(file)
        .with_context(|| format!("reading {}", file.display()))?
        .trim()
        .parse()
        .with_context(|| format!("{} holds no pid", file.display()))
}

pub async fn restart_apiserver(ctx: &TestContext) -> Result<String> {
    let pid_file = ctx.cluster.pid_dir().join(format!("{APISERVER}.pid"));
    let pid = read_pid(&pid_file)?;
    let argv = argv_of(&std::fs::read(format!("/proc/{pid}/cmdline"))?);
    ensure!(
        argv.first().is_some_and(|a| a.ends_with(APISERVER)),
        "pid {pid} of {} is not the apiserver: {argv:?}",
        pid_file.display()
    );
    let log = ctx.cluster.log_dir().join(format!("{APISERVER}.log"));
    let started = Instant::now();
    tokio::task::block_in_place(|| -> Result<()> {
        signal("TERM", pid)?;
        if !wait_dead(pid, STOP) {
            signal("KILL", pid)?;
            ensure!(
                wait_dead(pid, STOP),
                "the apiserver (pid {pid}) outlived SIGKILL"
            );
        }
        let out = OpenOptions::new().create(true).append(true).open(&log)?;
        let child = Command::new("setsid")
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("starting kube-apiserver again")?;
        std::fs::write(&pid_file, format!("{}\n", child.id()))?;
        Ok(())
    })?;
    wait_ready(ctx).await?;
    Ok(format!(
        "restarted the apiserver (pid {pid}), ready again after {:.1?}",
        started.elapsed()
    ))
}

/// Waits until the apiserver's /readyz answers ok.
async fn wait_ready(ctx: &TestContext) -> Result<()> {
    let deadline = Instant::now() + READY;
    while Instant::now() < deadline {
        let output = tokio::process::Command::new(&ctx.cluster.kubectl)
            .arg("--kubeconfig")
            .arg(&ctx.cluster.kubeconfig)
            .args(["get", "--raw", "/readyz"])
            .output()
            .await?;
        if output.status.success() && String::from_utf8_lossy(&output.stdout).trim() == "ok" {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    bail!("the apiserver was not ready {READY:?} after its restart")
}

/// Kills node `node`'s agent (SIGKILL), leaves it down `seconds`, and starts it again.
pub async fn kill_agent(pool: &Pool, node: usize, seconds: u64) -> Result<String> {
    let node = node % pool.sim.count.max(1);
    tokio::task::block_in_place(|| pool.sim.kill(node))?;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    tokio::task::block_in_place(|| pool.sim.restart())?;
    Ok(format!(
        "killed the agent of {} for {seconds} s and started it again",
        pool.sim.node(node)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_splits_at_its_nuls_and_a_zombie_or_missing_process_is_dead() {
        assert_eq!(
            argv_of(b"/opt/kube-apiserver\0--etcd-servers=http://x\0--v=2\0"),
            ["/opt/kube-apiserver", "--etcd-servers=http://x", "--v=2"]
        );
        assert!(argv_of(b"").is_empty());
        assert!(dead(None));
        assert!(dead(Some("42 (kube-apiserver) Z 1 42")));
        assert!(!dead(Some("42 (kube apiserver) S 1 42")));
    }
}

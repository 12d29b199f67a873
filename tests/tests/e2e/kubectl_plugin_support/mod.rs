//! Runs `kubectl stevedore ...` as a user would: kubectl from the cluster's binaries finds
//! the plugin on PATH (the workspace's built `kubectl-stevedore`), in a pseudo-terminal
//! (`script`) when the test wants the progress bars.
#![allow(dead_code, reason = "each suite uses its own subset of these helpers")]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use stevedore_tests::TestContext;
use tokio::process::Command;

/// Longest any one plugin run may take in these tests.
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// What a run printed and how it ended.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(&self) -> Result<&Self> {
        ensure!(self.code == 0, "exit {}: {self:?}", self.code);
        Ok(self)
    }
}

/// The directory of the built plugin: beside the test binary's `deps/` (cargo's layout),
/// or `STEVEDORE_KUBECTL_PLUGIN_DIR`.
fn plugin_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("STEVEDORE_KUBECTL_PLUGIN_DIR") {
        return Ok(dir.into());
    }
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .context("the test binary has no target directory")?
        .to_path_buf();
    ensure!(
        dir.join("kubectl-stevedore").is_file(),
        "no kubectl-stevedore in {}: build it first (cargo build -p kubectl-stevedore --locked)",
        dir.display()
    );
    Ok(dir)
}

/// PATH with the plugin's and kubectl's directories first.
fn path_env(ctx: &TestContext) -> Result<std::ffi::OsString> {
    let kubectl_dir = ctx
        .cluster
        .kubectl
        .parent()
        .context("kubectl has no directory")?
        .to_path_buf();
    let mut dirs = vec![plugin_dir()?, kubectl_dir];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    Ok(std::env::join_paths(dirs)?)
}

fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

async fn run(ctx: &TestContext, program: &str, args: &[String]) -> Result<Run> {
    let mut command = Command::new(program);
    command
        .args(args)
        .env("PATH", path_env(ctx)?)
        // The cluster's kubeconfig, as a user would have it: the suite reads it from the
        // cluster's env file, so it need not be in this process's environment.
        .env("KUBECONFIG", &ctx.cluster.kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(RUN_LIMIT, command.output())
        .await
        .with_context(|| format!("{program} {args:?} ran past {RUN_LIMIT:?}"))??;
    Ok(Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

fn plugin_args(ctx: &TestContext, args: &[&str]) -> Vec<String> {
    let mut all = vec!["stevedore".to_owned()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    all.extend(["-n".to_owned(), ctx.namespace.clone()]);
    all
}

/// `kubectl stevedore <args> -n <test namespace>`, output not a terminal.
pub async fn kubectl_stevedore(ctx: &TestContext, args: &[&str]) -> Result<Run> {
    run(ctx, "kubectl", &plugin_args(ctx, args)).await
}

/// The same in a pseudo-terminal (`script -qec`); stdout is what the terminal showed.
pub async fn kubectl_stevedore_in_terminal(ctx: &TestContext, args: &[&str]) -> Result<Run> {
    let line = std::iter::once("kubectl".to_owned())
        .chain(plugin_args(ctx, args))
        .map(|w| shell_quote(&w))
        .collect::<Vec<_>>()
        .join(" ");
    let args = ["-qec".to_owned(), line, "/dev/null".to_owned()];
    run(ctx, "script", &args).await
}

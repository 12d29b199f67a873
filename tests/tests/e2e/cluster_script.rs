//! Bad input and faults of `deploy/local/cluster.sh`: it stops with a message that names
//! the component, the value or the port, and never touches the running cluster.

use std::process::{Command, Output};

use anyhow::{Result, ensure};
use stevedore_tests::cluster::{cluster, cluster_script};

fn run(args: &[&str], envs: &[(&str, &str)]) -> Result<Output> {
    let mut cmd = Command::new(cluster_script());
    cmd.args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    Ok(cmd.output()?)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn unknown_command_prints_usage_and_fails() -> Result<()> {
    let out = run(&["launch"], &[])?;
    ensure!(out.status.code() == Some(2), "exit {:?}", out.status);
    ensure!(String::from_utf8_lossy(&out.stdout).contains("up [--fake-nodes N]"));
    Ok(())
}

#[test]
fn non_numeric_fake_nodes_is_refused_naming_the_value() -> Result<()> {
    let out = run(&["up", "--fake-nodes", "many"], &[])?;
    ensure!(!out.status.success());
    let err = stderr(&out);
    ensure!(
        err.contains("--fake-nodes") && err.contains("'many'"),
        "{err}"
    );
    Ok(())
}

#[test]
fn a_real_node_count_outside_one_to_fifty_is_refused_naming_the_value() -> Result<()> {
    for bad in ["0", "51", "three", "-1"] {
        let out = run(&["up", "--real-nodes", bad], &[])?;
        ensure!(!out.status.success(), "--real-nodes {bad} was accepted");
        let err = stderr(&out);
        ensure!(
            err.contains("--real-nodes") && err.contains(&format!("'{bad}'")),
            "{err}"
        );
    }
    Ok(())
}

/// `node remove` takes only the last-added worker away (workers stay numbered 1..N), so a
/// name that is not that worker is refused, naming it, before anything is stopped; an
/// unknown `node` command is refused by name.
#[test]
fn node_commands_refuse_what_they_cannot_do_naming_it() -> Result<()> {
    let out = run(&["node", "remove", "not-a-worker"], &[])?;
    ensure!(!out.status.success(), "removing not-a-worker was accepted");
    let err = stderr(&out);
    ensure!(
        err.contains("'not-a-worker'")
            || err.contains("no real worker node")
            || err.contains("not up"),
        "{err}"
    );
    let out = run(&["node", "grow"], &[])?;
    ensure!(!out.status.success(), "node grow was accepted");
    let err = stderr(&out);
    ensure!(err.contains("'grow'") || err.contains("not up"), "{err}");
    Ok(())
}

#[test]
fn unknown_up_flag_is_refused_naming_it() -> Result<()> {
    let out = run(&["up", "--nodes", "3"], &[])?;
    ensure!(!out.status.success());
    ensure!(stderr(&out).contains("--nodes"), "{}", stderr(&out));
    Ok(())
}

#[test]
fn a_containerd_other_than_1_or_2_is_refused_naming_the_value() -> Result<()> {
    let out = run(&["up", "--containerd", "1.7"], &[])?;
    ensure!(!out.status.success());
    let err = stderr(&out);
    ensure!(
        err.contains("--containerd") && err.contains("'1.7'"),
        "{err}"
    );
    Ok(())
}

/// The running cluster's containerd is never swapped under its kubelet: `up` asking for
/// the other one stops before touching anything and says to run `down` first.
#[tokio::test]
async fn up_asking_for_the_other_containerd_is_refused() -> Result<()> {
    let cluster = cluster().await?;
    let running = std::fs::read_to_string(cluster.state_dir.join("containerd-major"))
        .map_or_else(|_| "1".to_owned(), |major| major.trim().to_owned());
    let other = if running == "2" { "1" } else { "2" };
    let out = run(&["up", "--containerd", other], &[])?;
    ensure!(!out.status.success(), "up --containerd {other} succeeded");
    let err = stderr(&out);
    ensure!(
        err.contains(&format!("runs containerd {running}")) && err.contains("down"),
        "{err}"
    );
    Ok(())
}

#[test]
fn an_unknown_containerd2_command_is_refused_naming_it() -> Result<()> {
    let out = run(&["containerd2", "start"], &[])?;
    ensure!(!out.status.success());
    let err = stderr(&out);
    ensure!(
        err.contains("start") && err.contains("up, down or env"),
        "{err}"
    );
    Ok(())
}

/// A second cluster (another state directory) on this machine finds etcd's port taken by
/// the running one and stops naming the component and the port, without waiting.
#[tokio::test]
async fn up_with_a_taken_port_names_the_component_and_port() -> Result<()> {
    cluster().await?;
    let state = std::env::temp_dir().join(format!("stevedore-second-{}", std::process::id()));
    let state_str = state.to_string_lossy().into_owned();
    let out = tokio::task::spawn_blocking(move || {
        run(&["up"], &[("STEVEDORE_STATE_DIR", state_str.as_str())])
    })
    .await??;
    std::fs::remove_dir_all(&state).ok();
    ensure!(!out.status.success(), "a second cluster cannot start");
    let err = stderr(&out);
    ensure!(
        err.contains("port 2379 needed by etcd is already in use"),
        "{err}"
    );
    Ok(())
}

/// The run command ends with `cluster.sh plugin`: the `kubectl stevedore` plugin, built in
/// the control plane's cargo invocation, is linked into the state directory's `bin`, and a
/// shell that sources the env file (as the README says) runs it through kubectl.
#[tokio::test]
async fn the_plugin_step_puts_kubectl_stevedore_on_the_env_files_path() -> Result<()> {
    let info = cluster().await?;
    let out = tokio::task::spawn_blocking(|| run(&["plugin"], &[])).await??;
    ensure!(
        out.status.success(),
        "cluster.sh plugin failed: {}",
        stderr(&out)
    );
    let state_dir = info.state_dir.to_string_lossy().into_owned();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("bash")
            .args([
                "-c",
                r#"source "$1/env" && command -v kubectl-stevedore && kubectl stevedore --help"#,
                "plugin-check",
                &state_dir,
            ])
            .output()
    })
    .await??;
    let said = String::from_utf8_lossy(&out.stdout);
    let expected_path = info.state_dir.join("bin/kubectl-stevedore");
    ensure!(
        out.status.success() && said.lines().next() == Some(&*expected_path.to_string_lossy()),
        "kubectl-stevedore is not the one on the env file's PATH: {said}{}",
        stderr(&out)
    );
    ensure!(said.contains("rollout"), "kubectl stevedore --help: {said}");
    Ok(())
}

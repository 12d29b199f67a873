//! The local cluster every integration test runs against: brought up once per test run by
//! `deploy/local/cluster.sh up` (a no-op when it already runs) and described by the env
//! file that script writes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::OnceCell;

use crate::containerd::Containerd;

/// Simulated (kwok) nodes every test run asks for.
pub const FAKE_NODES: usize = 2;

/// Facts about the running local cluster, read from `cluster.sh env`.
#[derive(Debug, Clone)]
pub struct ClusterInfo {
    pub kubeconfig: PathBuf,
    /// `host:port` of the local OCI registry holding the test images.
    pub registry: String,
    /// `host:port` of the registry that demands a username and password.
    pub auth_registry: String,
    pub auth_registry_user: String,
    pub auth_registry_password_file: PathBuf,
    /// Name of the node served by the real kubelet.
    pub node_name: String,
    /// That node's InternalIP (on a local bridge).
    pub node_ip: String,
    pub state_dir: PathBuf,
    pub kubectl: PathBuf,
    /// The cluster's own containerd socket (the one kubelet uses).
    pub containerd_sock: PathBuf,
    /// The containerd the agent's suites run against: the cluster's unless the test's
    /// environment names another (see [`crate::containerd`]).
    pub containerd: Containerd,
    /// grpcurl, built by `cluster.sh up`, to call the agent as an operator would.
    pub grpcurl: PathBuf,
    /// helm, built by `cluster.sh up`, for the chart's suite; `None` when the env file was
    /// written by a checkout that does not build it.
    pub helm: Option<PathBuf>,
}

impl ClusterInfo {
    /// Reference of a test image in the local registry, e.g. `image("web:v1")`.
    pub fn image(&self, name_and_tag: &str) -> String {
        format!("{}/stevedore/{name_and_tag}", self.registry)
    }

    /// Name of the `i`-th simulated node.
    pub fn fake_node(&self, i: usize) -> String {
        format!("kwok-node-{i}")
    }

    /// Directory of the component logs (`<component>.log`).
    pub fn log_dir(&self) -> PathBuf {
        self.state_dir.join("logs")
    }

    /// The cluster CA, which also signs the deployed agent's serving certificate.
    pub fn ca_cert(&self) -> PathBuf {
        self.state_dir.join("pki/ca.crt")
    }

    pub fn pid_dir(&self) -> PathBuf {
        self.state_dir.join("pids")
    }

    pub async fn client(&self) -> Result<kube::Client> {
        Ok(kube::Client::try_from(self.config().await?)?)
    }

    /// A client that returns a 429 (a budget's refusal) instead of retrying it, as
    /// kubectl does; `client()` retries 429, 503 and 504 with backoff, as kube does.
    pub async fn client_without_retries(&self) -> Result<kube::Client> {
        let mut config = self.config().await?;
        config.default_retry = false;
        Ok(kube::Client::try_from(config)?)
    }

    async fn config(&self) -> Result<kube::Config> {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)
            .with_context(|| format!("reading {}", self.kubeconfig.display()))?;
        Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?)
    }
}

/// The repository root (the workspace holding `deploy/`).
///
/// The `CARGO_MANIFEST_DIR` the test runs with comes first (cargo and `tests/run.sh` set
/// it): cargo does not rebuild a test binary when the checkout moves, so the directory
/// compiled in may be another clone's, or gone.
pub fn repo_root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// The value `deploy/local/versions.env` pins for `key` (e.g. `HELM_VERSION`).
pub fn pinned_version(key: &str) -> Result<String> {
    let path = repo_root().join("deploy/local/versions.env");
    let versions =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let prefix = format!("{key}=");
    versions
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(str::to_owned)
        .with_context(|| format!("deploy/local/versions.env pins no {key}"))
}

pub fn cluster_script() -> PathBuf {
    repo_root().join("deploy/local/cluster.sh")
}

/// Runs `cluster.sh ARGS`, failing with its output when it exits non-zero.
pub fn run_cluster_script(args: &[&str]) -> Result<String> {
    // `flock` serialises concurrent test binaries so only one of them runs `up` at a time.
    // `--close`: the daemons `up` starts (kwok, ...) must not inherit the locked file, or
    // they hold the lock for as long as they live and every later test run waits forever.
    let lock = std::env::temp_dir().join("stevedore-local-cluster.lock");
    let output = Command::new("flock")
        .arg("--close")
        .arg(&lock)
        .arg(cluster_script())
        .args(args)
        .output()
        .context("running deploy/local/cluster.sh (is util-linux's flock installed?)")?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!(
            "cluster.sh {} failed with {}\nstdout:\n{stdout}\nstderr:\n{}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(stdout)
}

/// Parses the `export KEY=VALUE` lines `cluster.sh env` prints.
pub fn parse_env(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("export "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn info_from_env(
    env: &HashMap<String, String>,
    process_env: &HashMap<String, String>,
) -> Result<ClusterInfo> {
    let get = |key: &str| {
        env.get(key)
            .cloned()
            .with_context(|| format!("cluster.sh env does not set {key}"))
    };
    let containerd_sock = PathBuf::from(get("STEVEDORE_CONTAINERD_SOCK")?);
    // Env files of checkouts before containerd 2.x name no ctr: theirs is Debian's.
    let cluster_ctr = PathBuf::from(env.get("STEVEDORE_CTR").map_or("ctr", String::as_str));
    Ok(ClusterInfo {
        kubeconfig: get("KUBECONFIG")?.into(),
        registry: get("STEVEDORE_REGISTRY")?,
        auth_registry: get("STEVEDORE_AUTH_REGISTRY")?,
        auth_registry_user: get("STEVEDORE_AUTH_REGISTRY_USER")?,
        auth_registry_password_file: get("STEVEDORE_AUTH_REGISTRY_PASSWORD_FILE")?.into(),
        node_name: get("STEVEDORE_NODE_NAME")?,
        node_ip: get("STEVEDORE_NODE_IP")?,
        state_dir: get("STEVEDORE_STATE_DIR")?.into(),
        kubectl: PathBuf::from(get("STEVEDORE_K8S_BIN")?).join("kubectl"),
        containerd_sock: containerd_sock.clone(),
        containerd: Containerd::choose(&containerd_sock, &cluster_ctr, process_env),
        grpcurl: get("STEVEDORE_GRPCURL")?.into(),
        helm: env.get("STEVEDORE_HELM").map(PathBuf::from),
    })
}

static CLUSTER: OnceCell<ClusterInfo> = OnceCell::const_new();

/// The running cluster, started on first use in this process.
pub async fn cluster() -> Result<&'static ClusterInfo> {
    CLUSTER
        .get_or_try_init(|| async {
            tokio::task::spawn_blocking(|| {
                let fake_nodes = FAKE_NODES.to_string();
                run_cluster_script(&["up", "--fake-nodes", &fake_nodes])?;
                let process_env = std::env::vars().collect();
                info_from_env(&parse_env(&run_cluster_script(&["env"])?), &process_env)
            })
            .await?
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_env_exports_and_ignores_other_lines() {
        let env = parse_env(
            "export KUBECONFIG=/s/kubeconfig\nexport STEVEDORE_REGISTRY=127.0.0.1:5000\n# note\nPATH=x\n",
        );
        assert_eq!(
            env.get("KUBECONFIG").map(String::as_str),
            Some("/s/kubeconfig")
        );
        assert_eq!(
            env.get("STEVEDORE_REGISTRY").map(String::as_str),
            Some("127.0.0.1:5000")
        );
        assert!(!env.contains_key("PATH"));
    }

    #[test]
    fn missing_key_is_named_in_the_error() {
        let env = parse_env("export KUBECONFIG=/k\nexport STEVEDORE_CONTAINERD_SOCK=/c.sock\n");
        let err = info_from_env(&env, &HashMap::new()).expect_err("registry is missing");
        assert!(err.to_string().contains("STEVEDORE_REGISTRY"), "{err}");
    }
}

//! The Helm chart (`deploy/helm/stevedore`) as a person uses it: `helm lint`, `helm
//! template`, `helm install|upgrade|uninstall`, through the helm binary `cluster.sh up`
//! builds, and the swap between the kustomize deployment and a Helm release.

use std::path::PathBuf;
use std::process::Stdio;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::cluster::{ClusterInfo, repo_root};

/// The chart in this repository.
pub fn chart_dir() -> PathBuf {
    repo_root().join("deploy/helm/stevedore")
}

/// helm and kubectl against the local cluster.
#[derive(Debug, Clone)]
pub struct Helm {
    helm: PathBuf,
    kubectl: PathBuf,
    kubeconfig: PathBuf,
}

impl Helm {
    pub fn new(cluster: &ClusterInfo) -> Result<Self> {
        let helm = cluster.helm.clone().context(
            "cluster.sh env does not set STEVEDORE_HELM: run `deploy/local/cluster.sh up` from this checkout, which builds helm",
        )?;
        Ok(Self {
            helm,
            kubectl: cluster.kubectl.clone(),
            kubeconfig: cluster.kubeconfig.clone(),
        })
    }

    /// Runs `helm ARGS`, returning its standard output; fails with its output otherwise.
    pub async fn helm(&self, args: &[&str]) -> Result<String> {
        run(&self.helm, args, &self.kubeconfig, None).await
    }

    /// Runs `kubectl ARGS` with `stdin` as its input.
    pub async fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Result<String> {
        run(&self.kubectl, args, &self.kubeconfig, stdin).await
    }

    /// `helm template` of the chart into `namespace` with `--set` values, as YAML text.
    pub async fn template(&self, namespace: &str, sets: &[&str]) -> Result<String> {
        let chart = chart_dir();
        let chart = chart.to_string_lossy();
        let mut args = vec!["template", "stevedore", &chart, "--namespace", namespace];
        for set in sets {
            args.extend(["--set", set]);
        }
        self.helm(&args).await
    }
}

/// The objects of a multi-document YAML stream (documents that are empty are skipped).
pub fn objects(yaml: &str) -> Result<Vec<Value>> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(yaml).context("parsing the rendered chart as YAML")?;
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// The rendered object of `kind` named `name`.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Result<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .with_context(|| format!("the chart renders no {kind} {name}"))
}

/// The value of environment variable `name` of the first container of a workload.
pub fn container_env<'a>(workload: &'a Value, name: &str) -> Option<&'a Value> {
    workload["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .map(|e| &e["value"])
}

async fn run(
    program: &PathBuf,
    args: &[&str],
    kubeconfig: &PathBuf,
    stdin: Option<&str>,
) -> Result<String> {
    let mut child = Command::new(program)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes()).await?;
    }
    let output = child.wait_with_output().await?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!(
            "{} {} failed with {}: {}{}",
            program.display(),
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr),
            stdout
        );
    }
    Ok(stdout)
}

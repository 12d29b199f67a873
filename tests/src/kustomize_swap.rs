//! Taking the kustomize-deployed Stevedore (`deploy/local/{agent,controlplane}`) off the
//! cluster for a while and putting it back exactly as it was: the live objects are saved
//! before they are deleted and created again from that copy (same images, same settings),
//! by `restore` or, if a test fails or panics first, when the guard is dropped.
//!
//! Blocking (std::process) on purpose: the restore must also run from `Drop`.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::cluster::{ClusterInfo, repo_root};

/// The kustomize overlays `cluster.sh deploy` applies.
const OVERLAYS: [&str; 2] = ["deploy/local/agent", "deploy/local/controlplane"];

/// Server-set fields a create must not carry.
const SERVER_FIELDS: [&str; 6] = [
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
];

/// The saved kustomize deployment; restores it when dropped unless `restore` ran.
pub struct KustomizeSwap {
    kubectl: PathBuf,
    kubeconfig: PathBuf,
    saved: Value,
    restored: bool,
}

impl KustomizeSwap {
    /// Saves the live objects of both overlays, then deletes them and waits until the
    /// agent's and control plane's pods are gone.
    pub fn take_down(cluster: &ClusterInfo) -> Result<Self> {
        let mut swap = Self {
            kubectl: cluster.kubectl.clone(),
            kubeconfig: cluster.kubeconfig.clone(),
            saved: Value::Null,
            restored: true,
        };
        let rendered = swap.rendered_overlays()?;
        let live = swap.kubectl(&["get", "-o", "json", "-f", "-"], Some(&rendered))?;
        let mut saved: Value =
            serde_json::from_str(&live).context("parsing kubectl get -o json")?;
        for item in saved["items"].as_array_mut().into_iter().flatten() {
            strip_server_fields(item);
        }
        swap.saved = saved;
        swap.restored = false;
        swap.kubectl(
            &["delete", "--wait=true", "--cascade=foreground", "-f", "-"],
            Some(&rendered),
        )?;
        Ok(swap)
    }

    /// The images the saved agent DaemonSet and control-plane Deployment run.
    pub fn images(&self) -> Result<(String, String)> {
        let image_of = |kind: &str| {
            self.saved["items"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|o| o["kind"] == kind)
                .and_then(|o| o["spec"]["template"]["spec"]["containers"][0]["image"].as_str())
                .map(str::to_owned)
                .with_context(|| format!("the kustomize deployment has no {kind} with an image"))
        };
        Ok((image_of("DaemonSet")?, image_of("Deployment")?))
    }

    /// Creates the saved objects again (deleting first whatever holds their names now)
    /// and waits for both workloads to roll out.
    pub fn restore(&mut self) -> Result<()> {
        if self.restored {
            return Ok(());
        }
        let saved = serde_json::to_string(&self.saved)?;
        self.kubectl(
            &["delete", "--ignore-not-found", "--wait=true", "-f", "-"],
            Some(&saved),
        )?;
        self.kubectl(&["create", "-f", "-"], Some(&saved))?;
        self.restored = true;
        for workload in ["ds/stevedore-agent", "deploy/stevedore-controlplane"] {
            self.kubectl(
                &[
                    "-n",
                    "kube-system",
                    "rollout",
                    "status",
                    workload,
                    "--timeout=180s",
                ],
                None,
            )?;
        }
        Ok(())
    }

    fn rendered_overlays(&self) -> Result<String> {
        let mut all = String::new();
        for overlay in OVERLAYS {
            let dir = repo_root().join(overlay);
            all.push_str(&self.kubectl(&["kustomize", &dir.to_string_lossy()], None)?);
            all.push_str("\n---\n");
        }
        Ok(all)
    }

    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Result<String> {
        kubectl(&self.kubectl, &self.kubeconfig, args, stdin)
    }
}

impl Drop for KustomizeSwap {
    fn drop(&mut self) {
        if let Err(err) = self.restore() {
            eprintln!(
                "restoring the kustomize deployment of Stevedore failed: {err:#}; run `deploy/local/cluster.sh deploy`"
            );
        }
    }
}

fn strip_server_fields(object: &mut Value) {
    if let Some(meta) = object["metadata"].as_object_mut() {
        for field in SERVER_FIELDS {
            meta.remove(field);
        }
    }
    if let Some(object) = object.as_object_mut() {
        object.remove("status");
    }
}

fn kubectl(
    program: &PathBuf,
    kubeconfig: &PathBuf,
    args: &[&str],
    stdin: Option<&str>,
) -> Result<String> {
    use std::io::Write as _;
    let mut child = Command::new(program)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(stdin.unwrap_or_default().as_bytes())?;
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!(
            "kubectl {} failed with {}: {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_saved_object_keeps_its_spec_and_annotations_but_no_server_fields() {
        let mut object = json!({
            "kind": "DaemonSet",
            "metadata": {
                "name": "stevedore-agent", "uid": "u", "resourceVersion": "7",
                "creationTimestamp": "t", "generation": 3, "managedFields": [],
                "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "{}" }
            },
            "spec": { "template": {} },
            "status": { "numberReady": 1 }
        });
        strip_server_fields(&mut object);
        assert_eq!(
            object,
            json!({
                "kind": "DaemonSet",
                "metadata": {
                    "name": "stevedore-agent",
                    "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "{}" }
                },
                "spec": { "template": {} }
            })
        );
    }
}

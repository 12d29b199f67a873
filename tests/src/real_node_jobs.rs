//! BroadcastJobs on the real nodes (tests/src/real_nodes.rs): a job of `web` whose pods
//! tolerate the workers' taint and keep off kwok's nodes, and the runs its pods made, for
//! the suites that follow a job across real nodes (`real_nodes_workloads`,
//! `real_nodes_join`).

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::{Value, json};

use crate::real_nodes::{real_node_affinity, worker_toleration};
use crate::{TestContext, poll_until};

const WAIT: Duration = Duration::from_secs(180);

/// A BroadcastJob `name` of a 2-second `web` pod on the real nodes (or those labelled
/// `node_label=yes`), with `spec`'s other fields.
pub fn broadcast_job(
    ctx: &TestContext,
    name: &str,
    spec: Value,
    node_label: Option<&str>,
) -> Value {
    let mut pod = json!({
        "affinity": real_node_affinity(),
        "tolerations": worker_toleration(),
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [{
            "name": "main",
            "image": ctx.cluster.image("web:v1"),
            "command": ["sh", "-c", "sleep 2"],
        }],
    });
    if let Some(label) = node_label {
        pod["nodeSelector"] = json!({ label: "yes" });
    }
    let mut spec = spec;
    spec["template"] = json!({ "metadata": { "labels": { "job": name } }, "spec": pod });
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "BroadcastJob",
        "metadata": { "name": name },
        "spec": spec,
    })
}

pub async fn create_job(ctx: &TestContext, object: Value) -> Result<()> {
    let kind = GroupVersionKind::gvk("apps.kruise.io", "v1alpha1", "BroadcastJob");
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &ctx.namespace,
        &ApiResource::from_gvk(&kind),
    );
    jobs.create(&PostParams::default(), &serde_json::from_value(object)?)
        .await?;
    Ok(())
}

/// A finished pod of a job: its node and when its container ran.
#[derive(Debug)]
pub struct Run {
    pub node: String,
    pub started: String,
    pub finished: String,
}

pub async fn runs(ctx: &TestContext, job: &str) -> Result<Vec<Run>> {
    let params = ListParams::default().labels(&format!("job={job}"));
    let mut found = Vec::new();
    for pod in ctx.api::<Pod>().list(&params).await?.items {
        let node = (pod.spec.as_ref()).and_then(|s| s.node_name.clone());
        let status = pod.status.unwrap_or_default();
        let ended = (status.container_statuses.unwrap_or_default().into_iter())
            .find_map(|c| c.state?.terminated);
        if let Some(ended) = ended {
            found.push(Run {
                node: node.unwrap_or_default(),
                started: ended
                    .started_at
                    .map(|t| t.0.to_string())
                    .unwrap_or_default(),
                finished: ended
                    .finished_at
                    .map(|t| t.0.to_string())
                    .unwrap_or_default(),
            });
        }
    }
    found.sort_by(|a, b| a.started.cmp(&b.started));
    Ok(found)
}

/// Waits until the job's pods have run on exactly `nodes`.
pub async fn wait_for_runs_on(ctx: &TestContext, job: &str, nodes: &[String]) -> Result<()> {
    let want: BTreeSet<String> = nodes.iter().cloned().collect();
    poll_until(&format!("{job} finished on {want:?}"), WAIT, || async {
        let on: BTreeSet<String> = runs(ctx, job).await?.into_iter().map(|r| r.node).collect();
        Ok((on == want).then_some(()))
    })
    .await
}

//! The Helm chart `deploy/helm/stevedore` installed: it installs, upgrades and uninstalls
//! Stevedore on the local cluster in place of the kustomize deployment (which is put back
//! afterwards, even on failure). How it renders is `helm_chart`.
//!
//! Runs alone: it takes the deployed Stevedore off the cluster while the Helm release
//! stands in.

use crate::cloneset_support;

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use futures::FutureExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};
use stevedore_tests::helm::{Helm, chart_dir};
use stevedore_tests::kustomize_swap::KustomizeSwap;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use cloneset_support::{Nodes, ROLLOUT};

const RELEASE: &str = "stevedore";

/// The install → upgrade → uninstall path a platform team takes, with the locally built
/// images, in place of the kustomize deployment (restored afterwards, even on failure).
#[tokio::test]
async fn install_upgrade_and_uninstall_replace_the_kustomize_deployment() -> Result<()> {
    run_in_namespace("helm-release", |ctx| async move {
        let helm = Helm::new(ctx.cluster)?;
        let mut kustomize = KustomizeSwap::take_down(ctx.cluster)?;
        let (agent, controlplane) = kustomize.images()?;
        let outcome = AssertUnwindSafe(release_lifecycle(&ctx, &helm, &agent, &controlplane))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err(anyhow!("the release lifecycle panicked")));
        if outcome.is_err() {
            let _ = helm
                .helm(&["uninstall", RELEASE, "-n", &ctx.namespace, "--wait"])
                .await;
        }
        match (outcome, kustomize.restore()) {
            (Err(failed), Err(restore)) => Err(failed.context(format!(
                "restoring the kustomize deployment failed too: {restore:#}"
            ))),
            (outcome, restored) => outcome.and(restored),
        }
    })
    .await
}

const WEB: &str = "web";

async fn release_lifecycle(
    ctx: &TestContext,
    helm: &Helm,
    agent: &str,
    controlplane: &str,
) -> Result<()> {
    let chart = chart_dir().to_string_lossy().into_owned();
    let values = std::env::temp_dir().join(format!("{}-values.json", ctx.namespace));
    std::fs::write(&values, local_values(ctx, agent, controlplane)?.to_string())?;
    let values_arg = values.to_string_lossy().into_owned();
    let installed = helm
        .helm(&[
            "install",
            RELEASE,
            &chart,
            "-n",
            &ctx.namespace,
            "-f",
            &values_arg,
            "--wait",
            "--timeout",
            "5m",
        ])
        .await;
    let _ = std::fs::remove_file(&values);
    installed?;
    budgets_convert_through_the_release(ctx, helm).await?;
    let uids = smoke(ctx).await?;
    upgrade_keeps_the_workload(ctx, helm, &chart, &uids).await?;
    uninstall_leaves_only_the_crds(ctx, helm).await
}

/// The release's control plane points the PodUnavailableBudget CRD's conversion webhook
/// at its own namespace (the CRD ships with kube-system), so `v1beta1` reads work.
async fn budgets_convert_through_the_release(ctx: &TestContext, helm: &Helm) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let crd = crds.get("podunavailablebudgets.policy.kruise.io").await?;
    let client_config = crd
        .spec
        .conversion
        .and_then(|c| c.webhook)
        .and_then(|w| w.client_config)
        .context("the PodUnavailableBudget CRD has no conversion webhook")?;
    let namespace = client_config.service.map(|s| s.namespace);
    ensure!(
        namespace.as_deref() == Some(ctx.namespace.as_str()),
        "the conversion webhook calls the namespace {namespace:?}, not the release's"
    );
    ensure!(
        client_config.ca_bundle.is_some(),
        "the conversion webhook has no caBundle"
    );
    let get = [
        "get",
        "podunavailablebudgets.v1beta1.policy.kruise.io",
        "-n",
        &ctx.namespace,
    ];
    helm.kubectl(&get, None).await.map(|_| ())
}

/// A CloneSet on the kubelet node rolls out, and an image change is done in place through
/// the agent (whose certificate the release's control plane signed). Returns its pods' UIDs.
async fn smoke(ctx: &TestContext) -> Result<Vec<String>> {
    wait_for_leader(ctx).await?;
    report_rss();
    let web = cloneset_support::web_cloneset(ctx, WEB, 2, "InPlaceIfPossible", Nodes::Kubelet);
    cloneset_support::apply(ctx, &web).await?;
    cloneset_support::wait_rolled_out(ctx, WEB, ROLLOUT).await?;
    let uids = pod_uids(ctx, WEB).await?;
    cloneset_support::set_image(ctx, WEB, &ctx.cluster.image("web:v2")).await?;
    cloneset_support::wait_rolled_out(ctx, WEB, ROLLOUT).await?;
    ensure!(
        pod_uids(ctx, WEB).await? == uids,
        "the in-place update recreated pods"
    );
    Ok(uids)
}

/// `helm upgrade` with a changed value rolls the control plane (a new leader takes over)
/// and leaves the CloneSet's pods alone; the new replicas then reconcile it.
async fn upgrade_keeps_the_workload(
    ctx: &TestContext,
    helm: &Helm,
    chart: &str,
    uids: &[String],
) -> Result<()> {
    let leader = wait_for_leader(ctx).await?;
    let old_replicas = controlplane_pods(ctx).await?;
    helm.helm(&[
        "upgrade",
        RELEASE,
        chart,
        "-n",
        &ctx.namespace,
        "--reuse-values",
        "--set",
        "log.level=debug",
        "--wait",
        "--timeout",
        "5m",
    ])
    .await?;
    let new_replicas = controlplane_pods(ctx).await?;
    ensure!(
        new_replicas.iter().all(|p| !old_replicas.contains(p)),
        "the control plane did not roll: {old_replicas:?} -> {new_replicas:?}"
    );
    let new_leader = wait_for_leader(ctx).await?;
    ensure!(
        new_leader != leader,
        "the leader {leader} is still in charge after the upgrade"
    );
    ensure!(
        pod_uids(ctx, WEB).await? == uids,
        "the upgrade disrupted the CloneSet's pods"
    );
    let scale = json!([{ "op": "replace", "path": "/spec/replicas", "value": 3 }]);
    cloneset_support::json_patch(ctx, WEB, scale).await?;
    cloneset_support::wait_rolled_out(ctx, WEB, ROLLOUT).await?;
    Ok(())
}

/// `helm uninstall` removes every object of the release; the CRDs stay, as Helm keeps them.
async fn uninstall_leaves_only_the_crds(ctx: &TestContext, helm: &Helm) -> Result<()> {
    ctx.api::<stevedore_api::CloneSet>()
        .delete(WEB, &DeleteParams::foreground())
        .await?;
    poll_until("the CloneSet's pods gone", ROLLOUT, || async {
        Ok(cloneset_support::pods_of(ctx, WEB)
            .await?
            .is_empty()
            .then_some(()))
    })
    .await?;
    let ns = ctx.namespace.as_str();
    let manifest = helm.helm(&["get", "manifest", RELEASE, "-n", ns]).await?;
    helm.helm(&["uninstall", RELEASE, "-n", ns, "--wait"])
        .await?;
    let get_left = ["get", "--ignore-not-found", "-o", "name", "-f", "-"];
    let left = helm.kubectl(&get_left, Some(&manifest)).await?;
    ensure!(left.trim().is_empty(), "helm uninstall left: {left}");
    // What the control plane made at run time (its Lease, the CA Secrets) is owned by its
    // Deployment, so the garbage collector removes it after Helm removed the Deployment.
    let gone = poll_until(
        "the control plane's Lease and CA Secrets deleted",
        ROLLOUT,
        || async { Ok(runtime_objects(ctx).await?.is_empty().then_some(())) },
    )
    .await;
    if gone.is_err() {
        let left = runtime_objects(ctx).await?;
        return Err(anyhow!(
            "helm uninstall left what the control plane made: {left:?}"
        ));
    }
    let stevedore = ListParams::default().labels("app.kubernetes.io/part-of=stevedore");
    let pods = ctx.api::<Pod>().list(&stevedore).await?.items;
    ensure!(
        pods.iter().all(|p| p.metadata.deletion_timestamp.is_some()),
        "Stevedore pods left running"
    );
    let crds = [
        "get",
        "crd",
        "clonesets.apps.kruise.io",
        "imagelists.stevedore.dev",
    ];
    helm.kubectl(&crds, None).await.map(|_| ())
}

/// The Stevedore Leases and Secrets of the test's namespace, as `kind/name`, sorted.
async fn runtime_objects(ctx: &TestContext) -> Result<Vec<String>> {
    let leases = ctx.api::<Lease>().list(&ListParams::default()).await?.items;
    let secrets = ctx
        .api::<Secret>()
        .list(&ListParams::default())
        .await?
        .items;
    let mut made: Vec<String> = (leases.iter().map(|l| format!("lease/{}", l.name_any())))
        .chain(secrets.iter().map(|s| format!("secret/{}", s.name_any())))
        .filter(|name| name.contains("/stevedore"))
        .collect();
    made.sort();
    Ok(made)
}

/// Values for the local cluster: the images just built (from its registry), its
/// containerd socket (a custom path), its plain-HTTP registry, nothing on the simulated
/// nodes, and the node's address as the apiserver's (the policy is not enforced there).
fn local_values(ctx: &TestContext, agent: &str, controlplane: &str) -> Result<Value> {
    let registry = ctx.cluster.registry.as_str();
    let split = |image: &str| -> Result<(String, String)> {
        let (repository, tag) = image
            .strip_prefix(&format!("{registry}/"))
            .and_then(|path| path.rsplit_once(':'))
            .with_context(|| format!("image {image} is not a tagged image of {registry}"))?;
        Ok((repository.to_owned(), tag.to_owned()))
    };
    let ((agent_repo, agent_tag), (cp_repo, cp_tag)) = (split(agent)?, split(controlplane)?);
    let not_kwok = json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{ "matchExpressions": [{ "key": "type", "operator": "NotIn", "values": ["kwok"] }] }]
    } } });
    Ok(json!({
        "images": {
            "registry": registry,
            "agent": { "repository": agent_repo, "tag": agent_tag },
            "controlplane": { "repository": cp_repo, "tag": cp_tag },
        },
        "agent": {
            "containerdSocket": ctx.cluster.containerd_sock,
            "insecureRegistries": [ctx.cluster.registry],
            "affinity": not_kwok,
        },
        "controlplane": { "affinity": not_kwok },
        "networkPolicy": {
            "apiserver": [{ "ipBlock": { "cidr": format!("{}/32", ctx.cluster.node_ip) } }],
        },
    }))
}

async fn wait_for_leader(ctx: &TestContext) -> Result<String> {
    poll_until(
        "a control-plane replica of the release to hold the Lease",
        Duration::from_secs(90),
        || async {
            let lease = ctx.api::<Lease>().get_opt("stevedore-controlplane").await?;
            let holder = lease.and_then(|l| l.spec).and_then(|s| s.holder_identity);
            let replicas = controlplane_pods(ctx).await?;
            Ok(holder.filter(|h| replicas.contains(h)))
        },
    )
    .await
}

/// Names of the running, not terminating, control-plane pods of the release.
async fn controlplane_pods(ctx: &TestContext) -> Result<Vec<String>> {
    let lp = ListParams::default().labels("app.kubernetes.io/name=stevedore-controlplane");
    let pods = ctx.api::<Pod>().list(&lp).await?.items;
    Ok(pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.name_any())
        .collect())
}

async fn pod_uids(ctx: &TestContext, name: &str) -> Result<Vec<String>> {
    let pods = cloneset_support::pods_of(ctx, name).await?;
    Ok(pods.iter().map(cloneset_support::uid).collect())
}

/// Prints the VmRSS of the agent and control-plane processes (the release's: the
/// kustomize deployment is down), for the chart's resource defaults.
fn report_rss() {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() == "stevedore-agent" || comm.trim().starts_with("stevedore-contr") {
            let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
            let rss = status
                .lines()
                .find(|l| l.starts_with("VmRSS"))
                .unwrap_or("VmRSS: ?");
            eprintln!("{}: {rss}", comm.trim());
        }
    }
}

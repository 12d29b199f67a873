//! E2E, against the deployed Stevedore: each identity holds only what it uses.
//! - The agent's service account gets pods by name and patches their status, nothing
//!   more (no list/watch, no events), and the admission policy lets a token of it bound
//!   to node X change only the conditions InPlaceUpdateReady and KruisePodReady of node
//!   X's pods: not the phase, not another condition, not the labels.
//! - The control plane reads Secrets only in namespaces that grant it; an ImagePullJob
//!   whose pull secret lies in a namespace without the grant fails with a message naming
//!   the secret and the namespace, and pulls once the namespace grants it.
//! - The control plane prefers control-plane nodes, and its network-facing port serves
//!   health only.

use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::imagelist::ImagePullPhase;
use stevedore_api::{ImageList, ImagePullJob};
use stevedore_tests::auth::{client_as_agent_pod, grant_pull_secrets};
use stevedore_tests::metrics::http_get;
use stevedore_tests::pods::is_ready;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

const AGENT: &str = "system:serviceaccount:kube-system:stevedore-agent";
const CONTROLPLANE: &str = "system:serviceaccount:kube-system:stevedore-controlplane";
const READY: Duration = Duration::from_secs(180);

/// Whether service account `user` (of kube-system) may do `verb` on `resource`.
async fn allowed(
    ctx: &TestContext,
    user: &str,
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
) -> Result<bool> {
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_owned())),
        None => (resource, None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:kube-system".into(),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(String::new()),
                resource: Some(resource.into()),
                subresource,
                namespace: namespace.map(Into::into),
                name: (verb != "list" && verb != "watch" && verb != "create")
                    .then(|| "x".to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviewed = Api::<SubjectAccessReview>::all(ctx.client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(reviewed.status.is_some_and(|s| s.allowed))
}

#[tokio::test]
async fn service_accounts_hold_only_what_they_use() -> Result<()> {
    run_in_namespace("least-privilege-rbac", |ctx| async move {
        let ns = Some(ctx.namespace.as_str());
        let cases = [
            (AGENT, "get", "pods", ns, true),
            (AGENT, "patch", "pods/status", ns, true),
            (AGENT, "list", "pods", ns, false),
            (AGENT, "list", "pods", None, false),
            (AGENT, "watch", "pods", None, false),
            (AGENT, "create", "events", ns, false),
            (AGENT, "patch", "pods", ns, false),
            (AGENT, "get", "secrets", ns, false),
            // No grant in this namespace (yet), and none cluster-wide.
            (CONTROLPLANE, "get", "secrets", ns, false),
            (CONTROLPLANE, "get", "secrets", None, false),
            (CONTROLPLANE, "get", "secrets", Some("kube-system"), false),
            // Its signer CA's Secret only: created once, never listed.
            (CONTROLPLANE, "list", "secrets", Some("kube-system"), false),
            // Launch barriers: a pod's <pod>-barrier ConfigMap in any namespace, read and
            // written by name, never discovered.
            (CONTROLPLANE, "create", "configmaps", ns, true),
            (CONTROLPLANE, "patch", "configmaps", ns, true),
            (CONTROLPLANE, "list", "configmaps", ns, false),
            (CONTROLPLANE, "watch", "configmaps", None, false),
        ];
        let mut wrong = Vec::new();
        for (user, verb, resource, namespace, expected) in cases {
            if allowed(&ctx, user, verb, resource, namespace).await? != expected {
                wrong.push(format!(
                    "{user} {verb} {resource} in {namespace:?}: expected allowed={expected}"
                ));
            }
        }
        ensure!(wrong.is_empty(), "RBAC differs:\n{}", wrong.join("\n"));

        // The namespace grants it: `get` there, still no listing.
        grant_pull_secrets(&ctx).await?;
        poll_until(
            "the grant seen by the authorizer",
            Duration::from_secs(30),
            || async {
                Ok(allowed(&ctx, CONTROLPLANE, "get", "secrets", ns)
                    .await?
                    .then_some(()))
            },
        )
        .await?;
        ensure!(!allowed(&ctx, CONTROLPLANE, "list", "secrets", ns).await?);
        Ok(())
    })
    .await
}

/// A client with a token of the agent's service account bound to the agent's pod, so the
/// apiserver puts that pod's node into the token's user info, as for the agent itself.
async fn as_agent(ctx: &TestContext) -> Result<kube::Client> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), "kube-system");
    let lp = ListParams::default()
        .labels("app.kubernetes.io/name=stevedore-agent")
        .fields(&format!("spec.nodeName={}", ctx.cluster.node_name));
    let agent = poll_until("the agent pod on the kubelet node", READY, || async {
        Ok(pods.list(&lp).await?.items.into_iter().next())
    })
    .await?;
    client_as_agent_pod(ctx, &agent).await
}

/// The agent's token may flip InPlaceUpdateReady on a pod of its node, and nothing else:
/// today's hole was setting `phase: Failed`.
#[tokio::test]
async fn the_agent_may_change_only_its_two_conditions() -> Result<()> {
    run_in_namespace("least-privilege-admission", |ctx| async move {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": "here", "labels": { "app": "web" } },
            "spec": {
                "nodeName": ctx.cluster.node_name,
                "tolerations": [{ "operator": "Exists" }],
                "containers": [{ "name": "web", "image": ctx.cluster.image("web:v1") }]
            }
        }))?;
        ctx.api::<Pod>()
            .create(&PostParams::default(), &pod)
            .await?;
        let pods: Api<Pod> = Api::namespaced(as_agent(&ctx).await?, &ctx.namespace);
        let patch = |body: Value| {
            let pods = pods.clone();
            async move {
                pods.patch_status("here", &PatchParams::default(), &Patch::Strategic(&body))
                    .await
            }
        };
        for owned in ["InPlaceUpdateReady", "KruisePodReady"] {
            patch(json!({ "status": { "conditions": [
                { "type": owned, "status": "False", "reason": "E2E" }
            ] } }))
            .await
            .with_context(|| format!("the agent may set {owned}"))?;
        }
        let refused = [
            ("phase Failed", json!({ "status": { "phase": "Failed" } })),
            (
                "condition Ready",
                json!({ "status": { "conditions": [
                    { "type": "Ready", "status": "False", "reason": "E2E" }
                ] } }),
            ),
            (
                "a message",
                json!({ "status": { "message": "set by the agent" } }),
            ),
            (
                "a label",
                json!({ "metadata": { "labels": { "app": "other" } } }),
            ),
        ];
        for (what, body) in refused {
            match patch(body).await {
                Ok(_) => bail!("the agent's token changed {what}"),
                Err(kube::Error::Api(status)) => {
                    ensure!(
                        status.code == 403 || status.code == 422,
                        "{what}: {status:?}"
                    );
                    ensure!(
                        status.message.contains("the Stevedore agent may"),
                        "{what}: {}",
                        status.message
                    );
                }
                Err(err) => bail!("{what}: unexpected error: {err}"),
            }
        }
        let stored = ctx.api::<Pod>().get("here").await?;
        let status = stored.status.unwrap_or_default();
        ensure!(status.phase.as_deref() != Some("Failed"), "{status:?}");
        ensure!(stored.metadata.labels.unwrap_or_default().get("app") == Some(&"web".to_owned()));
        Ok(())
    })
    .await
}

fn image(ctx: &TestContext, tag: &str) -> String {
    ctx.cluster.image(&format!("least-privilege:{tag}"))
}

/// A dockerconfigjson Secret `regcred` for the local registry.
async fn create_pull_secret(ctx: &TestContext) -> Result<()> {
    let config = json!({ "auths": { ctx.cluster.registry.as_str(): {
        "username": "nobody", "password": "unused"
    } } });
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": "regcred" },
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": { ".dockerconfigjson": config.to_string() },
    }))?;
    ctx.api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await?;
    Ok(())
}

async fn create_job(ctx: &TestContext, name: &str, image: &str) -> Result<()> {
    let job: ImagePullJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ImagePullJob",
        "metadata": { "name": name },
        "spec": {
            "image": image,
            "selector": { "matchLabels": { "kubernetes.io/hostname": ctx.cluster.node_name } },
            "pullSecrets": ["regcred"],
            "parallelism": 1,
            // Never: a finished job releases its ImageList entry, and the image's status
            // with it, often before a poll of the list can see the Failed phase.
            "completionPolicy": { "type": "Never" },
        },
    }))?;
    ctx.api::<ImagePullJob>()
        .create(&PostParams::default(), &job)
        .await?;
    Ok(())
}

/// The status of `image` on the kubelet node's ImageList, once it has one that `done`
/// accepts.
async fn wait_image_status(
    ctx: &TestContext,
    image: &str,
    what: &str,
    done: impl Fn(ImagePullPhase, &str) -> bool,
) -> Result<(ImagePullPhase, String)> {
    let lists: Api<ImageList> = Api::all(ctx.client.clone());
    // Long enough for a session in backoff (an agent just redeployed) to push again.
    poll_until(what, Duration::from_secs(180), || async {
        let list = lists.get(&ctx.cluster.node_name).await?;
        let status = list.status.unwrap_or_default();
        Ok(status
            .images
            .get(image)
            .map(|s| (s.phase, s.message.clone()))
            .filter(|(phase, message)| done(*phase, message)))
    })
    .await
}

#[tokio::test]
async fn a_pull_secret_in_a_namespace_without_the_grant_is_refused() -> Result<()> {
    run_in_namespace("least-privilege-pull-secret", |ctx| async move {
        create_pull_secret(&ctx).await?;
        let refused_image = image(&ctx, "refused");
        create_job(&ctx, "refused", &refused_image).await?;
        let expected = format!("pull secret regcred in namespace {}", ctx.namespace);
        let result = wait_image_status(
            &ctx,
            &refused_image,
            "the image Failed for the refused secret",
            |phase, message| phase == ImagePullPhase::Failed && message.contains(&expected),
        )
        .await;
        let (_, message) = result?;
        ensure!(
            message.contains("stevedore-pull-secret-reader"),
            "{message}"
        );

        // Granted: a job's image is sent to the agent, with the secret's credentials.
        grant_pull_secrets(&ctx).await?;
        let web = ctx.cluster.image("web:v1");
        create_job(&ctx, "granted", &web).await?;
        wait_image_status(&ctx, &web, "the granted job's image pulled", |phase, _| {
            phase == ImagePullPhase::Succeeded
        })
        .await?;
        for job in ["refused", "granted"] {
            ctx.api::<ImagePullJob>()
                .delete(job, &DeleteParams::default())
                .await?;
        }
        Ok(())
    })
    .await
}

/// The control plane's replicas prefer control-plane nodes and tolerate their taint (the
/// kubelet node is labelled one), and their pod address serves health but no metrics.
#[tokio::test]
async fn the_control_plane_runs_on_control_plane_nodes_and_exposes_only_health() -> Result<()> {
    run_in_namespace("least-privilege-placement", |ctx| async move {
        let deployment = Api::<Deployment>::namespaced(ctx.client.clone(), "kube-system")
            .get("stevedore-controlplane")
            .await?;
        let spec = deployment
            .spec
            .and_then(|s| s.template.spec)
            .context("no pod spec")?;
        let preferred = spec
            .affinity
            .and_then(|a| a.node_affinity)
            .and_then(|n| n.preferred_during_scheduling_ignored_during_execution)
            .unwrap_or_default();
        ensure!(
            preferred.iter().any(|p| p
                .preference
                .match_expressions
                .iter()
                .flatten()
                .any(|e| e.key == "node-role.kubernetes.io/control-plane")),
            "no preference for control-plane nodes: {preferred:?}"
        );
        ensure!(
            spec.tolerations
                .iter()
                .flatten()
                .any(|t| t.key.as_deref() == Some("node-role.kubernetes.io/control-plane")),
            "no toleration of the control-plane taint"
        );

        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), "kube-system");
        let lp = ListParams::default().labels("app.kubernetes.io/name=stevedore-controlplane");
        let replicas = poll_until("Ready control-plane replicas", READY, || async {
            let list = pods.list(&lp).await?.items;
            Ok((!list.is_empty() && list.iter().all(is_ready)).then_some(list))
        })
        .await?;
        let nodes: Api<Node> = Api::all(ctx.client.clone());
        for pod in &replicas {
            let node = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .context("unscheduled")?;
            let labels = nodes.get(&node).await?.metadata.labels.unwrap_or_default();
            ensure!(
                labels.contains_key("node-role.kubernetes.io/control-plane"),
                "replica on {node}, which is not a control-plane node"
            );
            let ip = pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.clone())
                .context("no pod IP")?;
            let (code, _) = http_get(&format!("{ip}:10352"), "/readyz").await?;
            ensure!(code == 200, "/readyz {code}");
            let (code, body) = http_get(&format!("{ip}:10352"), "/metrics").await?;
            ensure!(code == 404, "/metrics on the pod address: {code} {body}");
        }
        Ok(())
    })
    .await
}

//! `kubectl stevedore` against the local cluster, run as a user runs it (kubectl finds the
//! plugin on PATH), asserting on what it prints and its exit code: rollout status (a
//! progress bar in a terminal, lines otherwise, a stalled rollout's reason), pause,
//! resume, undo and history for CloneSet, Advanced StatefulSet and Advanced DaemonSet,
//! pulls with live byte progress of a real pull on the kubelet node, and describe-node.

use crate::imagelist_support;
use crate::kubectl_plugin_support;

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use stevedore_api::ImagePullJob;
use stevedore_tests::auth::{bind_cluster_role, unbind};
use stevedore_tests::proxy::Proxy;
use stevedore_tests::{TestContext, poll_until, run_in_namespace, slow_image};

use imagelist_support::{containerd_images, remove_from_containerd};
use kubectl_plugin_support::{kubectl_stevedore, kubectl_stevedore_in_terminal};

/// The three kinds, as `kubectl stevedore` names them, with their manifests.
#[allow(
    clippy::enum_variant_names,
    reason = "the variants are the kinds' own names"
)]
#[derive(Clone, Copy)]
enum Kind {
    CloneSet,
    StatefulSet,
    DaemonSet,
}

impl Kind {
    fn short(self) -> &'static str {
        match self {
            Self::CloneSet => "cloneset",
            Self::StatefulSet => "asts",
            Self::DaemonSet => "ads",
        }
    }

    fn resource(self) -> &'static str {
        match self {
            Self::CloneSet => "cloneset.apps.kruise.io",
            Self::StatefulSet => "statefulset.apps.kruise.io",
            Self::DaemonSet => "daemonset.apps.kruise.io",
        }
    }

    fn api_resource(self) -> ApiResource {
        let (version, kind, plural) = match self {
            Self::CloneSet => ("v1alpha1", "CloneSet", "clonesets"),
            Self::StatefulSet => ("v1beta1", "StatefulSet", "statefulsets"),
            Self::DaemonSet => ("v1alpha1", "DaemonSet", "daemonsets"),
        };
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apps.kruise.io", version, kind),
            plural,
        )
    }

    /// A workload of this kind with the image `image` on the simulated nodes: two pods
    /// (the DaemonSet one, on kwok-node-0).
    fn manifest(self, name: &str, image: &str) -> Value {
        let ar = self.api_resource();
        let mut spec = json!({
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "nodeSelector": { "type": "kwok" },
                    "tolerations": [{
                        "key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"
                    }],
                    "containers": [{ "name": "web", "image": image }]
                }
            }
        });
        match self {
            Self::CloneSet => {
                spec["replicas"] = json!(2);
                spec["updateStrategy"] = json!({ "type": "ReCreate", "maxUnavailable": 1 });
            }
            Self::StatefulSet => {
                spec["replicas"] = json!(2);
                spec["serviceName"] = json!(name);
            }
            Self::DaemonSet => {
                spec["template"]["spec"]["nodeSelector"] =
                    json!({ "kubernetes.io/hostname": "kwok-node-0" });
            }
        }
        json!({
            "apiVersion": ar.api_version, "kind": ar.kind,
            "metadata": { "name": name }, "spec": spec,
        })
    }
}

fn api(ctx: &TestContext, kind: Kind) -> kube::Api<DynamicObject> {
    kube::Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &kind.api_resource())
}

async fn create(ctx: &TestContext, kind: Kind, name: &str, image: &str) -> Result<()> {
    let object: DynamicObject = serde_json::from_value(kind.manifest(name, image))?;
    api(ctx, kind)
        .create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating {} {name}", kind.resource()))?;
    Ok(())
}

async fn set_template(ctx: &TestContext, kind: Kind, name: &str, pod_spec: Value) -> Result<()> {
    let patch = json!({ "spec": { "template": { "spec": pod_spec } } });
    api(ctx, kind)
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

async fn set_image(ctx: &TestContext, kind: Kind, name: &str, image: &str) -> Result<()> {
    set_template(
        ctx,
        kind,
        name,
        json!({ "containers": [{ "name": "web", "image": image }] }),
    )
    .await
}

async fn template_image(ctx: &TestContext, kind: Kind, name: &str) -> Result<String> {
    let object = api(ctx, kind).get(name).await?;
    object.data["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .map(str::to_owned)
        .context("no container image")
}

fn target(kind: Kind, name: &str) -> String {
    format!("{}/{name}", kind.short())
}

/// Follows the rollout of `kind/name` to its end; the run must say it rolled out.
async fn rolled_out(ctx: &TestContext, kind: Kind, name: &str) -> Result<()> {
    let run = kubectl_stevedore(
        ctx,
        &[
            "rollout",
            "status",
            &target(kind, name),
            "--timeout",
            "150s",
        ],
    )
    .await?;
    run.ok()?;
    ensure!(run.stdout.contains("successfully rolled out"), "{run:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn rollout_status_draws_a_bar_in_a_terminal_and_reports_json() -> Result<()> {
    run_in_namespace("kubectl-plugin-status", |ctx| async move {
        let kind = Kind::CloneSet;
        create(&ctx, kind, "web", &ctx.cluster.image("web:v1")).await?;
        rolled_out(&ctx, kind, "web").await?;

        set_image(&ctx, kind, "web", &ctx.cluster.image("web:v2")).await?;
        let run = kubectl_stevedore_in_terminal(
            &ctx,
            &["rollout", "status", "cloneset/web", "--timeout", "150s"],
        )
        .await?;
        run.ok()?;
        eprintln!("rollout status in a terminal:\n{}", run.stdout);
        // The bar: its frame, updated-and-ready of the target, the counts per revision.
        ensure!(run.stdout.contains("cloneset/web ["), "no bar: {run:?}");
        ensure!(run.stdout.contains("2/2 ready"), "no full bar: {run:?}");
        ensure!(
            run.stdout.contains("2 updated ("),
            "no revision counts: {run:?}"
        );
        ensure!(
            run.stdout.contains(&format!(
                "CloneSet {}/web successfully rolled out.",
                ctx.namespace
            )),
            "{run:?}"
        );

        let json =
            kubectl_stevedore(&ctx, &["rollout", "status", "cloneset/web", "-o", "json"]).await?;
        json.ok()?;
        let value: Value = serde_json::from_str(&json.stdout).context("JSON output")?;
        ensure!(value["result"] == "Done", "{value}");
        ensure!(
            value["rollout"]["updated"] == 2 && value["rollout"]["desired"] == 2,
            "{value}"
        );

        let missing = kubectl_stevedore(&ctx, &["rollout", "status", "cloneset/nothing"]).await?;
        ensure!(
            missing.code == 1 && missing.stderr.contains("not found"),
            "{missing:?}"
        );
        let wrong = kubectl_stevedore(&ctx, &["rollout", "status", "deployment/web"]).await?;
        ensure!(
            wrong.code != 0 && wrong.stderr.contains("is not a kind with rollouts"),
            "{wrong:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollout_past_its_progress_deadline_exits_non_zero_with_the_controllers_reason()
-> Result<()> {
    run_in_namespace("kubectl-plugin-stall", |ctx| async move {
        let kind = Kind::CloneSet;
        let mut manifest = kind.manifest("web", &ctx.cluster.image("web:v1"));
        manifest["spec"]["progressDeadlineSeconds"] = json!(10);
        let object: DynamicObject = serde_json::from_value(manifest)?;
        api(&ctx, kind)
            .create(&PostParams::default(), &object)
            .await?;
        rolled_out(&ctx, kind, "web").await?;

        // The new revision's pods fit no node: the rollout can never finish.
        set_template(
            &ctx,
            kind,
            "web",
            json!({ "nodeSelector": { "type": "nowhere" } }),
        )
        .await?;
        let run = kubectl_stevedore(
            &ctx,
            &["rollout", "status", "cloneset/web", "--timeout", "120s"],
        )
        .await?;
        ensure!(run.code == 1, "a stalled rollout exits 1: {run:?}");
        ensure!(
            run.stderr.contains("is stalled") && run.stderr.contains("has timed out progressing"),
            "the reason is the Progressing condition's message: {run:?}"
        );
        Ok(())
    })
    .await
}

/// pause (twice), a held rollout's non-zero status, resume, history, undo (default and a
/// missing revision) on one workload of `kind`.
async fn pause_resume_undo_history(kind: Kind, test: &str) -> Result<()> {
    run_in_namespace(test, |ctx| async move {
        let (v1, v2) = (ctx.cluster.image("web:v1"), ctx.cluster.image("web:v2"));
        create(&ctx, kind, "web", &v1).await?;
        rolled_out(&ctx, kind, "web").await?;
        let object = format!("{}/web", kind.resource());

        let paused = kubectl_stevedore(&ctx, &["rollout", "pause", &target(kind, "web")]).await?;
        ensure!(
            paused.ok()?.stdout.trim() == format!("{object} paused"),
            "{paused:?}"
        );
        let again = kubectl_stevedore(&ctx, &["rollout", "pause", &target(kind, "web")]).await?;
        ensure!(
            again.ok()?.stdout.trim() == format!("{object} already paused"),
            "{again:?}"
        );

        set_image(&ctx, kind, "web", &v2).await?;
        let held = kubectl_stevedore(
            &ctx,
            &[
                "rollout",
                "status",
                &target(kind, "web"),
                "--timeout",
                "60s",
            ],
        )
        .await?;
        ensure!(
            held.code == 1 && held.stderr.contains("is paused"),
            "a paused rollout: {held:?}"
        );

        let resumed = kubectl_stevedore(&ctx, &["rollout", "resume", &target(kind, "web")]).await?;
        ensure!(
            resumed.ok()?.stdout.trim() == format!("{object} resumed"),
            "{resumed:?}"
        );
        rolled_out(&ctx, kind, "web").await?;

        let history =
            kubectl_stevedore(&ctx, &["rollout", "history", &target(kind, "web")]).await?;
        let text = &history.ok()?.stdout;
        let line_of = |revision: &str| {
            text.lines()
                .find(|l| l.starts_with(revision))
                .map(str::to_owned)
        };
        let first = line_of("1 ").context(format!("no revision 1: {text}"))?;
        let second = line_of("2 (update)").context(format!("no update revision 2: {text}"))?;
        ensure!(
            first.contains(&format!("web={v1}")) && second.contains(&format!("web={v2}")),
            "{text}"
        );

        let undone = kubectl_stevedore(&ctx, &["rollout", "undo", &target(kind, "web")]).await?;
        ensure!(
            undone.ok()?.stdout.trim() == format!("{object} rolled back to revision 1"),
            "{undone:?}"
        );
        ensure!(
            template_image(&ctx, kind, "web").await? == v1,
            "the template is v1 again"
        );
        rolled_out(&ctx, kind, "web").await?;
        // The restored template is revision 1's, renumbered as the newest.
        let history = poll_until(
            "revision 1 renumbered to 3",
            Duration::from_secs(30),
            || async {
                let run = kubectl_stevedore(
                    &ctx,
                    &["rollout", "history", &target(kind, "web"), "-o", "json"],
                )
                .await?;
                let rows: Vec<Value> = serde_json::from_str(&run.ok()?.stdout)?;
                let newest = rows.last().cloned().unwrap_or_default();
                Ok((newest["revision"] == 3 && newest["current"] == true).then_some(rows))
            },
        )
        .await?;
        ensure!(
            history
                .last()
                .is_some_and(|r| r["images"][0] == format!("web={v1}")),
            "{history:?}"
        );

        // The same history for scripts in YAML as in JSON.
        let as_json = kubectl_stevedore(
            &ctx,
            &["rollout", "history", &target(kind, "web"), "-o", "json"],
        )
        .await?;
        let as_yaml = kubectl_stevedore(
            &ctx,
            &["rollout", "history", &target(kind, "web"), "-o", "yaml"],
        )
        .await?;
        let from_json: Value = serde_json::from_str(&as_json.ok()?.stdout)?;
        let from_yaml: Value = serde_saphyr::from_str(&as_yaml.ok()?.stdout)?;
        ensure!(
            from_json == from_yaml,
            "json {from_json} but yaml {from_yaml}"
        );

        // Back to a chosen revision: 2 is v2's.
        let chosen = kubectl_stevedore(
            &ctx,
            &[
                "rollout",
                "undo",
                &target(kind, "web"),
                "--to-revision",
                "2",
            ],
        )
        .await?;
        ensure!(
            chosen.ok()?.stdout.trim() == format!("{object} rolled back to revision 2"),
            "{chosen:?}"
        );
        ensure!(
            template_image(&ctx, kind, "web").await? == v2,
            "the template is v2 again"
        );
        rolled_out(&ctx, kind, "web").await?;

        let missing = kubectl_stevedore(
            &ctx,
            &[
                "rollout",
                "undo",
                &target(kind, "web"),
                "--to-revision",
                "99",
            ],
        )
        .await?;
        ensure!(
            missing.code == 1 && missing.stderr.contains("revision 99 is not in the history"),
            "{missing:?}"
        );
        api(&ctx, kind)
            .delete("web", &DeleteParams::default())
            .await?;
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn cloneset_pause_resume_undo_and_history() -> Result<()> {
    pause_resume_undo_history(Kind::CloneSet, "kubectl-plugin-cloneset").await
}

#[tokio::test(flavor = "multi_thread")]
async fn statefulset_pause_resume_undo_and_history() -> Result<()> {
    pause_resume_undo_history(Kind::StatefulSet, "kubectl-plugin-asts").await
}

#[tokio::test(flavor = "multi_thread")]
async fn daemonset_pause_resume_undo_and_history() -> Result<()> {
    pause_resume_undo_history(Kind::DaemonSet, "kubectl-plugin-ads").await
}

#[tokio::test(flavor = "multi_thread")]
async fn describe_node_asks_the_agent_with_the_operators_token() -> Result<()> {
    run_in_namespace("kubectl-plugin-node", |ctx| async move {
        let node = ctx.cluster.node_name.clone();
        let account = format!("{}/operator", ctx.namespace);
        // The account must exist before the binding is useful; a token request makes it.
        stevedore_tests::auth::token_for(&ctx, "operator", &node).await?;
        let binding = bind_cluster_role(&ctx, "stevedore:agent-client", "operator").await?;
        let described = poll_until("GetNodeInfo allowed", Duration::from_secs(30), || async {
            let run = kubectl_stevedore(
                &ctx,
                &[
                    "describe-node",
                    &node,
                    "--service-account",
                    &account,
                    "-o",
                    "json",
                ],
            )
            .await?;
            Ok((run.code == 0).then_some(run))
        })
        .await;
        let human = kubectl_stevedore(
            &ctx,
            &["describe-node", &node, "--service-account", &account],
        )
        .await;
        let anonymous = kubectl_stevedore(&ctx, &["describe-node", &node]).await;
        unbind(&ctx, &binding).await;

        let info: Value = serde_json::from_str(&described?.stdout)?;
        ensure!(info["nodeName"] == node.as_str(), "{info}");
        ensure!(
            info["platform"]
                .as_str()
                .is_some_and(|p| p.starts_with("linux/")),
            "{info}"
        );
        let human = human?;
        ensure!(
            human
                .ok()?
                .stdout
                .contains(&format!("Node:                {node}")),
            "{human:?}"
        );
        ensure!(human.stdout.contains("Snapshotter:"), "{human:?}");
        let anonymous = anonymous?;
        ensure!(
            anonymous.code == 1 && anonymous.stderr.contains("needs a token"),
            "{anonymous:?}"
        );
        Ok(())
    })
    .await
}

/// Bytes per second the registry proxy lets through, so the 24 MiB pull takes ~8 s.
const SLOW_RATE: u64 = 3 << 20;

#[tokio::test(flavor = "multi_thread")]
async fn pulls_watch_shows_the_byte_progress_of_a_real_pull_on_the_kubelet_node() -> Result<()> {
    run_in_namespace("kubectl-plugin-pulls", |ctx| async move {
        let node = ctx.cluster.node_name.clone();
        let slow = slow_image::ensure(&ctx.cluster.registry, "kubectl-plugin").await?;
        let proxy = Proxy::start(&ctx.cluster.registry).await?;
        let image = format!("{}/{}", proxy.host(), slow.name);
        // No record of the image under any name, so the pull has every byte to fetch.
        let stale: Vec<String> = containerd_images(ctx.cluster)?
            .into_iter()
            .filter(|name| slow.is_record(name))
            .collect();
        remove_from_containerd(ctx.cluster, &stale)?;
        proxy.throttle(Some(SLOW_RATE));

        let job: ImagePullJob = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ImagePullJob",
            "metadata": { "name": "slow" },
            "spec": { "image": image, "selector": { "names": [node] } },
        }))?;
        ctx.api::<ImagePullJob>()
            .create(&PostParams::default(), &job)
            .await?;
        let watch = ["pulls", "--watch", "--until-done", "--node", node.as_str()];
        let (lines, terminal) = tokio::join!(
            kubectl_stevedore(&ctx, &watch),
            kubectl_stevedore_in_terminal(&ctx, &watch),
        );
        let listed = kubectl_stevedore(&ctx, &["pulls", "--node", &node, "-o", "json"]).await;
        let _ = ctx
            .api::<ImagePullJob>()
            .delete("slow", &DeleteParams::default())
            .await;
        let pulled: Vec<String> = containerd_images(ctx.cluster)?
            .into_iter()
            .filter(|name| name.starts_with(&proxy.host()))
            .collect();
        remove_from_containerd(ctx.cluster, &pulled)?;

        let (lines, terminal) = (lines?, terminal?);
        eprintln!("pulls --watch in a terminal:\n{}", terminal.stdout);
        lines.ok()?;
        terminal.ok()?;
        let ours = |l: &&str| l.starts_with(&format!("{node} {image} "));
        ensure!(
            lines
                .stdout
                .lines()
                .filter(ours)
                .any(|l| l.contains(" Pulling ") && l.contains("MiB / 24.0 MiB")),
            "a line with the bytes moving: {lines:?}"
        );
        // The job releases the image from the node's list once it completes, so its
        // last word is the job's.
        ensure!(
            lines.stdout.contains(&format!(
                "imagepulljob {}/slow {image} 100% (1 of 1 nodes succeeded, 0 failed), done",
                ctx.namespace
            )),
            "the job's completion: {lines:?}"
        );
        // The terminal shows the byte bar moving and the job's bar.
        ensure!(
            terminal.stdout.contains(&format!("{node} {image}")),
            "{terminal:?}"
        );
        ensure!(
            terminal.stdout.contains("MiB/24.00 MiB"),
            "the byte counts: {terminal:?}"
        );
        ensure!(
            terminal
                .stdout
                .contains(&format!("imagepulljob {}/slow", ctx.namespace))
                && terminal.stdout.contains("100%"),
            "the job's bar: {terminal:?}"
        );

        let listed: Value = serde_json::from_str(&listed?.ok()?.stdout)?;
        let job = &listed["jobs"][0];
        ensure!(
            job["name"] == "slow" && job["done"] == true && job["percent"] == 100,
            "{listed}"
        );
        Ok(())
    })
    .await
}

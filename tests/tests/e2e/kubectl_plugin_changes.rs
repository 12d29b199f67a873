//! The verbs `kubectl stevedore` shares with kubectl-kruise, run as a user runs them
//! (kubectl finds the plugin on PATH), each result checked with the API: `rollout
//! restart` (a new restartedAt annotation, every pod replaced), `set image|env|resources`
//! (the template changed, and the sentence on whether the pods take it in place),
//! `expose` (a Service selecting the CloneSet's pods),
//! `scale` (and its refusals), `scaledown --pods` (CloneSet's specified delete: that pod
//! goes, the other stays), `create job|broadcastjob --from=acj/<name>` and `create crr`
//! (a request for a real pod on the kubelet node that completes).

use crate::kubectl_plugin_support;

use std::fmt::Debug;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use kubectl_plugin_support::kubectl_stevedore;

const SETTLE: Duration = Duration::from_secs(150);

fn resource(kind: &str, version: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps.kruise.io", version, kind),
        plural,
    )
}

fn dynamic(ctx: &TestContext, resource: &ApiResource) -> kube::Api<DynamicObject> {
    kube::Api::namespaced_with(ctx.client.clone(), &ctx.namespace, resource)
}

fn clonesets() -> ApiResource {
    resource("CloneSet", "v1alpha1", "clonesets")
}

/// A pod template on the suite's simulated (kwok) nodes, container `web`.
fn kwok_template(app: &str, image: &str) -> Value {
    json!({
        "metadata": { "labels": { "app": app } },
        "spec": {
            "nodeSelector": { "type": "kwok" },
            "tolerations": [{
                "key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"
            }],
            "containers": [{ "name": "web", "image": image }]
        }
    })
}

/// Creates a CloneSet or Advanced StatefulSet `name` of two pods with `strategy` as its
/// updateStrategy.
async fn create(
    ctx: &TestContext,
    resource: &ApiResource,
    name: &str,
    strategy: Value,
) -> Result<()> {
    let mut spec = json!({
        "selector": { "matchLabels": { "app": name } },
        "template": kwok_template(name, &ctx.cluster.image("web:v1")),
        "updateStrategy": strategy,
    });
    match resource.kind.as_str() {
        "CloneSet" => spec["replicas"] = json!(2),
        "StatefulSet" => {
            spec["replicas"] = json!(2);
            spec["serviceName"] = json!(name);
        }
        _ => {}
    }
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": resource.api_version, "kind": resource.kind,
        "metadata": { "name": name }, "spec": spec,
    }))?;
    dynamic(ctx, resource)
        .create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating {} {name}", resource.kind))?;
    Ok(())
}

async fn spec_of(ctx: &TestContext, resource: &ApiResource, name: &str) -> Result<Value> {
    Ok(dynamic(ctx, resource).get(name).await?.data["spec"].clone())
}

async fn pods_of(ctx: &TestContext, app: &str) -> Result<Vec<Pod>> {
    let pods = ctx
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await?;
    Ok(pods
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

/// Waits until the object `name` of `api` shows `phase` as its `status.phase` (a pod, or
/// a ContainerRecreateRequest read as a dynamic object).
async fn phase_reached<K>(api: &kube::Api<K>, name: &str, phase: &str) -> Result<()>
where
    K: Clone + DeserializeOwned + Serialize + Debug,
{
    let what = format!("{name} to be {phase}");
    poll_until(&what, SETTLE, || async {
        let object = serde_json::to_value(api.get(name).await?)?;
        Ok((object["status"]["phase"] == phase).then_some(()))
    })
    .await
}

async fn rolled_out(ctx: &TestContext, target: &str) -> Result<()> {
    let run = kubectl_stevedore(ctx, &["rollout", "status", target, "--timeout", "150s"]).await?;
    run.ok()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn rollout_restart_replaces_every_pod_with_the_annotation() -> Result<()> {
    run_in_namespace("kubectl-plugin-restart", |ctx| async move {
        let recreate = json!({ "type": "ReCreate", "maxUnavailable": 1 });
        create(&ctx, &clonesets(), "web", recreate).await?;
        rolled_out(&ctx, "cloneset/web").await?;
        let before: Vec<String> = pods_of(&ctx, "web")
            .await?
            .iter()
            .filter_map(|p| p.metadata.uid.clone())
            .collect();

        let run = kubectl_stevedore(&ctx, &["rollout", "restart", "clone/web"]).await?;
        run.ok()?;
        ensure!(
            run.stdout.contains("restarted") && run.stdout.contains("recreated"),
            "{run:?}"
        );
        let spec = spec_of(&ctx, &clonesets(), "web").await?;
        let stamp =
            spec["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
                .as_str()
                .context("no restartedAt annotation on the template")?
                .to_owned();
        rolled_out(&ctx, "cloneset/web").await?;
        let after = pods_of(&ctx, "web").await?;
        ensure!(after.len() == 2, "{} pods", after.len());
        for pod in &after {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            ensure!(!before.contains(&uid), "pod {uid} was not replaced");
            let annotations = pod.metadata.annotations.clone().unwrap_or_default();
            ensure!(
                annotations.get("kubectl.kubernetes.io/restartedAt") == Some(&stamp),
                "{annotations:?}"
            );
        }

        let statefulsets = resource("StatefulSet", "v1beta1", "statefulsets");
        create(
            &ctx,
            &statefulsets,
            "db",
            json!({ "type": "RollingUpdate" }),
        )
        .await?;
        let run = kubectl_stevedore(&ctx, &["rollout", "restart", "asts/db"]).await?;
        run.ok()?;
        let spec = spec_of(&ctx, &statefulsets, "db").await?;
        ensure!(
            spec["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
                .is_string(),
            "{spec}"
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn set_image_env_and_resources_say_whether_pods_take_them_in_place_and_expose() -> Result<()>
{
    run_in_namespace("kubectl-plugin-set", |ctx| async move {
        create(&ctx, &clonesets(), "web", json!({ "type": "InPlaceIfPossible" })).await?;
        let v2 = ctx.cluster.image("web:v2");

        let image = kubectl_stevedore(&ctx, &["set", "image", "cloneset/web", &format!("web={v2}")]).await?;
        image.ok()?;
        ensure!(image.stdout.contains("updated in place"), "{image:?}");
        let spec = spec_of(&ctx, &clonesets(), "web").await?;
        ensure!(spec["template"]["spec"]["containers"][0]["image"] == v2.as_str(), "{spec}");

        let env = kubectl_stevedore(&ctx, &["set", "env", "cloneset/web", "MODE=fast", "-c", "web"]).await?;
        env.ok()?;
        ensure!(env.stdout.contains("recreated"), "an env change is not in place: {env:?}");
        let spec = spec_of(&ctx, &clonesets(), "web").await?;
        ensure!(spec["template"]["spec"]["containers"][0]["env"] == json!([{ "name": "MODE", "value": "fast" }]), "{spec}");

        let resources = kubectl_stevedore(
            &ctx,
            &["set", "resources", "cloneset/web", "-c", "web", "--limits=cpu=200m,memory=256Mi", "--requests=cpu=100m"],
        )
        .await?;
        resources.ok()?;
        ensure!(resources.stdout.contains("resized in place"), "{resources:?}");
        let spec = spec_of(&ctx, &clonesets(), "web").await?;
        ensure!(
            spec["template"]["spec"]["containers"][0]["resources"]
                == json!({ "limits": { "cpu": "200m", "memory": "256Mi" }, "requests": { "cpu": "100m" } }),
            "{spec}"
        );

        let unchanged = kubectl_stevedore(&ctx, &["set", "image", "cloneset/web", &format!("web={v2}")]).await?;
        unchanged.ok()?;
        ensure!(unchanged.stdout.contains("unchanged"), "{unchanged:?}");
        let missing = kubectl_stevedore(&ctx, &["set", "image", "cloneset/web", "db=x:1"]).await?;
        ensure!(missing.code == 1 && missing.stderr.contains("no container named \"db\""), "{missing:?}");
        let absent = kubectl_stevedore(&ctx, &["set", "image", "cloneset/nothing", "web=x:1"]).await?;
        ensure!(
            absent.code == 1 && absent.stderr.contains("the apiserver said") && absent.stderr.contains("not found"),
            "{absent:?}"
        );

        let exposed = kubectl_stevedore(&ctx, &["expose", "cloneset/web", "--port", "80", "--target-port", "8080"]).await?;
        exposed.ok()?;
        let service = ctx.api::<Service>().get("web").await.context("the Service")?;
        let spec = service.spec.context("no Service spec")?;
        ensure!(spec.selector.unwrap_or_default().get("app").map(String::as_str) == Some("web"), "not selecting app=web");
        let ports = spec.ports.unwrap_or_default();
        ensure!(ports.len() == 1 && ports[0].port == 80, "{ports:?}");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn scale_and_scaledown_of_chosen_pods() -> Result<()> {
    run_in_namespace("kubectl-plugin-scale", |ctx| async move {
        let statefulsets = resource("StatefulSet", "v1beta1", "statefulsets");
        create(
            &ctx,
            &statefulsets,
            "db",
            json!({ "type": "RollingUpdate" }),
        )
        .await?;
        let scaled = kubectl_stevedore(&ctx, &["scale", "asts/db", "--replicas", "3"]).await?;
        scaled.ok()?;
        ensure!(
            spec_of(&ctx, &statefulsets, "db").await?["replicas"] == 3,
            "not scaled"
        );
        let stale = kubectl_stevedore(
            &ctx,
            &[
                "scale",
                "asts/db",
                "--replicas",
                "1",
                "--current-replicas",
                "5",
            ],
        )
        .await?;
        ensure!(
            stale.code == 1 && stale.stderr.contains("expected 5 replicas"),
            "{stale:?}"
        );
        ensure!(
            spec_of(&ctx, &statefulsets, "db").await?["replicas"] == 3,
            "scaled despite the precondition"
        );
        let daemon = kubectl_stevedore(&ctx, &["scale", "ads/agent", "--replicas", "2"]).await?;
        ensure!(
            daemon.code == 1 && daemon.stderr.contains("no replicas"),
            "{daemon:?}"
        );

        create(&ctx, &clonesets(), "web", json!({ "type": "ReCreate" })).await?;
        rolled_out(&ctx, "cloneset/web").await?;
        let pods = pods_of(&ctx, "web").await?;
        let chosen = pods
            .first()
            .and_then(|p| p.metadata.name.clone())
            .context("no pod")?;
        let kept = pods
            .get(1)
            .and_then(|p| p.metadata.name.clone())
            .context("one pod only")?;

        let unknown =
            kubectl_stevedore(&ctx, &["scaledown", "web", "--pods", "web-nosuchpod"]).await?;
        ensure!(
            unknown.code == 1 && unknown.stderr.contains("not found"),
            "{unknown:?}"
        );
        let run = kubectl_stevedore(&ctx, &["scaledown", "web", "--pods", &chosen]).await?;
        run.ok()?;
        // The controller may already have deleted the chosen pod and taken its name off
        // podsToDelete by the time the spec is read (as OpenKruise does): either is right.
        let spec = spec_of(&ctx, &clonesets(), "web").await?;
        let to_delete = &spec["scaleStrategy"]["podsToDelete"];
        ensure!(
            spec["replicas"] == 1 && (*to_delete == json!([chosen]) || *to_delete == json!([])),
            "{spec}"
        );
        poll_until("the chosen pod deleted, the other kept", SETTLE, || async {
            let names: Vec<String> = pods_of(&ctx, "web")
                .await?
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect();
            Ok((names == [kept.clone()]).then_some(()))
        })
        .await?;
        Ok(())
    })
    .await
}

fn cronjob(name: &str, template: Value) -> Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "AdvancedCronJob",
        "metadata": { "name": name },
        // Once a year and paused: only the plugin makes jobs from it here.
        "spec": { "schedule": "0 0 1 1 *", "paused": true, "template": template },
    }))?)
}

#[tokio::test(flavor = "multi_thread")]
async fn create_job_and_broadcastjob_from_an_advanced_cronjob() -> Result<()> {
    run_in_namespace("kubectl-plugin-create-job", |ctx| async move {
        let cronjobs = dynamic(&ctx, &resource("AdvancedCronJob", "v1alpha1", "advancedcronjobs"));
        let mut pod = kwok_template("report", &ctx.cluster.image("web:v1"));
        pod["spec"]["restartPolicy"] = json!("Never");
        let jobs = cronjob("nightly", json!({ "jobTemplate": { "metadata": { "labels": { "team": "a" } }, "spec": { "template": pod } } }))?;
        cronjobs.create(&PostParams::default(), &jobs).await?;
        let broadcast = cronjob("everywhere", json!({ "broadcastJobTemplate": { "spec": { "template": pod } } }))?;
        cronjobs.create(&PostParams::default(), &broadcast).await?;

        let run = kubectl_stevedore(&ctx, &["create", "job", "by-hand", "--from=acj/nightly"]).await?;
        run.ok()?;
        let job = ctx.api::<Job>().get("by-hand").await.context("the Job")?;
        let annotations = job.metadata.annotations.clone().unwrap_or_default();
        ensure!(annotations.get("cronjob.kubernetes.io/instantiate").map(String::as_str) == Some("manual"), "{annotations:?}");
        ensure!(job.metadata.labels.clone().unwrap_or_default().get("team").map(String::as_str) == Some("a"), "{job:?}");
        let owner = job.metadata.owner_references.clone().unwrap_or_default();
        ensure!(owner.len() == 1 && owner[0].kind == "AdvancedCronJob" && owner[0].name == "nightly", "{owner:?}");

        let wrong = kubectl_stevedore(&ctx, &["create", "broadcastjob", "x", "--from=acj/nightly"]).await?;
        ensure!(wrong.code == 1 && wrong.stderr.contains("has no broadcastJobTemplate"), "{wrong:?}");
        let run = kubectl_stevedore(&ctx, &["create", "broadcastjob", "now", "--from=acj/everywhere"]).await?;
        run.ok()?;
        let created = dynamic(&ctx, &resource("BroadcastJob", "v1alpha1", "broadcastjobs")).get("now").await?;
        ensure!(created.data["spec"]["template"]["spec"]["restartPolicy"] == "Never", "{created:?}");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn create_crr_recreates_the_named_container_of_a_real_pod() -> Result<()> {
    run_in_namespace("kubectl-plugin-crr", |ctx| async move {
        let image = ctx.cluster.image("web:v1");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": "two" },
            "spec": {
                "nodeName": ctx.cluster.node_name,
                "terminationGracePeriodSeconds": 2,
                // As the ContainerRecreateRequest suite's pods: the gate the request's
                // unreadyGracePeriodSeconds turns False while a container is recreated.
                "readinessGates": [{ "conditionType": "KruisePodReady" }],
                "containers": [
                    { "name": "web", "image": image, "imagePullPolicy": "IfNotPresent" },
                    { "name": "side", "image": image, "imagePullPolicy": "IfNotPresent", "command": ["/bin/sleep", "36000"] },
                ],
            },
        }))?;
        ctx.api::<Pod>().create(&PostParams::default(), &pod).await?;
        phase_reached(&ctx.api::<Pod>(), "two", "Running").await?;

        let missing = kubectl_stevedore(&ctx, &["create", "crr", "bad", "--pod", "two", "--containers", "db"]).await?;
        ensure!(missing.code == 1 && missing.stderr.contains("has no container db"), "{missing:?}");
        let run = kubectl_stevedore(&ctx, &["create", "crr", "again", "--pod", "two", "--containers", "web"]).await?;
        run.ok()?;
        let requests = dynamic(&ctx, &resource("ContainerRecreateRequest", "v1alpha1", "containerrecreaterequests"));
        let request = requests.get("again").await?;
        ensure!(request.data["spec"]["podName"] == "two", "{request:?}");
        ensure!(request.data["spec"]["containers"].as_array().map(Vec::len) == Some(1), "{request:?}");
        phase_reached(&requests, "again", "Completed").await?;
        let pod = ctx.api::<Pod>().get("two").await?;
        let restarts: Vec<(String, i32)> = pod
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.name, c.restart_count))
            .collect();
        ensure!(restarts.contains(&("web".to_owned(), 1)) && restarts.contains(&("side".to_owned(), 0)), "{restarts:?}");
        Ok(())
    })
    .await
}

//! PodUnavailableBudget on the real apiserver and kubelet node: admission refuses bad
//! budgets naming the field; a budget of maxUnavailable 1, made before its CloneSet, counts
//! the pods as they come, and holds an in-place rollout of 6 pods whose own maxUnavailable
//! is 3 to one unavailable pod at a time; two workloads disrupting the same protected pods
//! at once (a CloneSet in-place rollout and ContainerRecreateRequests for every pod) stay
//! within the budget together; deletes and evictions from outside (`kubectl delete pod`,
//! `kubectl drain`, two deletes at once) go through the admission webhook's same check;
//! OpenKruise's pod marks (`unavailable-pod.kruise.io/` labels, `pub.kruise.io/no-protect`)
//! count a pod unavailable or unprotected;
//! `policy.kruise.io/v1beta1` reads and writes go through its conversion webhook.
//! Needs this branch's control plane with `--controllers
//! cloneset,podunavailablebudget,containerrecreaterequest` (see dev-cp.sh).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use stevedore_api::containerrecreaterequest::ContainerRecreateRequestPhase as Phase;
use stevedore_api::{ContainerRecreateRequest, PodUnavailableBudget};
use stevedore_tests::test_nodes::{self, TestNode};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use crate::cloneset_support;
use cloneset_support::{
    INPLACE_UPDATE_READY, Nodes, ROLLOUT, apply, pods_of, set_image, wait_event, wait_rolled_out,
    web_cloneset,
};

fn budget(ctx: &TestContext, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "policy.kruise.io/v1alpha1",
        "kind": "PodUnavailableBudget",
        "metadata": { "name": name, "namespace": ctx.namespace },
        "spec": spec,
    })
}

async fn create_budget(ctx: &TestContext, object: &Value, dry_run: bool) -> Result<()> {
    let pp = PostParams {
        dry_run,
        ..PostParams::default()
    };
    let object: PodUnavailableBudget = serde_json::from_value(object.clone())?;
    ctx.api::<PodUnavailableBudget>()
        .create(&pp, &object)
        .await?;
    Ok(())
}

#[tokio::test]
async fn bad_budgets_are_refused_naming_the_field() -> Result<()> {
    run_in_namespace("pub-admission", |ctx| async move {
        let selector = json!({ "matchLabels": { "app": "web" } });
        let target = json!({ "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web" });
        let cases = [
            (json!({ "selector": selector, "maxUnavailable": 1, "minAvailable": 1 }), "spec.maxUnavailable and spec.minAvailable"),
            (json!({ "selector": selector }), "spec.maxUnavailable and spec.minAvailable"),
            (json!({ "selector": selector, "targetRef": target, "maxUnavailable": 1 }), "spec.selector and spec.targetRef"),
            (json!({ "maxUnavailable": 1 }), "spec.selector and spec.targetRef"),
            (json!({ "selector": selector, "maxUnavailable": "101%" }), "spec.maxUnavailable"),
            (json!({ "selector": selector, "minAvailable": "150%" }), "spec.minAvailable"),
            (json!({ "targetRef": { "apiVersion": "v1", "kind": "Pod", "name": "web" }, "maxUnavailable": 1 }), "spec.targetRef.kind"),
        ];
        for (spec, field) in cases {
            let refused = create_budget(&ctx, &budget(&ctx, "bad", spec.clone()), true).await;
            let err = match refused {
                Ok(()) => bail!("{spec} was admitted"),
                Err(err) => format!("{err:#}"),
            };
            ensure!(err.contains(field), "{spec}: {err} does not name {field}");
        }
        for spec in [
            json!({ "selector": selector, "maxUnavailable": "100%" }),
            json!({ "targetRef": target, "minAvailable": 2 }),
            json!({ "targetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "d" }, "maxUnavailable": "25%" }),
        ] {
            create_budget(&ctx, &budget(&ctx, "good", spec.clone()), true)
                .await
                .with_context(|| format!("{spec} was refused"))?;
        }
        Ok(())
    })
    .await
}

/// The budget's (allowed, available, desired, total).
async fn budget_numbers(ctx: &TestContext, name: &str) -> Result<(i32, i32, i32, i32)> {
    let budget = ctx.api::<PodUnavailableBudget>().get(name).await?;
    let status = budget.status.context("no status yet")?;
    Ok((
        status.unavailable_allowed,
        status.current_available,
        status.desired_available,
        status.total_replicas,
    ))
}

async fn wait_numbers(ctx: &TestContext, name: &str, want: (i32, i32, i32, i32)) -> Result<()> {
    let what = format!("budget {name} at (allowed, available, desired, total) {want:?}");
    poll_until(&what, Duration::from_secs(60), || async {
        let got = budget_numbers(ctx, name).await?;
        if got == want {
            Ok(Some(()))
        } else {
            bail!("{got:?}")
        }
    })
    .await
}

/// Polls the set's pods until `stop`, keeping the most seen unavailable (not Ready, or
/// terminating) at once.
fn watch_unavailable(
    ctx: TestContext,
    name: &'static str,
    stop: Arc<AtomicBool>,
    most: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.load(Ordering::SeqCst) {
            if let Ok(pods) = pods_of(&ctx, name).await {
                let unavailable = pods
                    .iter()
                    .filter(|p| {
                        p.metadata.deletion_timestamp.is_some()
                            || !stevedore_tests::pods::is_ready(p)
                    })
                    .count();
                most.fetch_max(unavailable, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

#[tokio::test]
async fn an_in_place_rollout_never_exceeds_the_budget() -> Result<()> {
    run_in_namespace("pub-inplace", |ctx| async move {
        let name = "web";
        // The budget comes first; its pods appear after it (kruise #1857).
        let target =
            json!({ "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": name });
        create_budget(
            &ctx,
            &budget(
                &ctx,
                "web-pub",
                json!({ "targetRef": target, "maxUnavailable": 1 }),
            ),
            false,
        )
        .await?;
        let mut cloneset = web_cloneset(&ctx, name, 6, "InPlaceIfPossible", Nodes::Kubelet);
        // The set alone would update 3 pods at once: the budget is what limits it.
        cloneset["spec"]["updateStrategy"]["maxUnavailable"] = json!(3);
        apply(&ctx, &cloneset).await?;
        wait_rolled_out(&ctx, name, ROLLOUT).await?;
        wait_numbers(&ctx, "web-pub", (1, 6, 5, 6)).await?;

        let stop = Arc::new(AtomicBool::new(false));
        let most = Arc::new(AtomicUsize::new(0));
        let watcher = watch_unavailable(ctx.clone(), name, stop.clone(), most.clone());
        set_image(&ctx, name, &ctx.cluster.image("web:v2")).await?;
        let rolled = poll_until(
            "the 6 pods to finish their in-place update",
            ROLLOUT,
            || async {
                let pods = pods_of(&ctx, name).await?;
                let v2 = ctx.cluster.image("web:v2");
                let done = pods.len() == 6
                    && pods.iter().all(|p| {
                        !cloneset_support::in_place_update_pending(p)
                            && stevedore_tests::pods::condition(p, INPLACE_UPDATE_READY).as_deref()
                                == Some("True")
                            && stevedore_tests::pods::is_running_and_ready(p)
                            && p.spec.as_ref().is_some_and(|s| {
                                s.containers[0].image.as_deref() == Some(v2.as_str())
                            })
                    });
                if done {
                    Ok(Some(()))
                } else {
                    bail!("{} pods, not all updated and ready", pods.len())
                }
            },
        )
        .await;
        stop.store(true, Ordering::SeqCst);
        watcher.await?;
        rolled?;
        let most = most.load(Ordering::SeqCst);
        eprintln!("at most {most} pod(s) unavailable at once during the rollout");
        ensure!(
            most <= 1,
            "{most} pods were unavailable at once under a budget of 1"
        );
        ensure!(
            most == 1,
            "no pod was ever seen unavailable: the poll missed the rollout"
        );
        // The set wanted more at once; the budget held the rest.
        wait_event(&ctx, name, "DisruptionHeld", &["web-pub"]).await?;
        wait_numbers(&ctx, "web-pub", (1, 6, 5, 6)).await?;
        let budget = ctx.api::<PodUnavailableBudget>().get("web-pub").await?;
        let status = budget.status.unwrap_or_default();
        ensure!(
            status.observed_generation == budget.metadata.generation,
            "{status:?}"
        );
        ensure!(
            status.unavailable_pods.is_empty() && status.disrupted_pods.is_empty(),
            "{status:?}"
        );
        // Scale-down deletes go through the same budget (its total follows the scale).
        let patch = json!({ "spec": { "replicas": 4 } });
        ctx.api::<stevedore_api::CloneSet>()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        wait_rolled_out(&ctx, name, ROLLOUT).await?;
        wait_numbers(&ctx, "web-pub", (1, 4, 3, 4)).await?;
        Ok(())
    })
    .await
}

/// Requests a recreate of container `web` of every pod of the set at once.
async fn recreate_every_pod(ctx: &TestContext, name: &str) -> Result<Vec<String>> {
    let mut requests = Vec::new();
    for pod in pods_of(ctx, name).await? {
        let pod_name = pod.metadata.name.context("a pod without a name")?;
        let request: ContainerRecreateRequest = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ContainerRecreateRequest",
            "metadata": { "name": format!("recreate-{pod_name}") },
            "spec": { "podName": pod_name, "containers": [{ "name": "web" }] },
        }))?;
        let created = ctx
            .api::<ContainerRecreateRequest>()
            .create(&PostParams::default(), &request)
            .await?;
        requests.push(created.metadata.name.unwrap_or_default());
    }
    Ok(requests)
}

/// The rollout and the recreates both done: every pod on `image`, ready, and every
/// request finished.
async fn both_done(ctx: &TestContext, name: &str, image: &str) -> Result<Option<()>> {
    let pods = pods_of(ctx, name).await?;
    let updated = pods.len() == 6
        && pods.iter().all(|p| {
            stevedore_tests::pods::is_running_and_ready(p)
                && p.spec
                    .as_ref()
                    .is_some_and(|s| s.containers[0].image.as_deref() == Some(image))
        });
    let requests = ctx
        .api::<ContainerRecreateRequest>()
        .list(&Default::default())
        .await?;
    let unfinished = (requests.items.iter())
        .filter(|r| !r.status.as_ref().is_some_and(|s| s.phase.is_finished()))
        .count();
    if updated && unfinished == 0 {
        Ok(Some(()))
    } else {
        bail!("pods updated and ready: {updated}; {unfinished} request(s) unfinished")
    }
}

#[tokio::test]
async fn two_workloads_disrupting_the_same_pods_stay_within_the_budget() -> Result<()> {
    run_in_namespace("pub-concurrent", |ctx| async move {
        let name = "shared";
        let target =
            json!({ "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": name });
        let spec = json!({ "targetRef": target, "maxUnavailable": 2 });
        create_budget(&ctx, &budget(&ctx, "shared-pub", spec), false).await?;
        let mut cloneset = web_cloneset(&ctx, name, 6, "InPlaceIfPossible", Nodes::Kubelet);
        // Alone, the set would update every pod at once.
        cloneset["spec"]["updateStrategy"]["maxUnavailable"] = json!(6);
        apply(&ctx, &cloneset).await?;
        wait_rolled_out(&ctx, name, ROLLOUT).await?;
        wait_numbers(&ctx, "shared-pub", (2, 6, 4, 6)).await?;

        let stop = Arc::new(AtomicBool::new(false));
        let most = Arc::new(AtomicUsize::new(0));
        let watcher = watch_unavailable(ctx.clone(), name, stop.clone(), most.clone());
        let v2 = ctx.cluster.image("web:v2");
        // Both actors start together: the rollout and a recreate of every pod.
        let (rollout, recreates) =
            tokio::join!(set_image(&ctx, name, &v2), recreate_every_pod(&ctx, name));
        let outcome = match (rollout, recreates) {
            (Ok(_), Ok(_)) => {
                poll_until("the rollout and the recreates", ROLLOUT, || {
                    both_done(&ctx, name, &v2)
                })
                .await
            }
            (Err(err), _) | (_, Err(err)) => Err(err),
        };
        stop.store(true, Ordering::SeqCst);
        watcher.await?;
        outcome?;
        let most = most.load(Ordering::SeqCst);
        eprintln!("at most {most} pod(s) unavailable at once under both actors");
        ensure!(
            most <= 2,
            "{most} pods were unavailable at once under a budget of 2"
        );
        ensure!(
            most >= 1,
            "no pod was ever seen unavailable: the poll missed the disruptions"
        );
        let requests = ctx
            .api::<ContainerRecreateRequest>()
            .list(&Default::default())
            .await?;
        for request in requests {
            let status = request.status.unwrap_or_default();
            ensure!(
                status.phase == Phase::Completed,
                "{:?} ended {status:?}",
                request.metadata.name
            );
        }
        Ok(())
    })
    .await
}

/// `count` bare pods `<prefix>-<i>` labelled `app: <prefix>` on node `node`, running
/// `command` (the web image's own server when empty).
async fn bare_pods(
    ctx: &TestContext,
    prefix: &str,
    node: &str,
    count: usize,
    command: &[&str],
) -> Result<()> {
    use k8s_openapi::api::core::v1::Pod;
    for i in 0..count {
        let mut pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": { "name": format!("{prefix}-{i}"), "labels": { "app": prefix } },
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": 5,
                "containers": [{ "name": "main", "image": ctx.cluster.image("web:v1") }],
            },
        });
        if !command.is_empty() {
            pod["spec"]["containers"][0]["command"] = json!(command);
        }
        let pod: Pod = serde_json::from_value(pod)?;
        ctx.api::<Pod>()
            .create(&PostParams::default(), &pod)
            .await?;
    }
    Ok(())
}

/// A kwok node of this test alone (`test_nodes`: its own taint), drained by nobody else.
async fn own_kwok_node(ctx: &TestContext) -> Result<String> {
    let name = format!("{}-drain", ctx.namespace);
    test_nodes::create(ctx, &name, TestNode::default()).await?;
    Ok(name)
}

/// Deletes the test's budgets and pods at once, waits for the pods to go, then removes `node` (a pod
/// whose node is gone would never finish terminating).
async fn remove_pods_then_node(ctx: &TestContext, node: Option<&str>) {
    use k8s_openapi::api::core::v1::{Node, Pod};
    // The budgets go first, or they would hold these deletes too.
    let _ = ctx
        .api::<PodUnavailableBudget>()
        .delete_collection(&Default::default(), &Default::default())
        .await;
    let now = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let _ = ctx
        .api::<Pod>()
        .delete_collection(&now, &Default::default())
        .await;
    let _ = poll_until("the test's pods gone", Duration::from_secs(30), || async {
        let left = ctx.api::<Pod>().list(&Default::default()).await?.items;
        Ok(left.is_empty().then_some(()))
    })
    .await;
    if let Some(node) = node {
        let _ = kube::Api::<Node>::all(ctx.client.clone())
            .delete(node, &Default::default())
            .await;
    }
}

/// Deletes and evictions from outside Stevedore go through the admission webhook: while
/// the budget allows none, `kubectl delete pod` and an eviction are refused naming it and
/// nothing is disrupted; once it allows one, `kubectl drain` evicts the pods as the
/// budget lets it (kwok removes an evicted pod at once, so each leaves room for the next).
#[tokio::test]
async fn outside_deletes_and_drains_of_protected_pods_wait_for_the_budget() -> Result<()> {
    use k8s_openapi::api::core::v1::Pod;
    run_in_namespace("pub-outside", |ctx| async move {
        let selector = json!({ "matchLabels": { "app": "guarded" } });
        let spec = json!({ "selector": selector, "maxUnavailable": 0 });
        create_budget(&ctx, &budget(&ctx, "guarded", spec), false).await?;
        let node = own_kwok_node(&ctx).await?;
        let outcome = async {
            bare_pods(&ctx, "guarded", &node, 3, &[]).await?;
            wait_numbers(&ctx, "guarded", (0, 3, 3, 3)).await?;

            let refused = ctx
                .kubectl(&["delete", "pod", "guarded-0", "--wait=false"])
                .await;
            let said = format!(
                "{:#}",
                refused.err().context("kubectl delete went through")?
            );
            ensure!(
                said.contains("PodUnavailableBudget guarded"),
                "the refusal names the budget: {said}"
            );
            let once = ctx.cluster.client_without_retries().await?;
            let pods = kube::Api::<Pod>::namespaced(once, &ctx.namespace);
            let evicted = pods.evict("guarded-1", &Default::default()).await;
            let refusal = format!("{:#}", evicted.err().context("the eviction went through")?);
            ensure!(
                refusal.contains("Cannot evict pod guarded-1") && refusal.contains("429"),
                "an eviction is refused with 429 naming the pod: {refusal}"
            );
            let listed = pods.list(&Default::default()).await?.items;
            ensure!(
                listed.len() == 3
                    && listed
                        .iter()
                        .all(|p| p.metadata.deletion_timestamp.is_none()),
                "nothing was disrupted"
            );

            let patch = json!({ "spec": { "maxUnavailable": 1 } });
            ctx.api::<PodUnavailableBudget>()
                .patch("guarded", &PatchParams::default(), &Patch::Merge(patch))
                .await?;
            wait_numbers(&ctx, "guarded", (1, 3, 2, 3)).await?;
            ctx.kubectl(&[
                "drain",
                &node,
                "--pod-selector=app=guarded",
                "--force",
                "--timeout=90s",
            ])
            .await
            .context("kubectl drain did not finish")?;
            poll_until(
                "every guarded pod gone",
                Duration::from_secs(60),
                || async {
                    let left = ctx.api::<Pod>().list(&Default::default()).await?.items;
                    Ok(left.is_empty().then_some(()))
                },
            )
            .await
        }
        .await;
        remove_pods_then_node(&ctx, Some(&node)).await;
        outcome
    })
    .await
}

/// The webhook's check-and-decrement under concurrency: of two deletes sent at once by
/// people, with a budget of one, exactly one goes through. The pods run on the kubelet
/// node and ignore SIGTERM, so a deleted pod stays terminating (unavailable) for its
/// grace period and the budget stays spent while the second delete is decided.
#[tokio::test]
async fn two_outside_deletes_at_once_never_both_pass_a_budget_of_one() -> Result<()> {
    use k8s_openapi::api::core::v1::Pod;
    run_in_namespace("pub-outside-race", |ctx| async move {
        let selector = json!({ "matchLabels": { "app": "racing" } });
        let spec = json!({ "selector": selector, "maxUnavailable": 1 });
        create_budget(&ctx, &budget(&ctx, "racing", spec), false).await?;
        let stubborn = ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"];
        let outcome = async {
            bare_pods(&ctx, "racing", &ctx.cluster.node_name, 3, &stubborn).await?;
            wait_numbers(&ctx, "racing", (1, 3, 2, 3)).await?;
            let once = ctx.cluster.client_without_retries().await?;
            let pods = kube::Api::<Pod>::namespaced(once, &ctx.namespace);
            let dp = kube::api::DeleteParams::default();
            let (first, second) =
                tokio::join!(pods.delete("racing-0", &dp), pods.delete("racing-1", &dp));
            let refused: Vec<String> = [first, second]
                .into_iter()
                .filter_map(|r| r.err().map(|e| format!("{e:#}")))
                .collect();
            ensure!(
                refused.len() == 1 && refused[0].contains("PodUnavailableBudget racing"),
                "exactly one of two concurrent deletes is refused, naming the budget: {refused:?}"
            );
            Ok(())
        }
        .await;
        remove_pods_then_node(&ctx, None).await;
        outcome
    })
    .await
}

/// OpenKruise's pod marks: an `unavailable-pod.kruise.io/<anything>: "true"` label makes a
/// Ready pod unavailable to the budget at once (currentAvailable and unavailableAllowed
/// drop), and a `pub.kruise.io/no-protect: "true"` annotation lets a pod go whatever the
/// budget allows.
#[tokio::test]
async fn openkruise_pod_marks_count_a_pod_unavailable_or_unprotected() -> Result<()> {
    use k8s_openapi::api::core::v1::Pod;
    run_in_namespace("pub-pod-marks", |ctx| async move {
        let selector = json!({ "matchLabels": { "app": "marked" } });
        let spec = json!({ "selector": selector, "maxUnavailable": 1 });
        create_budget(&ctx, &budget(&ctx, "marked", spec), false).await?;
        let node = own_kwok_node(&ctx).await?;
        let outcome = async {
            bare_pods(&ctx, "marked", &node, 3, &[]).await?;
            wait_numbers(&ctx, "marked", (1, 3, 2, 3)).await?;
            let mark = |body: Value| {
                let pods = ctx.api::<Pod>();
                async move {
                    pods.patch("marked-0", &PatchParams::default(), &Patch::Merge(body))
                        .await
                }
            };
            mark(
                json!({ "metadata": { "labels": { "unavailable-pod.kruise.io/drain": "true" } } }),
            )
            .await?;
            wait_numbers(&ctx, "marked", (0, 2, 2, 3)).await?;

            // The budget allows nothing now; an unprotected pod still goes.
            let pods = ctx.api::<Pod>();
            let body =
                json!({ "metadata": { "annotations": { "pub.kruise.io/no-protect": "true" } } });
            pods.patch("marked-1", &PatchParams::default(), &Patch::Merge(body))
                .await?;
            let once = ctx.cluster.client_without_retries().await?;
            kube::Api::<Pod>::namespaced(once, &ctx.namespace)
                .delete("marked-1", &Default::default())
                .await
                .context("deleting the no-protect pod")?;
            let refused = ctx
                .kubectl(&["delete", "pod", "marked-2", "--wait=false"])
                .await;
            ensure!(
                refused.is_err(),
                "a protected pod is still held while the budget allows none"
            );
            Ok(())
        }
        .await;
        remove_pods_then_node(&ctx, Some(&node)).await;
        outcome
    })
    .await
}

const PROTECT_OPERATIONS: &str = "kruise.io/pub-protect-operations";
const PROTECT_TOTAL_REPLICAS: &str = "pub.kruise.io/protect-total-replicas";

/// The budgets of the test's namespace as `policy.kruise.io/<version>`.
fn budgets_in(ctx: &TestContext, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("policy.kruise.io", version, "PodUnavailableBudget");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "podunavailablebudgets");
    Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &resource)
}

/// `policy.kruise.io/v1beta1` is served through the control plane's conversion webhook
/// (v1alpha1 stays stored): a v1alpha1 budget's two annotations read back as v1beta1's
/// `spec.protectOperations` and `spec.protectTotalReplicas`, a v1beta1 budget's fields as
/// v1alpha1's annotations, and `kubectl get pub` reads the preferred version, v1beta1.
#[tokio::test]
async fn budgets_read_in_either_version_with_the_annotations_as_fields() -> Result<()> {
    run_in_namespace("pub-versions", |ctx| async move {
        let selector = json!({ "matchLabels": { "app": "web" } });
        let mut alpha = budget(&ctx, "alpha-pub", json!({ "selector": selector, "maxUnavailable": 1 }));
        alpha["metadata"]["annotations"] = json!({
            PROTECT_OPERATIONS: "DELETE,EVICT",
            PROTECT_TOTAL_REPLICAS: "5",
        });
        create_budget(&ctx, &alpha, false).await?;
        let as_beta = budgets_in(&ctx, "v1beta1").get("alpha-pub").await?;
        let spec = &as_beta.data["spec"];
        ensure!(
            spec["protectOperations"] == json!(["DELETE", "EVICT"]) && spec["protectTotalReplicas"] == 5,
            "the v1alpha1 budget read as v1beta1 has spec {spec}"
        );

        let beta: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "policy.kruise.io/v1beta1",
            "kind": "PodUnavailableBudget",
            "metadata": { "name": "beta-pub", "namespace": ctx.namespace },
            "spec": {
                "targetRef": { "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web" },
                "minAvailable": 2,
                "protectOperations": ["UPDATE"],
                "protectTotalReplicas": 3,
            },
        }))?;
        budgets_in(&ctx, "v1beta1")
            .create(&PostParams::default(), &beta)
            .await
            .context("creating a v1beta1 budget")?;
        let as_alpha = ctx.api::<PodUnavailableBudget>().get("beta-pub").await?;
        let annotations = as_alpha.metadata.annotations.unwrap_or_default();
        ensure!(
            annotations.get(PROTECT_OPERATIONS).map(String::as_str) == Some("UPDATE")
                && annotations.get(PROTECT_TOTAL_REPLICAS).map(String::as_str) == Some("3"),
            "the v1beta1 budget read as v1alpha1 has annotations {annotations:?}"
        );

        let out = ctx
            .kubectl(&["get", "podunavailablebudgets.v1beta1.policy.kruise.io"])
            .await?;
        ensure!(
            out.contains("alpha-pub") && out.contains("beta-pub"),
            "kubectl get (v1beta1): {out}"
        );
        let versions = ["get", "pub", "-o", "jsonpath={.items[*].apiVersion}"];
        let out = ctx.kubectl(&versions).await?;
        ensure!(
            out.split_whitespace().all(|v| v == "policy.kruise.io/v1beta1"),
            "kubectl get pub reads {out}, not the preferred policy.kruise.io/v1beta1"
        );
        Ok(())
    })
    .await
}

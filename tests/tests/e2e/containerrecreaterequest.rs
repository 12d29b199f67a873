//! ContainerRecreateRequest end to end on the real kubelet node: the control plane asks the
//! node's agent to restart containers of a real two-container pod in place (same pod UID,
//! the named container's restartCount + 1, the other untouched), with
//! `unreadyGracePeriodSeconds` (KruisePodReady False, then True) and `orderedRecreate`
//! observable; a second request for the same pod waits for the first and then runs; as
//! OpenKruise's mutating webhook, a request is filled from its pod at create (labels,
//! `statusContext`, strategy defaults), its spec and those labels are immutable, and a
//! request for a missing pod or container is refused naming the field; one whose pod goes
//! ends Completed with OpenKruise's `pod has gone`; the CRD refuses bad requests; a
//! PodUnavailableBudget with no disruption left holds a request Pending (naming it) until
//! it allows one, and the admitted recreate is recorded until the pod is ready again.
//!
//! Run against a control plane with the `containerrecreaterequest` and
//! `podunavailablebudget` controllers, and its ContainerRecreateRequest webhook installed
//! (`deploy/controlplane/webhook.yaml`).

use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, ensure};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::containerrecreaterequest::{
    ContainerRecreateRequestPhase as Phase, NODE_NAME_LABEL, POD_NAME_LABEL, POD_UID_LABEL,
};
use stevedore_api::{ContainerRecreateRequest, PodUnavailableBudget};
use stevedore_tests::pods::condition;
use stevedore_tests::{TestContext, invariant, poll_until, run_in_namespace};

const POD_START: Duration = Duration::from_secs(180);
const RECREATE: Duration = Duration::from_secs(120);
const KRUISE_POD_READY: &str = "KruisePodReady";

/// A pod on the kubelet node with containers `web` (httpd) and `side` (sleep), gated on
/// KruisePodReady, running.
async fn two_container_pod(ctx: &TestContext, name: &str) -> Result<Pod> {
    let image = ctx.cluster.image("web:v1");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "nodeName": ctx.cluster.node_name,
            "readinessGates": [{ "conditionType": KRUISE_POD_READY }],
            "terminationGracePeriodSeconds": 2,
            "containers": [
                { "name": "web", "image": image, "imagePullPolicy": "IfNotPresent" },
                {
                    "name": "side", "image": image, "imagePullPolicy": "IfNotPresent",
                    "command": ["/bin/sleep", "36000"],
                },
            ],
        },
    }))?;
    ctx.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await?;
    poll_until(&format!("pod {name} running"), POD_START, || async {
        let pod = ctx.api::<Pod>().get(name).await?;
        let statuses = container_statuses(&pod);
        let running = statuses.len() == 2
            && statuses
                .iter()
                .all(|c| c.state.as_ref().and_then(|s| s.running.as_ref()).is_some());
        Ok(running.then_some(pod))
    })
    .await
}

fn container_statuses(pod: &Pod) -> Vec<ContainerStatus> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default()
}

/// (restartCount, containerID, startedAt) of container `name`.
fn container(pod: &Pod, name: &str) -> Result<(i32, String, String)> {
    let status = container_statuses(pod)
        .into_iter()
        .find(|c| c.name == name)
        .with_context(|| format!("no status of container {name}"))?;
    let started = status
        .state
        .and_then(|s| s.running)
        .and_then(|r| r.started_at)
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    Ok((
        status.restart_count,
        status.container_id.unwrap_or_default(),
        started,
    ))
}

/// Creates a request from raw JSON (untyped, so the apiserver judges what the types would
/// refuse); returns the request as the create answered it (after admission).
async fn create_request(ctx: &TestContext, name: &str, spec: Value) -> Result<Value> {
    let request: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ContainerRecreateRequest",
        "metadata": { "name": name },
        "spec": spec,
    }))?;
    let resource = ApiResource::erase::<ContainerRecreateRequest>(&());
    let created =
        Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &ctx.namespace, &resource)
            .create(&PostParams::default(), &request)
            .await?;
    Ok(serde_json::to_value(created)?)
}

/// Waits until request `name` is finished; returns it.
async fn finished(ctx: &TestContext, name: &str) -> Result<ContainerRecreateRequest> {
    poll_until(&format!("request {name} finished"), RECREATE, || async {
        let request = ctx.api::<ContainerRecreateRequest>().get(name).await?;
        let done = request
            .status
            .as_ref()
            .is_some_and(|s| s.phase.is_finished());
        Ok(done.then_some(request))
    })
    .await
}

fn phase(request: &ContainerRecreateRequest) -> Option<Phase> {
    request.status.as_ref().map(|s| s.phase)
}

#[tokio::test]
async fn recreates_one_container_in_place_marking_the_pod_unready_first() -> Result<()> {
    run_in_namespace("crr-one", |ctx| async move {
        let before = two_container_pod(&ctx, "two").await?;
        let (web_restarts, _, _) = container(&before, "web")?;
        let (side_restarts, side_id, _) = container(&before, "side")?;
        create_request(
            &ctx,
            "restart-web",
            json!({
                "podName": "two",
                "containers": [{ "name": "web" }],
                "strategy": { "unreadyGracePeriodSeconds": 3 },
            }),
        )
        .await?;

        // Follow the pod's KruisePodReady while the request runs.
        let seen = Mutex::new(Vec::new());
        let request = poll_until("request restart-web finished", RECREATE, || async {
            let pod = ctx.api::<Pod>().get("two").await?;
            let ready = condition(&pod, KRUISE_POD_READY);
            seen.lock().map_err(|_| anyhow!("poisoned"))?.push(ready);
            let request = ctx.api::<ContainerRecreateRequest>().get("restart-web").await?;
            Ok(phase(&request).is_some_and(Phase::is_finished).then_some(request))
        })
        .await?;
        let seen = seen.into_inner().map_err(|_| anyhow!("poisoned"))?;
        let status = request.status.clone().unwrap_or_default();
        ensure!(status.phase == Phase::Completed, "request ended {status:?}");
        ensure!(status.completion_time.is_some(), "no completionTime: {status:?}");
        let states: Vec<(&str, Phase)> = (status.container_recreate_states.iter())
            .map(|s| (s.name.as_str(), s.phase))
            .collect();
        ensure!(states == [("web", Phase::Succeeded)], "{states:?}");

        let labels = request.metadata.labels.clone().unwrap_or_default();
        ensure!(labels.get(POD_NAME_LABEL).map(String::as_str) == Some("two"), "{labels:?}");
        ensure!(labels.get(POD_UID_LABEL) == before.metadata.uid.as_ref(), "{labels:?}");
        ensure!(labels.get(NODE_NAME_LABEL) == Some(&ctx.cluster.node_name), "{labels:?}");

        let after = poll_until("web running again", RECREATE, || async {
            let pod = ctx.api::<Pod>().get("two").await?;
            let (restarts, _, started) = container(&pod, "web")?;
            Ok((restarts == web_restarts + 1 && !started.is_empty()).then_some(pod))
        })
        .await?;
        ensure!(after.metadata.uid == before.metadata.uid, "the pod was replaced");
        let (side_after, side_id_after, _) = container(&after, "side")?;
        ensure!(
            side_after == side_restarts && side_id_after == side_id,
            "side was touched: restarts {side_restarts} -> {side_after}, {side_id} -> {side_id_after}"
        );
        ensure!(
            seen.iter().any(|s| s.as_deref() == Some("False")),
            "KruisePodReady never False while recreating: {seen:?}"
        );
        ensure!(
            condition(&after, KRUISE_POD_READY).as_deref() == Some("True"),
            "KruisePodReady not True afterwards: {:?}",
            condition(&after, KRUISE_POD_READY)
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ordered_recreate_then_a_queued_second_request() -> Result<()> {
    run_in_namespace("crr-ordered", |ctx| async move {
        let before = two_container_pod(&ctx, "two").await?;
        let (web_restarts, _, _) = container(&before, "web")?;
        let (side_restarts, _, _) = container(&before, "side")?;
        create_request(
            &ctx,
            "both",
            json!({
                "podName": "two",
                "containers": [{ "name": "side" }, { "name": "web" }],
                "strategy": { "orderedRecreate": true },
            }),
        )
        .await?;
        // Created while the first runs: it waits its turn, then runs (rollouts#207).
        create_request(
            &ctx,
            "web-again",
            json!({ "podName": "two", "containers": [{ "name": "web" }] }),
        )
        .await?;
        // orderedRecreate: `web` starts only once `side` (listed first) is recreated and
        // running again, at every status the request shows on its way.
        let first = poll_until("request both finished", RECREATE, || async {
            let request = ctx.api::<ContainerRecreateRequest>().get("both").await?;
            let status = request.status.clone().unwrap_or_default();
            let of = |name: &str| {
                (status.container_recreate_states.iter())
                    .find(|s| s.name == name)
                    .map(|s| s.phase)
            };
            let web_started = matches!(of("web"), Some(Phase::Recreating | Phase::Succeeded));
            invariant(!web_started || of("side") == Some(Phase::Succeeded), || {
                format!("web recreated before side was done: {status:?}")
            })?;
            Ok(status.phase.is_finished().then_some(request))
        })
        .await?;
        ensure!(
            phase(&first) == Some(Phase::Completed),
            "{:?}",
            first.status
        );
        let second = finished(&ctx, "web-again").await?;
        ensure!(
            phase(&second) == Some(Phase::Completed),
            "{:?}",
            second.status
        );
        let first_done = first.status.and_then(|s| s.completion_time).map(|t| t.0);
        let second_done = second.status.and_then(|s| s.completion_time).map(|t| t.0);
        ensure!(
            second_done >= first_done,
            "{second_done:?} before {first_done:?}"
        );

        let after = poll_until("both containers restarted", RECREATE, || async {
            let pod = ctx.api::<Pod>().get("two").await?;
            let (web, _, web_started) = container(&pod, "web")?;
            let (side, _, side_started) = container(&pod, "side")?;
            let done = web == web_restarts + 2 && side == side_restarts + 1;
            Ok((done && !web_started.is_empty() && !side_started.is_empty()).then_some(pod))
        })
        .await?;
        ensure!(
            after.metadata.uid == before.metadata.uid,
            "the pod was replaced"
        );
        Ok(())
    })
    .await
}

/// A ready one-container pod `name` (httpd) labelled `app: guarded`, on the kubelet node.
async fn guarded_pod(ctx: &TestContext, name: &str) -> Result<Pod> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "app": "guarded" } },
        "spec": {
            "nodeName": ctx.cluster.node_name,
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "web", "image": ctx.cluster.image("web:v1"),
                "imagePullPolicy": "IfNotPresent",
            }],
        },
    }))?;
    ctx.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await?;
    poll_until(&format!("pod {name} ready"), POD_START, || async {
        let pod = ctx.api::<Pod>().get(name).await?;
        Ok((condition(&pod, "Ready").as_deref() == Some("True")).then_some(pod))
    })
    .await
}

async fn budget_status(ctx: &TestContext, name: &str) -> Result<Value> {
    let budget = ctx.api::<PodUnavailableBudget>().get(name).await?;
    Ok(serde_json::to_value(&budget)?["status"].clone())
}

#[tokio::test]
async fn an_exhausted_budget_holds_the_request_pending_until_it_allows() -> Result<()> {
    run_in_namespace("crr-budget", |ctx| async move {
        let before = guarded_pod(&ctx, "guarded").await?;
        let (restarts, _, _) = container(&before, "web")?;
        let budget: PodUnavailableBudget = serde_json::from_value(json!({
            "apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
            "metadata": { "name": "guard" },
            "spec": { "selector": { "matchLabels": { "app": "guarded" } }, "maxUnavailable": 0 },
        }))?;
        let budgets = ctx.api::<PodUnavailableBudget>();
        budgets.create(&PostParams::default(), &budget).await?;
        poll_until("the budget counts the pod", RECREATE, || async {
            let status = budget_status(&ctx, "guard").await?;
            Ok((status["currentAvailable"] == 1).then_some(()))
        })
        .await?;

        create_request(
            &ctx,
            "held",
            json!({ "podName": "guarded", "containers": [{ "name": "web" }] }),
        )
        .await?;
        let message = poll_until("the request held by the budget", RECREATE, || async {
            let request = ctx.api::<ContainerRecreateRequest>().get("held").await?;
            let status = request.status.unwrap_or_default();
            let held = status.phase == Phase::Pending
                && status.message.contains("PodUnavailableBudget guard");
            Ok(held.then_some(status.message))
        })
        .await?;
        // Held for a while: retried, still Pending, the container untouched.
        tokio::time::sleep(Duration::from_secs(12)).await;
        let request = ctx.api::<ContainerRecreateRequest>().get("held").await?;
        ensure!(
            phase(&request) == Some(Phase::Pending),
            "{message}; then {:?}",
            request.status
        );
        let pod = ctx.api::<Pod>().get("guarded").await?;
        ensure!(
            container(&pod, "web")?.0 == restarts,
            "recreated while held"
        );

        let allow = json!({ "spec": { "maxUnavailable": 1 } });
        budgets
            .patch("guard", &PatchParams::default(), &Patch::Merge(&allow))
            .await?;
        let request = finished(&ctx, "held").await?;
        ensure!(
            phase(&request) == Some(Phase::Completed),
            "{:?}",
            request.status
        );
        // Completed means the agent stopped the container; the kubelet starts the new one
        // (as in the first test, the restart count moves shortly after).
        poll_until("web recreated", RECREATE, || async {
            let pod = ctx.api::<Pod>().get("guarded").await?;
            Ok((container(&pod, "web")?.0 == restarts + 1).then_some(()))
        })
        .await?;
        // The recreate was recorded in the budget, and the record ends once the pod is
        // ready again (well before the two-minute expiry).
        poll_until(
            "the budget whole again",
            Duration::from_secs(60),
            || async {
                let status = budget_status(&ctx, "guard").await?;
                let whole = status["unavailablePods"]
                    .as_object()
                    .is_none_or(|m| m.is_empty())
                    && status["unavailableAllowed"] == 1;
                Ok(whole.then_some(()))
            },
        )
        .await
    })
    .await
}

#[tokio::test]
async fn a_request_for_a_missing_pod_or_container_is_refused_naming_the_field() -> Result<()> {
    // OpenKruise's mutating webhook refuses both at create; a request that is admitted
    // is deleted once its ttlSecondsAfterFinished has passed.
    run_in_namespace("crr-missing", |ctx| async move {
        two_container_pod(&ctx, "two").await?;
        let cases = [
            (
                "no-pod",
                json!({ "podName": "absent", "containers": [{ "name": "web" }] }),
                ["spec.podName", "absent"],
            ),
            (
                "ghost",
                json!({ "podName": "two", "containers": [{ "name": "ghost" }] }),
                ["spec.containers[0].name", "ghost"],
            ),
        ];
        for (name, spec, words) in cases {
            let err = create_request(&ctx, name, spec)
                .await
                .err()
                .with_context(|| format!("the request {name} was admitted"))?;
            let message = format!("{err:#}");
            ensure!(words.iter().all(|w| message.contains(w)), "{name}: {message}");
        }

        create_request(
            &ctx,
            "short-lived",
            json!({ "podName": "two", "containers": [{ "name": "side" }], "ttlSecondsAfterFinished": 1 }),
        )
        .await?;
        poll_until("request short-lived deleted after its TTL", RECREATE, || async {
            let gone = ctx
                .api::<ContainerRecreateRequest>()
                .get_opt("short-lived")
                .await?
                .is_none();
            Ok(gone.then_some(()))
        })
        .await
    })
    .await
}

#[tokio::test]
async fn a_request_whose_pod_is_gone_ends_completed_saying_so() -> Result<()> {
    // OpenKruise completes it (phase Completed, message "pod has gone"), not Failed. A
    // request can only be made for a running pod, so the pod goes while the request
    // waits out its unready grace.
    run_in_namespace("crr-pod-gone", |ctx| async move {
        two_container_pod(&ctx, "two").await?;
        create_request(
            &ctx,
            "orphan",
            json!({
                "podName": "two",
                "containers": [{ "name": "web" }],
                "strategy": { "unreadyGracePeriodSeconds": 600 },
            }),
        )
        .await?;
        ctx.api::<Pod>()
            .delete("two", &DeleteParams::default().grace_period(0))
            .await?;
        let request = finished(&ctx, "orphan").await?;
        let status = request.status.unwrap_or_default();
        ensure!(
            status.phase == Phase::Completed && status.message == "pod has gone",
            "{status:?}"
        );
        ensure!(status.completion_time.is_some(), "{status:?}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn admission_fills_the_request_from_its_pod_and_keeps_it_immutable() -> Result<()> {
    // As OpenKruise's mutating webhook: the created object already carries the pod's
    // labels, each container's statusContext and the strategy's defaults; the spec and
    // those labels cannot change afterwards, other labels can.
    run_in_namespace("crr-admission", |ctx| async move {
        let pod = two_container_pod(&ctx, "two").await?;
        let (restarts, container_id, _) = container(&pod, "side")?;
        let created = create_request(
            &ctx,
            "restart-side",
            json!({ "podName": "two", "containers": [{ "name": "side" }] }),
        )
        .await?;
        let labels = &created["metadata"]["labels"];
        ensure!(labels[POD_NAME_LABEL] == json!("two"), "{labels}");
        ensure!(labels[POD_UID_LABEL] == json!(pod.metadata.uid), "{labels}");
        ensure!(
            labels[NODE_NAME_LABEL] == json!(ctx.cluster.node_name),
            "{labels}"
        );
        let context = &created["spec"]["containers"][0]["statusContext"];
        ensure!(
            *context == json!({ "containerID": container_id, "restartCount": restarts }),
            "{context}"
        );
        let strategy = &created["spec"]["strategy"];
        ensure!(
            *strategy == json!({ "failurePolicy": "Fail", "terminationGracePeriodSeconds": 2 }),
            "{strategy}"
        );

        let requests = ctx.api::<ContainerRecreateRequest>();
        let refused = [
            (
                json!({ "spec": { "activeDeadlineSeconds": 600 } }),
                "spec.activeDeadlineSeconds",
            ),
            (
                json!({ "metadata": { "labels": { POD_UID_LABEL: "another" } } }),
                POD_UID_LABEL,
            ),
            (
                json!({ "metadata": { "labels": { NODE_NAME_LABEL: null } } }),
                NODE_NAME_LABEL,
            ),
        ];
        for (patch, field) in refused {
            let err = requests
                .patch(
                    "restart-side",
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .err()
                .with_context(|| format!("{patch} was admitted"))?;
            let message = err.to_string();
            ensure!(
                message.contains(field) && message.contains("immutable"),
                "{patch}: {message}"
            );
        }
        let team = json!({ "metadata": { "labels": { "team": "shop" } } });
        requests
            .patch(
                "restart-side",
                &PatchParams::default(),
                &Patch::Merge(&team),
            )
            .await
            .context("a label of its own was refused")?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn the_crd_refuses_bad_requests_naming_the_field() -> Result<()> {
    run_in_namespace("crr-crd", |ctx| async move {
        let cases = [
            ("no-containers", json!({ "podName": "p", "containers": [] }), "containers"),
            (
                "twice",
                json!({ "podName": "p", "containers": [{ "name": "a" }, { "name": "a" }] }),
                "only once",
            ),
            (
                "negative",
                json!({ "podName": "p", "containers": [{ "name": "a" }], "activeDeadlineSeconds": -1 }),
                "activeDeadlineSeconds",
            ),
            (
                "bad-policy",
                json!({ "podName": "p", "containers": [{ "name": "a" }], "strategy": { "failurePolicy": "Sometimes" } }),
                "failurePolicy",
            ),
        ];
        for (name, spec, field) in cases {
            let err = create_request(&ctx, name, spec)
                .await
                .err()
                .with_context(|| format!("{name} was accepted"))?;
            ensure!(format!("{err:#}").contains(field), "{name}: {err:#}");
        }
        // The defaults and the immutable spec: see
        // admission_fills_the_request_from_its_pod_and_keeps_it_immutable.
        Ok(())
    })
    .await
}

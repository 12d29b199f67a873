//! PodProbeMarker on the real kubelet node: the node's agent runs an exec probe (through
//! containerd, in the container) and a tcpSocket probe (from the node to the pod's IP);
//! the control plane writes what they find to the pod (its condition and markerPolicy
//! labels) and to the node's NodePodProbe status, and the marker's status counts its
//! matched pods. Bad input is refused by the CRD,
//! naming the field.
//!
//! The probed container serves HTTP on 8080 at once, creates `/tmp/healthy` after
//! `CREATE_AFTER` seconds and removes it `REMOVE_AFTER` seconds after starting, so the
//! exec probe (`cat /tmp/healthy`, every `PERIOD` seconds, one failure enough) turns the
//! condition True after the creation and False after the removal. Each flip is checked
//! against the container's `startedAt` (second precision, hence a second of slack) to
//! come after the change, never before; how long after is printed, not asserted: suites
//! run beside others on a shared machine, so only the polling deadline (`WAIT`) bounds
//! it. The exec probe's timeout is long for the same reason: a slow exec must not read
//! as a failure while the file is there.
//!
//! Run against a control plane with the `podprobemarker` controller and agents that
//! serve `ProbeService`.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt as _;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use stevedore_api::{NodePodProbe, PodProbeMarker};
use stevedore_tests::pods;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

const MARKER_CRD: &str = include_str!("../../../deploy/crds/apps.kruise.io_podprobemarkers.yaml");
const NODE_CRD: &str = include_str!("../../../deploy/crds/apps.kruise.io_nodepodprobes.yaml");

const CONDITION: &str = "stevedore.dev/healthy";
const TCP_CONDITION: &str = "stevedore.dev/serving";
const LABEL: &str = "stevedore.dev/healthy";
const PERIOD: i64 = 2;
/// The exec probe's timeout: far above an exec's time on an idle node.
const EXEC_TIMEOUT: i64 = 10;
const CREATE_AFTER: i64 = 10;
const REMOVE_AFTER: i64 = 30;
const WAIT: Duration = Duration::from_secs(90);

fn marker(probes: Value) -> Result<PodProbeMarker> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": { "name": "health" },
        "spec": { "selector": { "matchLabels": { "app": "probed" } }, "probes": probes },
    }))?)
}

fn probes() -> Value {
    json!([
        {
            "name": "healthy", "containerName": "web", "podConditionType": CONDITION,
            "probe": {
                "exec": { "command": ["cat", "/tmp/healthy"] },
                "periodSeconds": PERIOD, "timeoutSeconds": EXEC_TIMEOUT, "failureThreshold": 1,
            },
            "markerPolicy": [
                { "state": "Succeeded", "labels": { LABEL: "true" } },
                { "state": "Failed", "labels": { LABEL: "false" } },
            ],
        },
        {
            "name": "serving", "containerName": "web", "podConditionType": TCP_CONDITION,
            "probe": { "tcpSocket": { "port": "http" }, "periodSeconds": PERIOD },
        },
    ])
}

fn probed_pod(ctx: &TestContext) -> Result<Pod> {
    // The test image's busybox links no `touch` or `rm` applet: the shell's redirection
    // creates the file and busybox itself removes it.
    let script = format!(
        "httpd -p 8080 -h /www; sleep {CREATE_AFTER}; : > /tmp/healthy; sleep {}; \
         /bin/busybox rm /tmp/healthy; exec sleep 3600",
        REMOVE_AFTER - CREATE_AFTER
    );
    Ok(serde_json::from_value(json!({
        "metadata": { "name": "probed", "labels": { "app": "probed" } },
        "spec": {
            "nodeName": ctx.cluster.node_name,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "web",
                "image": ctx.cluster.image("web:v1"),
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", script],
                "ports": [{ "name": "http", "containerPort": 8080 }],
            }],
        },
    }))?)
}

/// The condition's status and lastTransitionTime.
fn condition(pod: &Pod, type_: &str) -> Option<(String, Timestamp)> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let found = conditions.iter().find(|c| c.type_ == type_)?;
    Some((found.status.clone(), found.last_transition_time.as_ref()?.0))
}

/// Waits until the pod's `type_` condition is `status`; its transition time.
async fn wait_condition(ctx: &TestContext, type_: &str, status: &str) -> Result<(Pod, Timestamp)> {
    poll_until(&format!("pod condition {type_}={status}"), WAIT, || async {
        let pod = ctx.api::<Pod>().get("probed").await?;
        Ok(condition(&pod, type_)
            .filter(|(s, _)| s == status)
            .map(|(_, at)| (pod, at)))
    })
    .await
}

/// `at` is not before `due` (a second of slack for `startedAt`'s and the condition's
/// second precision); how long after is printed for the record.
fn ensure_after(what: &str, due: Timestamp, at: Timestamp) -> Result<()> {
    let late = at.duration_since(due);
    ensure!(
        late >= SignedDuration::from_secs(-1),
        "{what} at {at}, {late} before the change it reports (due at {due})"
    );
    eprintln!("{what} {late} after the change (probe period {PERIOD} s)");
    Ok(())
}

fn started(pod: &Pod) -> Result<Timestamp> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    let web = (statuses.into_iter().flatten())
        .find(|s| s.name == "web")
        .context("no status of container web")?;
    ensure!(web.restart_count == 0, "container web restarted");
    pods::started_at(web).context("container web is not running")
}

fn label(pod: &Pod) -> Option<&str> {
    pod.labels().get(LABEL).map(String::as_str)
}

/// The node's NodePodProbe lists both probes of the pod with `state`.
async fn wait_node_states(ctx: &TestContext, uid: &str, healthy: &str) -> Result<()> {
    let api: Api<NodePodProbe> = Api::all(ctx.client.clone());
    let node = ctx.cluster.node_name.clone();
    poll_until(
        &format!("NodePodProbe {node} with health:healthy {healthy}"),
        WAIT,
        || async {
            let Some(probes) = api.get_opt(&node).await? else {
                return Ok(None);
            };
            let listed = probes
                .spec
                .pod_probes
                .iter()
                .any(|p| p.uid == uid && p.probes.len() == 2);
            let status = probes.status.unwrap_or_default();
            let pod = status.pod_probe_statuses.iter().find(|p| p.uid == uid);
            let state = |name: &str| {
                pod.and_then(|p| p.probe_states.iter().find(|s| s.name == name))
                    .map(|s| serde_json::to_value(s.state).unwrap_or_default())
            };
            let right = state("health#healthy") == Some(json!(healthy))
                && state("health#serving") == Some(json!("Succeeded"));
            Ok((listed && right).then_some(()))
        },
    )
    .await
}

#[tokio::test]
async fn probes_flip_the_condition_and_labels_after_the_probed_file_changes() -> Result<()> {
    run_in_namespace("ppm-flip", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[MARKER_CRD, NODE_CRD]).await?;
        ctx.api::<PodProbeMarker>()
            .create(&PostParams::default(), &marker(probes())?)
            .await
            .context("creating the PodProbeMarker")?;
        ctx.api::<Pod>()
            .create(&PostParams::default(), &probed_pod(&ctx)?)
            .await
            .context("creating the pod")?;
        let running = poll_until("pod probed running", WAIT, || async {
            let pod = ctx.api::<Pod>().get("probed").await?;
            let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
            Ok((phase.as_deref() == Some("Running")).then_some(pod))
        })
        .await?;
        let start = started(&running)?;
        let uid = running.uid().unwrap_or_default();

        // The tcp probe connects from the node to the pod's IP; when its first run comes
        // depends on how soon the pod got an IP, so only its result is checked.
        wait_condition(&ctx, TCP_CONDITION, "True").await?;

        let (pod, healthy_at) = wait_condition(&ctx, CONDITION, "True").await?;
        let created = start + SignedDuration::from_secs(CREATE_AFTER);
        ensure_after("the exec probe's condition True", created, healthy_at)?;
        let pod = if label(&pod) == Some("true") {
            pod
        } else {
            poll_until("label healthy=true", WAIT, || async {
                let pod = ctx.api::<Pod>().get("probed").await?;
                Ok((label(&pod) == Some("true")).then_some(pod))
            })
            .await?
        };
        ensure!(
            label(&pod) == Some("true"),
            "label {LABEL} is {:?}",
            label(&pod)
        );
        wait_node_states(&ctx, &uid, "Succeeded").await?;

        let (_, unhealthy_at) = wait_condition(&ctx, CONDITION, "False").await?;
        let removed = start + SignedDuration::from_secs(REMOVE_AFTER);
        ensure_after("the exec probe's condition False", removed, unhealthy_at)?;
        poll_until("label healthy=false", WAIT, || async {
            let pod = ctx.api::<Pod>().get("probed").await?;
            Ok((label(&pod) == Some("false")).then_some(()))
        })
        .await?;
        wait_node_states(&ctx, &uid, "Failed").await?;

        // The marker's status counts the pod, then, once it is gone, no pod.
        wait_matched(&ctx, 1).await?;
        ctx.api::<Pod>()
            .delete("probed", &Default::default())
            .await
            .context("deleting the pod")?;
        wait_matched(&ctx, 0).await
    })
    .await
}

/// Waits until the marker's status has observed its generation and counts `pods`
/// matched pods.
async fn wait_matched(ctx: &TestContext, pods: i64) -> Result<()> {
    poll_until(
        &format!("PodProbeMarker status matchedPods={pods}"),
        WAIT,
        || async {
            let marker = ctx.api::<PodProbeMarker>().get("health").await?;
            let status = marker.status.unwrap_or_default();
            Ok((status.matched_pods == pods
                && Some(status.observed_generation) == marker.metadata.generation)
                .then_some(()))
        },
    )
    .await
}

/// Creating a marker with `probes` is refused with a message naming `field`.
async fn ensure_refused(ctx: &TestContext, probes: Value, field: &str, words: &str) -> Result<()> {
    let created = ctx
        .api::<PodProbeMarker>()
        .create(&PostParams::default(), &marker(probes)?)
        .await;
    let err = created.err().context("the PodProbeMarker was admitted")?;
    let message = match &err {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    };
    ensure!(
        message.contains(field) && message.contains(words),
        "refused, but the message names no {field:?} with {words:?}: {message}"
    );
    Ok(())
}

#[tokio::test]
async fn bad_markers_are_refused_naming_the_field() -> Result<()> {
    run_in_namespace("ppm-refused", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[MARKER_CRD, NODE_CRD]).await?;
        let two_handlers = json!([{
            "name": "both", "containerName": "web", "podConditionType": "stevedore.dev/both",
            "probe": { "exec": { "command": ["true"] }, "tcpSocket": { "port": 8080 } },
        }]);
        ensure_refused(&ctx, two_handlers, "spec.probes[0].probe", "exactly one handler").await?;
        let kubelet_condition = json!([{
            "name": "mine", "containerName": "web", "podConditionType": "Ready",
            "probe": { "exec": { "command": ["true"] } },
        }]);
        ensure_refused(&ctx, kubelet_condition, "podConditionType", "condition others own").await?;
        let duplicate = json!([
            { "name": "same", "containerName": "web", "podConditionType": "a", "probe": { "exec": { "command": ["true"] } } },
            { "name": "same", "containerName": "web", "podConditionType": "b", "probe": { "exec": { "command": ["true"] } } },
        ]);
        ensure_refused(&ctx, duplicate, "spec.probes", "only once").await
    })
    .await
}

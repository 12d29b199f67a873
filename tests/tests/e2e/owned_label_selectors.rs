//! Issue 28, item 3: a pod-set whose selector and template both name a label the controller
//! sets on its pods (an instance id, a revision hash, a pod name, a lifecycle state) must
//! never create a pod it cannot claim. For every pod-set kind and every label it sets, in a
//! namespace whose ResourceQuota allows 20 pods: either the apiserver refuses the object,
//! naming the label, or it is admitted and the controller reports it (a SelectorMismatch
//! Warning event, or its create-failure condition, naming the label); either way the
//! namespace holds no pod for at least 10 s. Before the fix the controller created pods up to
//! the quota (CloneSet 300 in 3 s, Advanced DaemonSet 100 in 1 s), all orphaned.

use crate::daemonset_support;

use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::{Event, Pod, ResourceQuota};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::{CloneSet, DaemonSet, StatefulSet};
use stevedore_controlplane::workload::selector::SELECTOR_MISMATCH;
use stevedore_tests::test_nodes::{self, KWOK_TAINT};
use stevedore_tests::{TestContext, invariant, poll_until, run_in_namespace};

use daemonset_support::with_nodes;

const INSTANCE_ID: &str = "apps.kruise.io/cloneset-instance-id";
const REVISION_HASH: &str = "controller-revision-hash";
const TEMPLATE_HASH: &str = "pod-template-hash";
const LIFECYCLE_STATE: &str = "lifecycle.apps.kruise.io/state";
const POD_NAME: &str = "statefulset.kubernetes.io/pod-name";
const POD_INDEX: &str = "apps.kubernetes.io/pod-index";

/// How long the namespace must stay without a pod after the last workload was applied.
const WATCH: Duration = Duration::from_secs(10);
/// How long the controller gets to report an admitted workload.
const REPORT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug)]
#[allow(clippy::enum_variant_names, reason = "the kinds' own names")]
enum Kind {
    CloneSet,
    StatefulSet,
    DaemonSet,
}

impl Kind {
    fn resource(self) -> ApiResource {
        match self {
            Self::CloneSet => ApiResource::erase::<CloneSet>(&()),
            Self::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
            Self::DaemonSet => ApiResource::erase::<DaemonSet>(&()),
        }
    }

    /// The labels this kind's controller sets on every pod it creates.
    fn owned_labels(self) -> &'static [&'static str] {
        match self {
            Self::CloneSet => &[INSTANCE_ID, REVISION_HASH, TEMPLATE_HASH, LIFECYCLE_STATE],
            Self::StatefulSet => &[
                POD_NAME,
                POD_INDEX,
                REVISION_HASH,
                TEMPLATE_HASH,
                LIFECYCLE_STATE,
            ],
            Self::DaemonSet => &[REVISION_HASH, TEMPLATE_HASH, LIFECYCLE_STATE],
        }
    }

    /// A workload `name` of this kind whose selector and template both say `app=<name>`
    /// and `<label>=abc`.
    fn manifest(self, ctx: &TestContext, name: &str, label: &str) -> Value {
        let labels = json!({ "app": name, label: "abc" });
        let resource = self.resource();
        let mut object = json!({
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": { "name": name },
            "spec": {
                "selector": { "matchLabels": labels },
                "template": {
                    "metadata": { "labels": labels },
                    "spec": {
                        "terminationGracePeriodSeconds": 0,
                        "containers": [{ "name": "main", "image": ctx.cluster.image("web:v1") }],
                    },
                },
            },
        });
        // The DaemonSet runs on this test's own nodes; the others on the shared kwok nodes.
        let (node_selector, tolerations) = match self {
            Self::CloneSet | Self::StatefulSet => (
                json!({ "type": "kwok" }),
                json!([{ "key": KWOK_TAINT, "operator": "Exists", "effect": "NoSchedule" }]),
            ),
            Self::DaemonSet => (test_nodes::node_selector(ctx), test_nodes::tolerations(ctx)),
        };
        let pod_spec = &mut object["spec"]["template"]["spec"];
        pod_spec["nodeSelector"] = node_selector;
        pod_spec["tolerations"] = tolerations;
        let spec = &mut object["spec"];
        match self {
            Self::CloneSet => spec["replicas"] = json!(5),
            Self::StatefulSet => {
                spec["replicas"] = json!(5);
                spec["serviceName"] = json!(name);
                spec["podManagementPolicy"] = json!("Parallel");
            }
            Self::DaemonSet => {}
        }
        object
    }
}

/// What became of one workload.
#[derive(Debug)]
enum Outcome {
    /// The apiserver refused it; its message.
    Refused(String),
    /// Admitted: the controller must report it.
    Admitted { name: String, label: &'static str },
}

async fn quota_of_twenty_pods(ctx: &TestContext) -> Result<()> {
    let quotas = ctx.api::<ResourceQuota>();
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": { "name": "twenty-pods" },
        "spec": { "hard": { "pods": "20" } }
    }))?;
    quotas.create(&PostParams::default(), &quota).await?;
    // Admission only enforces a quota once the quota controller has filled its status.
    poll_until("the quota to be tracked", REPORT, || async {
        let q = quotas.get("twenty-pods").await?;
        Ok(q.status
            .and_then(|s| s.hard)
            .is_some_and(|h| h.contains_key("pods"))
            .then_some(()))
    })
    .await
}

/// Applies one workload of `kind` per label it owns.
async fn apply_all(ctx: &TestContext, kind: Kind) -> Result<Vec<Outcome>> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &kind.resource());
    let mut outcomes = Vec::new();
    for (i, &label) in kind.owned_labels().iter().enumerate() {
        let name = format!("owned-{i}");
        let object: DynamicObject = serde_json::from_value(kind.manifest(ctx, &name, label))?;
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => outcomes.push(Outcome::Admitted { name, label }),
            Err(kube::Error::Api(status)) => {
                if !status.message.contains(label) {
                    bail!(
                        "{kind:?} naming {label}: refused, but the message does not name the label: {}",
                        status.message
                    );
                }
                outcomes.push(Outcome::Refused(status.message));
            }
            Err(other) => return Err(other).context(format!("creating {kind:?} {name}")),
        }
    }
    Ok(outcomes)
}

/// No pod in the namespace at any look during [`WATCH`].
async fn no_pod_for_a_while(ctx: &TestContext) -> Result<()> {
    let pods = ctx.api::<Pod>();
    let deadline = tokio::time::Instant::now() + WATCH;
    poll_until("the watch to end without a pod", WATCH * 2, || async {
        let list = pods.list(&ListParams::default()).await?;
        let names: Vec<String> = (list.items.iter())
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        invariant(names.is_empty(), || {
            format!("the namespace holds {} pod(s): {names:?}", names.len())
        })?;
        Ok((tokio::time::Instant::now() >= deadline).then_some(()))
    })
    .await
}

/// The controller's report on `name`: a SelectorMismatch Warning event or a status
/// condition whose message names `label`.
async fn reported(ctx: &TestContext, kind: Kind, name: &str, label: &str) -> Result<String> {
    let events = ctx.api::<Event>();
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &kind.resource());
    let what = format!("{kind:?} {name} to be reported naming {label}");
    poll_until(&what, REPORT, || async {
        for event in events.list(&ListParams::default()).await?.items {
            let message = event.message.unwrap_or_default();
            if event.involved_object.name.as_deref() == Some(name)
                && event.reason.as_deref() == Some(SELECTOR_MISMATCH)
                && message.contains(label)
            {
                return Ok(Some(message));
            }
        }
        let object = api.get(name).await?;
        let conditions = object.data["status"]["conditions"].as_array().cloned();
        for condition in conditions.unwrap_or_default() {
            let message = condition["message"].as_str().unwrap_or_default();
            if condition["status"] == "True" && message.contains(label) {
                return Ok(Some(message.to_owned()));
            }
        }
        Ok(None)
    })
    .await
}

async fn check_kind(ctx: &TestContext, kind: Kind) -> Result<()> {
    quota_of_twenty_pods(ctx).await?;
    let outcomes = apply_all(ctx, kind).await?;
    no_pod_for_a_while(ctx).await?;
    for outcome in &outcomes {
        match outcome {
            Outcome::Refused(message) => eprintln!("{kind:?}: refused at admission: {message}"),
            Outcome::Admitted { name, label } => {
                let message = reported(ctx, kind, name, label).await?;
                eprintln!("{kind:?} {name} ({label}): admitted, 0 pods, reported: {message}");
            }
        }
    }
    // The reports took a while longer: still no pod.
    let pods = ctx.api::<Pod>().list(&ListParams::default()).await?;
    if !pods.items.is_empty() {
        bail!("{kind:?}: {} pod(s) after the reports", pods.items.len());
    }
    Ok(())
}

#[tokio::test]
async fn a_cloneset_naming_a_label_it_sets_creates_no_pod() -> Result<()> {
    run_in_namespace("owned-label-cloneset", |ctx| async move {
        check_kind(&ctx, Kind::CloneSet).await
    })
    .await
}

#[tokio::test]
async fn a_statefulset_naming_a_label_it_sets_creates_no_pod() -> Result<()> {
    run_in_namespace("owned-label-statefulset", |ctx| async move {
        check_kind(&ctx, Kind::StatefulSet).await
    })
    .await
}

#[tokio::test]
async fn a_daemonset_naming_a_label_it_sets_creates_no_pod() -> Result<()> {
    run_in_namespace("owned-label-daemonset", |ctx| async move {
        with_nodes(ctx, 3, |ctx, _nodes| async move {
            check_kind(&ctx, Kind::DaemonSet).await
        })
        .await
    })
    .await
}

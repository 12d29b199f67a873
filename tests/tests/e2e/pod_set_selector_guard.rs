//! The one selector guard of the pod-set kinds (issue 30), against the real apiserver and
//! the in-cluster controller, for the kinds beside CloneSet (whose suite is
//! `cloneset_safety`): an Advanced StatefulSet or Advanced DaemonSet whose selector misses
//! its template, let in while the CRD's selector rules are taken out for a moment, creates
//! no pod and is reported as CloneSet's is — its create condition (FailedCreatePod,
//! FailedCreate) True with reason SelectorMismatch naming the field and the template's
//! label, and a SelectorMismatch Warning event — and fixing the selector is all it takes.
//!
//! Runs alone: it relaxes the Advanced StatefulSet and DaemonSet CRDs for a moment, and
//! other suites check what their rules refuse.

use crate::daemonset_support;

use std::time::Duration;

use anyhow::{Result, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use stevedore_api::{DaemonSet, StatefulSet};
use stevedore_tests::test_nodes;
use stevedore_tests::{TestContext, invariant, poll_until, run_in_namespace};

use daemonset_support::with_nodes;

/// How long the controller gets to report, and to create pods once fixed.
const CONVERGE: Duration = Duration::from_secs(90);

#[derive(Clone, Copy, Debug)]
enum Kind {
    StatefulSet,
    DaemonSet,
}

impl Kind {
    fn resource(self) -> ApiResource {
        match self {
            Self::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
            Self::DaemonSet => ApiResource::erase::<DaemonSet>(&()),
        }
    }

    fn crd(self) -> (&'static str, &'static str) {
        match self {
            Self::StatefulSet => (
                "statefulsets.apps.kruise.io",
                include_str!("../../../deploy/crds/apps.kruise.io_statefulsets.yaml"),
            ),
            Self::DaemonSet => (
                "daemonsets.apps.kruise.io",
                include_str!("../../../deploy/crds/apps.kruise.io_daemonsets.yaml"),
            ),
        }
    }

    /// The condition a failed create sets, which the guard sets too.
    fn create_condition(self) -> &'static str {
        match self {
            Self::StatefulSet => "FailedCreatePod",
            Self::DaemonSet => "FailedCreate",
        }
    }

    /// One pod's worth of `name` on this test's nodes, selecting `tier` while the template
    /// says `tier=front`.
    fn manifest(self, ctx: &TestContext, name: &str, tier: &str) -> Value {
        let resource = self.resource();
        let mut object = json!({
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": { "name": name },
            "spec": {
                "selector": selector(name, tier),
                "template": {
                    "metadata": { "labels": { "app": name, "tier": "front" } },
                    "spec": {
                        "nodeSelector": test_nodes::node_selector(ctx),
                        "tolerations": test_nodes::tolerations(ctx),
                        "terminationGracePeriodSeconds": 0,
                        "containers": [{ "name": "main", "image": ctx.cluster.image("web:v1") }],
                    },
                },
            },
        });
        if let Self::StatefulSet = self {
            object["spec"]["replicas"] = json!(1);
            object["spec"]["serviceName"] = json!(name);
        }
        object
    }
}

fn selector(name: &str, tier: &str) -> Value {
    json!({ "matchExpressions": [
        { "key": "app", "operator": "In", "values": [name] },
        { "key": "tier", "operator": "In", "values": [tier] }
    ] })
}

fn api(ctx: &TestContext, kind: Kind) -> Api<DynamicObject> {
    Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &kind.resource())
}

/// Creates `object` of `kind` with the CRD's selector rules taken out, and puts them back
/// before returning, whatever happened.
async fn create_bypassing_selector_rules(
    ctx: &TestContext,
    kind: Kind,
    object: &Value,
) -> Result<()> {
    stevedore_tests::crds::create_with_relaxed_crd(
        &ctx.client,
        kind.crd(),
        stevedore_tests::crds::without_selector_rules,
        &api(ctx, kind),
        object,
    )
    .await
}

/// The object's condition of `type_`, if it has one.
async fn condition(
    ctx: &TestContext,
    kind: Kind,
    name: &str,
    type_: &str,
) -> Result<Option<Value>> {
    let object = api(ctx, kind).get(name).await?;
    let conditions = object.data["status"]["conditions"].as_array().cloned();
    Ok(conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c["type"] == type_))
}

async fn pods(ctx: &TestContext, name: &str) -> Result<Vec<Pod>> {
    let list = ctx
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await?;
    Ok(list.items)
}

async fn check_kind(ctx: &TestContext, kind: Kind) -> Result<()> {
    let name = "runaway";
    let type_ = kind.create_condition();
    create_bypassing_selector_rules(ctx, kind, &kind.manifest(ctx, name, "back")).await?;

    let what = format!("{type_} SelectorMismatch");
    let refused = poll_until(&what, CONVERGE, || async {
        match condition(ctx, kind, name, type_).await? {
            Some(c) if c["status"] == "True" && c["reason"] == "SelectorMismatch" => Ok(Some(c)),
            other => bail!("{type_} is {other:?}"),
        }
    })
    .await?;
    let message = refused["message"].as_str().unwrap_or_default();
    for word in ["spec.selector.matchExpressions[1]", "tier", "tier=front"] {
        ensure!(
            message.contains(word),
            "the condition {message:?} does not name {word:?}"
        );
    }
    let event = poll_until("a SelectorMismatch warning", CONVERGE, || async {
        stevedore_tests::events::warning(ctx, name, "SelectorMismatch").await
    })
    .await?;
    ensure!(event.contains("matchExpressions[1]"), "event: {event}");
    let found = pods(ctx, name).await?;
    ensure!(
        found.is_empty(),
        "{kind:?}: {} pod(s) were created",
        found.len()
    );

    // Fixing the selector is all it takes: the condition goes and the pod comes.
    let fix = json!({ "spec": { "selector": selector(name, "front") } });
    api(ctx, kind)
        .patch(name, &PatchParams::default(), &Patch::Merge(fix))
        .await?;
    poll_until(
        "the fixed set's pod, and the condition gone",
        CONVERGE,
        || async {
            let gone = condition(ctx, kind, name, type_).await?.is_none();
            let count = pods(ctx, name).await?.len();
            invariant(count <= 1, || format!("{kind:?} made {count} pods for one"))?;
            if !gone {
                bail!("{type_} is still there");
            }
            Ok((count == 1).then_some(()))
        },
    )
    .await
}

#[tokio::test]
async fn a_statefulset_whose_selector_misses_its_template_is_refused_as_a_cloneset_is() -> Result<()>
{
    run_in_namespace("selector-guard-statefulset", |ctx| async move {
        with_nodes(ctx, 1, |ctx, _nodes| async move {
            check_kind(&ctx, Kind::StatefulSet).await
        })
        .await
    })
    .await
}

#[tokio::test]
async fn a_daemonset_whose_selector_misses_its_template_is_refused_as_a_cloneset_is() -> Result<()>
{
    run_in_namespace("selector-guard-daemonset", |ctx| async move {
        with_nodes(ctx, 1, |ctx, _nodes| async move {
            check_kind(&ctx, Kind::DaemonSet).await
        })
        .await
    })
    .await
}

//! The CloneSet safety guards (issue 10), against the real apiserver and the in-cluster
//! controller: admission refuses selectors that miss the template, containers without an
//! image, references outside the agent's grammar and a rollout that could never move; a
//! CloneSet whose selector misses its template that gets in anyway (admission relaxed for
//! a moment) creates no pod; and a template the apiserver refuses in a Pod costs no
//! running pod.
//!
//! Runs alone: it relaxes the CloneSet CRD for a moment, and other suites check what its
//! rules refuse.

use crate::cloneset_component;

use anyhow::{Context as _, Result, bail, ensure};
use kube::ResourceExt as _;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::CloneSet;
use stevedore_api::cloneset::CloneSetCondition;
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use cloneset_component::{CONVERGE, all_pods, cloneset, live_pods, wait_converged};

const CRD_NAME: &str = "clonesets.apps.kruise.io";
const CRD_YAML: &str = include_str!("../../../deploy/crds/apps.kruise.io_clonesets.yaml");

async fn try_create(ctx: &TestContext, object: &Value) -> Result<CloneSet, kube::Error> {
    let cloneset: CloneSet = match serde_json::from_value(object.clone()) {
        Ok(cs) => cs,
        Err(e) => panic!("the test object is not a CloneSet: {e}"),
    };
    ctx.api::<CloneSet>()
        .create(&PostParams::default(), &cloneset)
        .await
}

/// The apiserver's message for a refused create, or an error if it was admitted.
async fn refusal(ctx: &TestContext, object: &Value) -> Result<String> {
    match try_create(ctx, object).await {
        Ok(cs) => bail!("the apiserver admitted {}: {object}", cs.name_any()),
        Err(kube::Error::Api(status)) => Ok(status.message),
        Err(other) => Err(other.into()),
    }
}

#[tokio::test]
async fn admission_refuses_what_the_controller_could_not_act_on() -> Result<()> {
    run_in_namespace("cloneset-safety-admission", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[CRD_YAML]).await?;
        let expr = |e: Value| json!({ "spec": { "selector": { "matchExpressions": [e] } } });
        let cases: Vec<(&str, Value, &[&str])> = vec![
            (
                "empty selector",
                json!({ "spec": { "selector": { "matchLabels": null } } }),
                &["spec.selector must not be empty"],
            ),
            (
                "In of another value",
                expr(json!({ "key": "app", "operator": "In", "values": ["db"] })),
                &["spec.selector.matchExpressions", "must select spec.template.metadata.labels"],
            ),
            (
                "NotIn of the template's value",
                expr(json!({ "key": "app", "operator": "NotIn", "values": ["s"] })),
                &["spec.selector.matchExpressions", "must select spec.template.metadata.labels"],
            ),
            (
                "Exists of a missing key",
                expr(json!({ "key": "zone", "operator": "Exists" })),
                &["spec.selector.matchExpressions", "must select spec.template.metadata.labels"],
            ),
            (
                "DoesNotExist of a template label",
                expr(json!({ "key": "app", "operator": "DoesNotExist" })),
                &["spec.selector.matchExpressions", "must select spec.template.metadata.labels"],
            ),
            (
                "In without values",
                expr(json!({ "key": "app", "operator": "In" })),
                &["spec.selector.matchExpressions[0]", "values must not be empty"],
            ),
            (
                "Exists with values",
                expr(json!({ "key": "app", "operator": "Exists", "values": ["s"] })),
                &["spec.selector.matchExpressions[0]", "values must be empty"],
            ),
            (
                "unknown operator",
                expr(json!({ "key": "app", "operator": "Equals", "values": ["s"] })),
                &["spec.selector.matchExpressions[0].operator"],
            ),
            (
                "container without an image",
                json!({ "spec": { "template": { "spec": { "containers": [{ "name": "web" }] } } } }),
                &["spec.template.spec.containers[0].image"],
            ),
            (
                "init container without an image",
                json!({ "spec": { "template": { "spec": { "initContainers": [{ "name": "init" }] } } } }),
                &["spec.template.spec.initContainers[0].image"],
            ),
            (
                "image outside the reference grammar",
                json!({ "spec": { "template": { "spec": { "containers": [{ "name": "web", "image": "Library/Web:v1" }] } } } }),
                &["spec.template.spec.containers[0].image", "image reference"],
            ),
            (
                "maxSurge and maxUnavailable both 0",
                json!({ "spec": { "updateStrategy": { "maxUnavailable": "0%", "maxSurge": 0 } } }),
                &["maxSurge and maxUnavailable must not both be 0"],
            ),
            (
                "maxUnavailable 0 with the default maxSurge",
                json!({ "spec": { "updateStrategy": { "maxUnavailable": 0 } } }),
                &["maxSurge and maxUnavailable must not both be 0"],
            ),
        ];
        for (what, overrides, words) in cases {
            let object = cloneset(&ctx, "s", 0, overrides);
            let message = refusal(&ctx, &object).await.context(what)?;
            for word in words {
                ensure!(message.contains(word), "{what}: {message:?} does not name {word:?}");
            }
        }
        // Every operator, each selecting the template, and surge with no unavailability.
        let fine = cloneset(
            &ctx,
            "s",
            0,
            json!({ "spec": {
                "selector": { "matchExpressions": [
                    { "key": "app", "operator": "In", "values": ["s", "t"] },
                    { "key": "app", "operator": "NotIn", "values": ["t"] },
                    { "key": "app", "operator": "Exists" },
                    { "key": "zone", "operator": "DoesNotExist" }
                ] },
                "updateStrategy": { "maxUnavailable": 0, "maxSurge": "10%" }
            } }),
        );
        try_create(&ctx, &fine).await.context("a selecting selector is admitted")?;
        Ok(())
    })
    .await
}

/// Creates `object` with the CRD's selector rules taken out, and puts them back before
/// returning, whatever happened.
async fn create_bypassing_selector_rules(ctx: &TestContext, object: &Value) -> Result<()> {
    let clonesets: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &ctx.namespace,
        &ApiResource::erase::<CloneSet>(&()),
    );
    stevedore_tests::crds::create_with_relaxed_crd(
        &ctx.client,
        (CRD_NAME, CRD_YAML),
        stevedore_tests::crds::without_selector_rules,
        &clonesets,
        object,
    )
    .await
}

fn failed_scale(cs: &CloneSet) -> Option<CloneSetCondition> {
    cs.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "FailedScale")
        .cloned()
}

#[tokio::test]
async fn a_selector_missing_its_template_creates_no_pods() -> Result<()> {
    run_in_namespace("cloneset-safety-selector", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[CRD_YAML]).await?;
        let name = "runaway";
        // Selects tier=back; the template is tier=front. Before the guard this created a
        // pod, released it, and created another: 1,020 pods in 35 s.
        let object = cloneset(
            &ctx,
            name,
            3,
            json!({ "spec": {
                "selector": { "matchExpressions": [
                    { "key": "app", "operator": "In", "values": [name] },
                    { "key": "tier", "operator": "In", "values": ["back"] }
                ] },
                "template": { "metadata": { "labels": { "tier": "front" } } }
            } }),
        );
        create_bypassing_selector_rules(&ctx, &object).await?;

        let condition = poll_until("FailedScale SelectorMismatch", CONVERGE, || async {
            let cs = ctx.api::<CloneSet>().get(name).await?;
            match failed_scale(&cs) {
                Some(c) if c.status == "True" && c.reason == "SelectorMismatch" => Ok(Some(c)),
                other => bail!("FailedScale is {other:?}"),
            }
        })
        .await?;
        for word in ["spec.selector.matchExpressions[1]", "tier", "tier=front"] {
            ensure!(
                condition.message.contains(word),
                "the condition {:?} does not name {word:?}",
                condition.message
            );
        }
        let event = poll_until("a SelectorMismatch warning", CONVERGE, || async {
            stevedore_tests::events::warning(&ctx, name, "SelectorMismatch").await
        })
        .await?;
        ensure!(event.contains("matchExpressions[1]"), "event: {event}");
        // The condition is written by the sync that refused; that sync and every later one
        // return before any create.
        let pods = all_pods(&ctx, name).await?;
        println!(
            "pods after a mismatched-selector CloneSet (replicas 3) got in: {}",
            pods.len()
        );
        ensure!(pods.is_empty(), "{} pods were created", pods.len());

        // Fixing the selector is all it takes.
        let fix = json!({ "spec": { "selector": { "matchExpressions": [
            { "key": "app", "operator": "In", "values": [name] },
            { "key": "tier", "operator": "In", "values": ["front"] }
        ] } } });
        ctx.api::<CloneSet>()
            .patch(name, &PatchParams::default(), &Patch::Merge(fix))
            .await?;
        let converged = wait_converged(&ctx, name, 3).await?;
        ensure!(
            failed_scale(&converged.cloneset).is_none(),
            "FailedScale cleared once the selector selects the template"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_template_the_apiserver_refuses_costs_no_running_pod() -> Result<()> {
    run_in_namespace("cloneset-safety-dryrun", |ctx| async move {
        let name = "web";
        let object = cloneset(&ctx, name, 2, json!({}));
        try_create(&ctx, &object).await?;
        let before = wait_converged(&ctx, name, 2).await?;
        let mut uids: Vec<String> = before.pods.iter().filter_map(|p| p.uid()).collect();
        uids.sort();

        // CEL admits it (resources are not declared in the CRD); a Pod with a negative
        // request is invalid.
        let bad = json!({ "spec": { "template": { "spec": { "containers": [{
            "name": "web",
            "image": ctx.cluster.image("web:v2"),
            "resources": { "requests": { "cpu": "-1" } }
        }] } } } });
        ctx.api::<CloneSet>()
            .patch(name, &PatchParams::default(), &Patch::Merge(bad))
            .await?;
        let condition = poll_until("FailedUpdate quoting the apiserver", CONVERGE, || async {
            let cs = ctx.api::<CloneSet>().get(name).await?;
            let failed = cs.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == "FailedUpdate")
                    .cloned()
            });
            match failed {
                Some(c) if c.status == "True" => Ok(Some(c)),
                other => bail!("FailedUpdate is {other:?}"),
            }
        })
        .await?;
        ensure!(
            condition.message.contains("is invalid")
                && condition.message.contains("resources.requests")
                && !condition.message.contains("Status {"),
            "the condition quotes the apiserver: {}",
            condition.message
        );
        let event = poll_until("a FailedUpdate warning", CONVERGE, || async {
            stevedore_tests::events::warning(&ctx, name, "FailedUpdate").await
        })
        .await?;
        ensure!(event.contains("is invalid"), "event: {event}");

        let pods = live_pods(&ctx, name).await?;
        let mut after: Vec<String> = pods.iter().filter_map(|p| p.uid()).collect();
        after.sort();
        ensure!(
            after == uids,
            "running pods were replaced: {uids:?} -> {after:?}"
        );
        let all = all_pods(&ctx, name).await?;
        ensure!(
            all.iter().all(|p| p.metadata.deletion_timestamp.is_none()),
            "a running pod is being deleted"
        );
        Ok(())
    })
    .await
}

//! One stored object that does not decode into the control plane's types (issue 28 item
//! 2b): a CloneSet whose `spec.updateStrategy.maxUnavailable` is 2147483648, one past
//! int32, which admission refuses once its bounds are in, so the test gets it in by
//! relaxing the CRD for a moment. With it stored, both control plane replicas restarted
//! still become ready, a normal CloneSet in the same namespace converges, the poison
//! object carries a Warning Event and an `Undecodable` status condition naming the field,
//! no delete of a pod a PodUnavailableBudget protects gets through, and once the field is
//! fixed the condition goes.
//! Needs the deployed control plane to decode its caches per object and to write the
//! condition.
//!
//! Runs alone: it relaxes the CloneSet CRD and restarts both control plane replicas.

use crate::cloneset_component;

use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::{CloneSet, PodUnavailableBudget};
use stevedore_tests::controlplane::{stop_control_plane, wait_control_plane_ready};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

use cloneset_component::{CONVERGE, cloneset, create, live_pods, wait_converged};

const CRD_NAME: &str = "clonesets.apps.kruise.io";
const CRD_YAML: &str = include_str!("../../../deploy/crds/apps.kruise.io_clonesets.yaml");
/// The poison value: one past what the Rust type (i32 inside IntOrString) holds.
const POISON_MAX_UNAVAILABLE: i64 = 1 << 31;
const POISON_FIELD: &str = "spec.updateStrategy.maxUnavailable";

/// Takes every bound off `maxUnavailable` of `updateStrategy` in each version of the CRD:
/// the schema keywords on the field itself and the CEL rules above it that name it.
fn relax_max_unavailable(crd: &mut Value) -> Result<()> {
    let versions = crd
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
        .context("the CRD has versions")?;
    for version in versions {
        let spec = version
            .pointer_mut("/schema/openAPIV3Schema/properties/spec")
            .context("the version has a spec schema")?;
        drop_rules_naming(spec, "maxUnavailable");
        let strategy = spec
            .pointer_mut("/properties/updateStrategy")
            .context("the spec has an updateStrategy")?;
        drop_rules_naming(strategy, "maxUnavailable");
        let field = strategy
            .pointer_mut("/properties/maxUnavailable")
            .and_then(Value::as_object_mut)
            .context("the updateStrategy has a maxUnavailable")?;
        remove_bounds(field);
        field.remove("x-kubernetes-validations");
        // An int-or-string may carry its bounds in its branches.
        for branches in ["anyOf", "allOf", "oneOf"] {
            let branches = field.get_mut(branches).and_then(Value::as_array_mut);
            for branch in branches.into_iter().flatten() {
                if let Some(branch) = branch.as_object_mut() {
                    remove_bounds(branch);
                }
            }
        }
    }
    Ok(())
}

fn remove_bounds(schema: &mut serde_json::Map<String, Value>) {
    for bound in [
        "maximum",
        "minimum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
        "pattern",
    ] {
        schema.remove(bound);
    }
}

fn drop_rules_naming(schema: &mut Value, word: &str) {
    if let Some(rules) = schema
        .get_mut("x-kubernetes-validations")
        .and_then(Value::as_array_mut)
    {
        rules.retain(|rule| !rule["rule"].as_str().unwrap_or_default().contains(word));
    }
}

/// Creates `object` (untyped: the Rust type cannot hold it) with the CRD's bounds on
/// maxUnavailable taken out, and puts the committed CRD back before returning.
async fn create_bypassing_bounds(ctx: &TestContext, object: &Value) -> Result<()> {
    stevedore_tests::crds::create_with_relaxed_crd(
        &ctx.client,
        (CRD_NAME, CRD_YAML),
        relax_max_unavailable,
        &untyped_clonesets(ctx),
        object,
    )
    .await
}

/// The poison CloneSet, untyped (its Rust type cannot hold it).
fn untyped_clonesets(ctx: &TestContext) -> Api<DynamicObject> {
    Api::namespaced_with(
        ctx.client.clone(),
        &ctx.namespace,
        &ApiResource::erase::<CloneSet>(&()),
    )
}

/// The `Undecodable` condition of the CloneSet `name` as (status, reason, message), if it
/// has one.
async fn undecodable_condition(
    ctx: &TestContext,
    name: &str,
) -> Result<Option<(String, String, String)>> {
    let object = untyped_clonesets(ctx).get(name).await?;
    let conditions = object
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text = |c: &Value, field: &str| c[field].as_str().unwrap_or_default().to_owned();
    Ok(conditions
        .iter()
        .find(|c| c["type"].as_str() == Some("Undecodable"))
        .map(|c| (text(c, "status"), text(c, "reason"), text(c, "message"))))
}

/// Waits until the budget `name` counts `total` pods, all available, allowing none to go.
async fn wait_budget_allows_none(ctx: &TestContext, name: &str, total: i32) -> Result<()> {
    poll_until(
        &format!("budget {name} to count {total} available pods and allow none"),
        Duration::from_secs(60),
        || async {
            let budget = ctx.api::<PodUnavailableBudget>().get(name).await?;
            let status = budget.status.context("no status yet")?;
            let numbers = (
                status.unavailable_allowed,
                status.current_available,
                status.total_replicas,
            );
            if numbers == (0, total, total) {
                Ok(Some(()))
            } else {
                bail!("(allowed, available, total) {numbers:?}")
            }
        },
    )
    .await
}

/// The relaxation itself, on the committed CRD: nothing bounds the field any more, and the
/// rules on other fields (the scale strategy's maxUnavailable, the partition) stay.
#[test]
fn relaxing_takes_every_bound_off_the_field_and_nothing_else() -> Result<()> {
    let mut crd: Value = serde_saphyr::from_str(CRD_YAML)?;
    relax_max_unavailable(&mut crd)?;
    let spec = crd
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
        .context("the spec schema")?;
    let strategy = &spec["properties"]["updateStrategy"];
    let field = &strategy["properties"]["maxUnavailable"];
    for bound in ["x-kubernetes-validations", "maximum", "format"] {
        ensure!(
            field.get(bound).is_none(),
            "{bound} left on the field: {field}"
        );
    }
    for (what, schema) in [("spec", spec), ("updateStrategy", strategy)] {
        let rules = schema["x-kubernetes-validations"].to_string();
        ensure!(
            !rules.contains("maxUnavailable"),
            "a rule on {what} still names maxUnavailable: {rules}"
        );
    }
    for (what, schema) in [
        ("the partition", &strategy["properties"]["partition"]),
        (
            "the scale strategy's maxUnavailable",
            &spec["properties"]["scaleStrategy"]["properties"]["maxUnavailable"],
        ),
    ] {
        ensure!(
            schema["x-kubernetes-validations"]
                .as_array()
                .is_some_and(|r| !r.is_empty()),
            "the rules of {what} were taken too: {schema}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_poison_object_blinds_the_control_plane_to_nothing_else() -> Result<()> {
    run_in_namespace("poison-object", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[CRD_YAML]).await?;
        let poison = cloneset(
            &ctx,
            "poison",
            1,
            json!({ "spec": { "updateStrategy": { "maxUnavailable": POISON_MAX_UNAVAILABLE } } }),
        );
        create_bypassing_bounds(&ctx, &poison).await?;

        // Both replicas start over with the poison object stored: each must list CloneSets
        // in full and report ready.
        let stopped = stop_control_plane(&ctx.client, ctx.cluster).await?;
        stopped.start(&ctx.client).await?;
        wait_control_plane_ready(&ctx.client)
            .await
            .context("a control plane replica never became ready with a poison CloneSet")?;

        let steady = "steady";
        create(&ctx, cloneset(&ctx, steady, 3, json!({}))).await?;
        wait_converged(&ctx, steady, 3)
            .await
            .context("a normal CloneSet next to the poison one")?;

        let note = poll_until(
            "an Undecodable warning on the poison CloneSet",
            CONVERGE,
            || async { stevedore_tests::events::warning(&ctx, "poison", "Undecodable").await },
        )
        .await?;
        for word in [POISON_FIELD, "2147483648"] {
            ensure!(
                note.contains(word),
                "the warning {note:?} does not name {word:?}"
            );
        }
        println!("the poison CloneSet's warning: {note}");

        // Its status says the same, through the status subresource the control plane
        // writes without reading the object into its type.
        let (status, reason, message) = poll_until(
            "an Undecodable condition on the poison CloneSet",
            CONVERGE,
            || async { undecodable_condition(&ctx, "poison").await },
        )
        .await?;
        println!("the poison CloneSet's condition: {status} {reason}: {message}");
        ensure!(
            (status.as_str(), reason.as_str()) == ("True", "InvalidValue"),
            "the condition is {status} {reason}, not True InvalidValue"
        );
        for word in [POISON_FIELD, "2147483648"] {
            ensure!(
                message.contains(word),
                "the condition's message {message:?} does not name {word:?}"
            );
        }

        // The steady set's pods, protected by a budget that allows no disruption.
        let budget: PodUnavailableBudget = serde_json::from_value(json!({
            "apiVersion": "policy.kruise.io/v1alpha1",
            "kind": "PodUnavailableBudget",
            "metadata": { "name": steady, "namespace": ctx.namespace },
            "spec": { "selector": { "matchLabels": { "app": steady } }, "maxUnavailable": 0 },
        }))?;
        ctx.api::<PodUnavailableBudget>()
            .create(&PostParams::default(), &budget)
            .await?;
        let outcome = async {
            wait_budget_allows_none(&ctx, steady, 3).await?;

            let once = ctx.cluster.client_without_retries().await?;
            let pods: Api<Pod> = Api::namespaced(once, &ctx.namespace);
            let protected: Vec<String> = live_pods(&ctx, steady)
                .await?
                .iter()
                .map(|pod| pod.name_any())
                .collect();
            ensure!(protected.len() == 3, "protected pods: {protected:?}");
            // The budget's webhook fails open (failurePolicy Ignore): right after both
            // replicas were restarted, the apiserver may not reach it yet (its endpoints
            // lag the pods' readiness), and a delete then goes through unreviewed. What
            // is tested is that the poison object blinds the webhook to nothing, so wait
            // until it answers: a dry-run delete refused.
            let dry_run = DeleteParams {
                dry_run: true,
                ..DeleteParams::default()
            };
            poll_until(
                "the budget webhook to refuse a dry-run delete",
                Duration::from_secs(60),
                || async {
                    let refused = pods.delete(&protected[0], &dry_run).await.is_err();
                    Ok(refused.then_some(()))
                },
            )
            .await?;
            let mut attempted = 0;
            let mut allowed = Vec::new();
            for _round in 0..3 {
                for name in &protected {
                    attempted += 1;
                    if pods.delete(name, &Default::default()).await.is_ok() {
                        allowed.push(name.clone());
                    }
                }
            }
            println!(
                "protected deletes allowed while a poison object exists: {} of {attempted}",
                allowed.len()
            );
            ensure!(
                allowed.is_empty(),
                "protected deletes went through while a poison CloneSet exists: {allowed:?}"
            );
            Ok::<_, anyhow::Error>(())
        }
        .await;
        // The budget goes first, whatever happened, or it would hold the namespace's
        // deletion up.
        ctx.api::<PodUnavailableBudget>()
            .delete(steady, &Default::default())
            .await?;
        outcome?;

        // Fixed (the committed CRD admits a value in range): the object decodes again and
        // its condition goes, while the CloneSet's own conditions are the controller's.
        untyped_clonesets(&ctx)
            .patch(
                "poison",
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "updateStrategy": { "maxUnavailable": 1 } } })),
            )
            .await
            .context("fixing the poison CloneSet's maxUnavailable")?;
        poll_until(
            "the Undecodable condition to leave the fixed CloneSet",
            CONVERGE,
            || async {
                match undecodable_condition(&ctx, "poison").await? {
                    None => Ok(Some(())),
                    Some(condition) => bail!("still there: {condition:?}"),
                }
            },
        )
        .await?;
        wait_converged(&ctx, "poison", 1)
            .await
            .context("the fixed CloneSet")?;
        Ok(())
    })
    .await
}

//! The Advanced StatefulSet CRD against the real apiserver: the Kubernetes documentation's
//! native `web` StatefulSet with only its apiVersion changed and seed 002's manifests apply
//! unchanged and read back with OpenKruise's defaults, each CEL rule refuses a bad spec
//! naming the field, and claim templates cannot be added after creation (#2343).

use anyhow::{Context, Result, ensure};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};
use stevedore_api::StatefulSet;
use stevedore_api::workload_rules::CONTROLLER_OWNED_POD_LABELS;
use stevedore_controlplane::statefulset::ordinals::ReservedOrdinals;
use stevedore_tests::manifests::{self, with};
use stevedore_tests::{TestContext, run_in_namespace};

const CRD_YAML: &str = include_str!("../../../deploy/crds/apps.kruise.io_statefulsets.yaml");
const WEB: &str = include_str!("../../fixtures/kubernetes/web-statefulset.yaml");
const INPLACE: &str = include_str!("../../fixtures/seed-002/statefulset-inplace.yaml");
const ORDINALS: &str = include_str!("../../fixtures/seed-002/statefulset-ordinals.yaml");

fn manifest(yaml: &str) -> Result<Value> {
    Ok(serde_saphyr::from_str(yaml)?)
}

async fn apply(ctx: &TestContext, object: &Value) -> Result<StatefulSet> {
    manifests::apply(ctx, object).await
}

async fn expect_refused(ctx: &TestContext, object: &Value, words: &[&str]) -> Result<()> {
    manifests::expect_refused::<StatefulSet>(ctx, object, words).await
}

async fn setup(ctx: &TestContext) -> Result<()> {
    stevedore_tests::crds::install(&ctx.client, &[CRD_YAML]).await
}

#[tokio::test]
async fn native_and_seed_manifests_apply_with_openkruise_defaults() -> Result<()> {
    run_in_namespace("crd-statefulset-apply", |ctx| async move {
        setup(&ctx).await?;
        let web = apply(&ctx, &manifest(WEB)?).await?;
        let spec = serde_json::to_value(&web.spec)?;
        ensure!(spec["podManagementPolicy"] == "OrderedReady", "{spec}");
        ensure!(spec["revisionHistoryLimit"] == 10, "{spec}");
        ensure!(spec["minReadySeconds"] == 10, "native field kept: {spec}");
        let rolling = &spec["updateStrategy"]["rollingUpdate"];
        ensure!(spec["updateStrategy"]["type"] == "RollingUpdate", "{spec}");
        ensure!(rolling["partition"] == 0, "{spec}");
        ensure!(rolling["maxUnavailable"] == 1, "{spec}");
        ensure!(rolling["podUpdatePolicy"] == "ReCreate", "{spec}");
        let retention = &spec["persistentVolumeClaimRetentionPolicy"];
        ensure!(
            *retention == json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            "{spec}"
        );
        for yaml in [INPLACE, ORDINALS] {
            let mut object = manifest(yaml)?;
            object["metadata"]["name"] = json!(format!(
                "sample-{}",
                if yaml == INPLACE {
                    "inplace"
                } else {
                    "ordinals"
                }
            ));
            apply(&ctx, &object).await?;
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_rolling_update_type_alone_reads_back_with_its_rolling_update_defaults() -> Result<()> {
    // OpenKruise's `SetDefaultsStatefulSet` fills `rollingUpdate` for `{type: RollingUpdate}`
    // (kubectl-kruise's rollout status reads it); OnDelete still applies.
    run_in_namespace("crd-statefulset-nested", |ctx| async move {
        setup(&ctx).await?;
        let rolling = with(
            manifest(WEB)?,
            "/spec/updateStrategy",
            json!({"type": "RollingUpdate"}),
        )?;
        let set = apply(&ctx, &rolling).await?;
        let spec = serde_json::to_value(&set.spec)?;
        let rolling = &spec["updateStrategy"]["rollingUpdate"];
        ensure!(
            rolling["partition"] == 0
                && rolling["maxUnavailable"] == 1
                && rolling["podUpdatePolicy"] == "ReCreate",
            "rollingUpdate defaults filled: {spec}"
        );
        let mut on_delete = with(
            manifest(WEB)?,
            "/spec/updateStrategy",
            json!({"type": "OnDelete"}),
        )?;
        on_delete["metadata"]["name"] = json!("web-on-delete");
        let set = apply(&ctx, &on_delete).await?;
        let spec = serde_json::to_value(&set.spec)?;
        ensure!(spec["updateStrategy"]["type"] == "OnDelete", "{spec}");
        Ok(())
    })
    .await
}

#[tokio::test]
async fn bad_specs_are_refused_with_the_field_named() -> Result<()> {
    run_in_namespace("crd-statefulset-rules", |ctx| async move {
        setup(&ctx).await?;
        let base = manifest(WEB)?;
        let cases: Vec<(&str, Value, &[&str])> = vec![
            (
                "/spec/selector/matchLabels/app",
                json!("other"),
                &["spec.selector.matchLabels"],
            ),
            ("/spec/replicas", json!(-1), &["spec.replicas"]),
            (
                "/spec/podManagementPolicy",
                json!("Sometimes"),
                &["spec.podManagementPolicy"],
            ),
            (
                "/spec/updateStrategy",
                json!({"type": "OnDelete", "rollingUpdate": {"partition": 1}}),
                &["spec.updateStrategy.rollingUpdate"],
            ),
            (
                "/spec/updateStrategy",
                json!({"rollingUpdate": {"maxUnavailable": 0}}),
                &["spec.updateStrategy.rollingUpdate.maxUnavailable"],
            ),
            (
                "/spec/updateStrategy",
                json!({"rollingUpdate": {"maxUnavailable": "120%"}}),
                &["spec.updateStrategy.rollingUpdate.maxUnavailable"],
            ),
            (
                "/spec/updateStrategy",
                json!({"rollingUpdate": {"minReadySeconds": 301}}),
                &["minReadySeconds"],
            ),
            (
                "/spec/updateStrategy",
                json!({"rollingUpdate": {"unorderedUpdate": {"priorityStrategy": {}}}}),
                &[
                    "spec.updateStrategy.rollingUpdate.unorderedUpdate",
                    "Parallel",
                ],
            ),
            (
                "/spec/scaleStrategy",
                json!({"maxUnavailable": 2}),
                &["spec.scaleStrategy.maxUnavailable", "Parallel"],
            ),
            (
                "/spec/reserveOrdinals",
                json!([1, "5-x"]),
                &["spec.reserveOrdinals"],
            ),
            (
                "/spec/ordinals",
                json!({"start": -1}),
                &["spec.ordinals.start"],
            ),
        ];
        for (pointer, value, words) in cases {
            let object = with(base.clone(), pointer, value)?;
            expect_refused(&ctx, &object, words)
                .await
                .with_context(|| format!("setting {pointer}"))?;
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_claim_template_added_later_is_refused_with_the_reason() -> Result<()> {
    run_in_namespace("crd-statefulset-claims", |ctx| async move {
        setup(&ctx).await?;
        let base = manifest(WEB)?;
        apply(&ctx, &base).await?;
        let mut templates = base["spec"]["volumeClaimTemplates"].clone();
        let mut extra = templates[0].clone();
        extra["metadata"]["name"] = json!("logs");
        templates
            .as_array_mut()
            .context("a list of claim templates")?
            .push(extra);
        let changed = with(base.clone(), "/spec/volumeClaimTemplates", templates)?;
        expect_refused(
            &ctx,
            &changed,
            &["spec.volumeClaimTemplates", "cannot be added"],
        )
        .await?;
        // Other changes still go through.
        apply(&ctx, &with(base, "/spec/replicas", json!(5))?).await?;
        Ok(())
    })
    .await
}

/// Issue 28: admission takes exactly the `reserveOrdinals` entries the controller reads
/// (`ReservedOrdinals::parse`), and refuses selectors naming a label the controller writes
/// on its pods, naming the label. Dry runs: nothing reaches the deployed controller.
#[tokio::test]
async fn reserve_ordinals_and_controller_labels_agree_with_the_controller() -> Result<()> {
    run_in_namespace("crd-statefulset-issue28", |ctx| async move {
        setup(&ctx).await?;
        let base = manifest(WEB)?;
        let long_zeros = format!("{}7", "0".repeat(25));
        let entries = [
            json!(0),
            json!(7),
            json!(2_147_483_647),
            json!(2_147_483_648_i64),
            json!(-1),
            json!("3-5"),
            json!("5-5"),
            json!("5-3"),
            json!("007-010"),
            json!("2147483647"),
            json!("2147483648"),
            json!("0-2147483647"),
            json!("1-2147483648"),
            json!("99999999999"),
            json!(long_zeros),
            json!("-1"),
            json!("1-"),
            json!(" 1"),
            json!("+1"),
            json!("1-2-3"),
            json!("1.5"),
            json!(""),
        ];
        for entry in entries {
            let object = with(base.clone(), "/spec/reserveOrdinals", json!([entry.clone()]))?;
            let admitted = manifests::dry_run::<StatefulSet>(&ctx, &object).await?;
            let parsed = serde_json::from_value::<IntOrString>(entry.clone())
                .ok()
                .is_some_and(|e| ReservedOrdinals::parse(&[e]).is_ok());
            ensure!(
                admitted.is_ok() == parsed,
                "reserveOrdinals {entry}: admission says {admitted:?}, the controller parses it: {parsed}"
            );
            if let Err(message) = admitted {
                ensure!(message.contains("spec.reserveOrdinals[0]"), "{message}");
            }
        }
        for label in CONTROLLER_OWNED_POD_LABELS {
            let mut object = base.clone();
            object["spec"]["selector"]["matchLabels"][label] = json!("x");
            object["spec"]["template"]["metadata"]["labels"][label] = json!("x");
            manifests::expect_refused_dry_run::<StatefulSet>(
                &ctx,
                &object,
                &[label, "spec.selector.matchLabels", "writes on its pods"],
            )
            .await
            .with_context(|| format!("matchLabels {label}"))?;
            let object = with(
                base.clone(),
                "/spec/selector/matchExpressions",
                json!([{"key": label, "operator": "DoesNotExist"}]),
            )?;
            manifests::expect_refused_dry_run::<StatefulSet>(
                &ctx,
                &object,
                &[label, "spec.selector.matchExpressions", "writes on its pods"],
            )
            .await
            .with_context(|| format!("matchExpressions {label}"))?;
        }
        let huge = with(base.clone(), "/spec/replicas", json!(2_147_483_648_i64))?;
        manifests::expect_refused_dry_run::<StatefulSet>(&ctx, &huge, &["spec.replicas"]).await?;
        let bad_key = with(base, "/spec/selector/matchLabels/bad key!", json!("x"))?;
        manifests::expect_refused_dry_run::<StatefulSet>(
            &ctx,
            &bad_key,
            &["spec.selector.matchLabels", "bad key!"],
        )
        .await
    })
    .await
}

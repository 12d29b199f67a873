//! The CloneSet CRD against the real apiserver: the seed 002 CloneSets apply unchanged,
//! each CEL/schema rule refuses a bad spec with a message naming the field, the printer
//! columns are served, the scale subresource reads and writes spec.replicas, and the
//! OpenKruise 1.9 strategy fields (OnDelete, fractional partition) apply.

use anyhow::{Context, Result, ensure};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use stevedore_api::CloneSet;
use stevedore_api::workload_rules::CONTROLLER_OWNED_POD_LABELS;
use stevedore_tests::manifests::{self, with};
use stevedore_tests::{TestContext, run_in_namespace};

const CRD_NAME: &str = "clonesets.apps.kruise.io";
const CRD_YAML: &str = include_str!("../../../deploy/crds/apps.kruise.io_clonesets.yaml");
const SEEDS: [&str; 3] = [
    include_str!("../../fixtures/seed-002/sample-data.yaml"),
    include_str!("../../fixtures/seed-002/sample-data-inplace.yaml"),
    include_str!("../../fixtures/seed-002/sample-strategies.yaml"),
];

fn seed(index: usize) -> Result<Value> {
    Ok(serde_saphyr::from_str(SEEDS[index])?)
}

async fn apply(ctx: &TestContext, object: &Value) -> Result<CloneSet> {
    manifests::apply(ctx, object).await
}

async fn expect_refused(ctx: &TestContext, object: &Value, words: &[&str]) -> Result<()> {
    manifests::expect_refused::<CloneSet>(ctx, object, words).await
}

async fn setup(ctx: &TestContext) -> Result<()> {
    stevedore_tests::crds::install(&ctx.client, &[CRD_YAML]).await
}

#[tokio::test]
async fn seed_clonesets_apply_unchanged() -> Result<()> {
    run_in_namespace("crd-cloneset-seeds", |ctx| async move {
        setup(&ctx).await?;
        for index in 0..SEEDS.len() {
            let object = seed(index)?;
            let stored = apply(&ctx, &object).await?;
            ensure!(stored.spec.replicas == Some(2), "replicas kept");
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn bad_specs_are_refused_with_the_field_named() -> Result<()> {
    run_in_namespace("crd-cloneset-rules", |ctx| async move {
        setup(&ctx).await?;
        let base = seed(0)?;
        let cases: Vec<(&str, Value, &[&str])> = vec![
            (
                "/spec/selector/matchLabels/app",
                json!("other"),
                &["spec.selector.matchLabels"],
            ),
            ("/spec/replicas", json!(-1), &["spec.replicas"]),
            (
                "/spec/updateStrategy",
                json!({"partition": "150%"}),
                &["spec.updateStrategy.partition"],
            ),
            (
                "/spec/updateStrategy",
                json!({"partition": -1}),
                &["spec.updateStrategy.partition"],
            ),
            (
                "/spec/updateStrategy",
                json!({"partition": "12.%"}),
                &["spec.updateStrategy.partition"],
            ),
            (
                "/spec/updateStrategy",
                json!({"partition": "100.0%"}),
                &["spec.updateStrategy.partition"],
            ),
            (
                "/spec/updateStrategy",
                json!({"maxUnavailable": "half"}),
                &["spec.updateStrategy.maxUnavailable"],
            ),
            (
                "/spec/updateStrategy",
                json!({"maxUnavailable": "12.5%"}),
                &["spec.updateStrategy.maxUnavailable"],
            ),
            (
                "/spec/updateStrategy",
                json!({"maxSurge": "0.5%"}),
                &["spec.updateStrategy.maxSurge"],
            ),
            (
                "/spec/scaleStrategy",
                json!({"maxUnavailable": "2.5%"}),
                &["spec.scaleStrategy.maxUnavailable"],
            ),
            (
                "/spec/updateStrategy",
                json!({"maxSurge": -2}),
                &["spec.updateStrategy.maxSurge"],
            ),
            (
                "/spec/scaleStrategy",
                json!({"maxUnavailable": "101%"}),
                &["spec.scaleStrategy.maxUnavailable"],
            ),
            (
                "/spec/updateStrategy",
                json!({"type": "RollingUpdate"}),
                &["spec.updateStrategy.type"],
            ),
            (
                "/spec/updateStrategy",
                json!({"priorityStrategy": {
                    "orderPriority": [{"orderedKey": "k"}],
                    "weightPriority": [{"weight": 1, "matchSelector": {}}]
                }}),
                &["priorityStrategy"],
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

/// Issue 28: what would not decode into the Rust types (one such object blinded the control
/// plane to every CloneSet), selector keys that are not label keys, and selectors naming a
/// label the controller writes on its pods (a runaway of unclaimed pods) are refused,
/// naming the field and the label.
#[tokio::test]
async fn unbounded_integers_bad_keys_and_controller_labels_are_refused() -> Result<()> {
    run_in_namespace("crd-cloneset-issue28", |ctx| async move {
        setup(&ctx).await?;
        let base = seed(0)?;
        let accepted = [
            ("/spec/replicas", json!(2_147_483_647)),
            (
                "/spec/updateStrategy",
                json!({"maxUnavailable": 2_147_483_647}),
            ),
        ];
        for (pointer, value) in accepted {
            let object = with(base.clone(), pointer, value.clone())?;
            manifests::dry_run::<CloneSet>(&ctx, &object)
                .await?
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("{pointer} = {value} is refused"))?;
        }
        let mut cases: Vec<(&str, Value, Vec<String>)> = vec![
            (
                "/spec/replicas",
                json!(2_147_483_648_i64),
                vec!["spec.replicas".into()],
            ),
            (
                "/spec/minReadySeconds",
                json!(2_147_483_648_i64),
                vec!["spec.minReadySeconds".into()],
            ),
            (
                "/spec/updateStrategy",
                json!({"maxUnavailable": 2_147_483_648_i64}),
                vec![
                    "spec.updateStrategy.maxUnavailable".into(),
                    "2147483647".into(),
                ],
            ),
            (
                "/spec/updateStrategy",
                json!({"partition": 2_147_483_648_i64}),
                vec!["spec.updateStrategy.partition".into()],
            ),
            (
                "/spec/updateStrategy",
                json!({"inPlaceUpdateStrategy": {"gracePeriodSeconds": 2_147_483_648_i64}}),
                vec!["spec.updateStrategy.inPlaceUpdateStrategy.gracePeriodSeconds".into()],
            ),
            (
                "/spec/selector/matchLabels/bad key!",
                json!("x"),
                vec!["spec.selector.matchLabels".into(), "bad key!".into()],
            ),
            (
                "/spec/selector/matchExpressions",
                json!([{"key": "bad key!", "operator": "DoesNotExist"}]),
                vec![
                    "spec.selector.matchExpressions[0].key".into(),
                    "bad key!".into(),
                ],
            ),
        ];
        for label in CONTROLLER_OWNED_POD_LABELS {
            // Selector and template agree, so only the controller-owned rule refuses it.
            let mut object = base.clone();
            object["spec"]["selector"]["matchLabels"][label] = json!("x");
            object["spec"]["template"]["metadata"]["labels"][label] = json!("x");
            let words = [label, "spec.selector.matchLabels", "writes on its pods"];
            manifests::expect_refused_dry_run::<CloneSet>(&ctx, &object, &words)
                .await
                .with_context(|| format!("matchLabels {label}"))?;
            cases.push((
                "/spec/selector/matchExpressions",
                json!([{"key": label, "operator": "DoesNotExist"}]),
                vec![
                    label.into(),
                    "spec.selector.matchExpressions".into(),
                    "writes on its pods".into(),
                ],
            ));
        }
        for (pointer, value, words) in cases {
            let object = with(base.clone(), pointer, value)?;
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            manifests::expect_refused_dry_run::<CloneSet>(&ctx, &object, &words)
                .await
                .with_context(|| format!("setting {pointer}"))?;
        }
        Ok(())
    })
    .await
}

/// OpenKruise 1.9 spellings apply unchanged: OnDelete, a fractional partition, and
/// `scaleStrategy.excludePreparingDelete`.
#[tokio::test]
async fn openkruise_1_9_strategy_fields_apply() -> Result<()> {
    run_in_namespace("crd-cloneset-1-9-fields", |ctx| async move {
        setup(&ctx).await?;
        let object = with(
            seed(0)?,
            "/spec/updateStrategy",
            json!({"type": "OnDelete", "partition": "12.5%"}),
        )?;
        let object = with(
            object,
            "/spec/scaleStrategy",
            json!({"excludePreparingDelete": true}),
        )?;
        let stored = apply(&ctx, &object).await?;
        let strategy = &stored.spec.update_strategy;
        ensure!(strategy.on_delete(), "type OnDelete kept");
        ensure!(
            strategy.partition == Some(IntOrString::String("12.5%".into())),
            "fractional partition kept: {:?}",
            strategy.partition
        );
        ensure!(
            stored.spec.scale_strategy.exclude_preparing_delete,
            "excludePreparingDelete kept"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn in_place_only_refuses_non_image_template_changes() -> Result<()> {
    run_in_namespace("crd-cloneset-inplaceonly", |ctx| async move {
        setup(&ctx).await?;
        let image = ctx.cluster.image("web:v1");
        let base = with(
            seed(0)?,
            "/spec/updateStrategy",
            json!({"type": "InPlaceOnly"}),
        )?;
        let base = with(base, "/spec/template/spec/containers/0/image", json!(image))?;
        let base = with(
            base,
            "/spec/template/spec/containers/0/resources",
            json!({"requests": {"cpu": "100m"}}),
        )?;
        apply(&ctx, &base).await?;

        let new_image = with(
            base.clone(),
            "/spec/template/spec/containers/0/image",
            json!(ctx.cluster.image("web:v2")),
        )?;
        apply(&ctx, &new_image)
            .await
            .context("an image change is allowed")?;
        let new_label = with(
            new_image.clone(),
            "/spec/template/metadata/labels/extra",
            json!("x"),
        )?;
        apply(&ctx, &new_label)
            .await
            .context("a template label change is allowed")?;
        let new_cpu = with(
            new_label.clone(),
            "/spec/template/spec/containers/0/resources/requests/cpu",
            json!("200m"),
        )?;
        apply(&ctx, &new_cpu)
            .await
            .context("a resources change is allowed (resized in place)")?;

        // From the object as it is now (cpu 200m), so that only the env differs.
        let env = with(
            new_cpu.clone(),
            "/spec/template/spec/containers/0/env",
            json!([{"name": "A", "value": "1"}]),
        )?;
        expect_refused(&ctx, &env, &["spec.template", "InPlaceOnly"]).await?;
        let renamed = with(
            new_cpu,
            "/spec/template/spec/containers/0/name",
            json!("web"),
        )?;
        expect_refused(&ctx, &renamed, &["spec.template", "InPlaceOnly"]).await
    })
    .await
}

#[tokio::test]
async fn printer_columns_and_scale_subresource() -> Result<()> {
    run_in_namespace("crd-cloneset-scale", |ctx| async move {
        setup(&ctx).await?;
        let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
        let crd = crds.get(CRD_NAME).await?;
        let columns: Vec<String> = crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        for name in [
            "DESIRED",
            "UPDATED",
            "UPDATED_READY",
            "UPDATED_AVAILABLE",
            "READY",
            "TOTAL",
            "AGE",
        ] {
            ensure!(
                columns.iter().any(|c| c == name),
                "column {name} missing: {columns:?}"
            );
        }

        apply(&ctx, &seed(0)?).await?;
        let api = ctx.api::<CloneSet>();
        let pp = PatchParams::default();
        let scale = api
            .patch_scale(
                "sample-data",
                &pp,
                &Patch::Merge(json!({"spec": {"replicas": 5}})),
            )
            .await?;
        ensure!(
            scale.spec.and_then(|s| s.replicas) == Some(5),
            "scale reports 5"
        );
        let stored = api.get("sample-data").await?;
        ensure!(
            stored.spec.replicas == Some(5),
            "spec.replicas follows the scale subresource"
        );
        Ok(())
    })
    .await
}

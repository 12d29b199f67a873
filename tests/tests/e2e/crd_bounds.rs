//! Issue 28 against the real apiserver, for the kinds without a suite of their own: an
//! integer beyond its Rust type, a selector key that is not a label key, a selector naming
//! a label the controller writes on its pods, and a request naming a pod by a path are
//! refused, naming the field (and the key or label). Every check is a dry run, so an object
//! a missing rule would let through never reaches the deployed controllers.

use anyhow::{Context, Result};
use serde_json::{Value, json};
use stevedore_api::workload_rules::CONTROLLER_OWNED_POD_LABELS;
use stevedore_api::{BroadcastJob, ContainerRecreateRequest, DaemonSet};
use stevedore_tests::manifests::{self, with};
use stevedore_tests::{TestContext, run_in_namespace};

const DAEMONSET_CRD: &str = include_str!("../../../deploy/crds/apps.kruise.io_daemonsets.yaml");
const BROADCASTJOB_CRD: &str =
    include_str!("../../../deploy/crds/apps.kruise.io_broadcastjobs.yaml");
const CRR_CRD: &str =
    include_str!("../../../deploy/crds/apps.kruise.io_containerrecreaterequests.yaml");
const DAEMONSET: &str = include_str!("../../fixtures/openkruise/advanced-daemonset.yaml");
const BROADCASTJOB: &str = include_str!("../../fixtures/seed-002/broadcastjob-ttl.yaml");

fn manifest(yaml: &str) -> Result<Value> {
    Ok(serde_saphyr::from_str(yaml)?)
}

async fn refused<K>(ctx: &TestContext, object: &Value, words: &[&str]) -> Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    manifests::expect_refused_dry_run::<K>(ctx, object, words).await
}

async fn admitted<K>(ctx: &TestContext, object: &Value) -> Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    manifests::dry_run::<K>(ctx, object)
        .await?
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("refused: {object}"))
}

#[tokio::test]
async fn daemonset_selectors_and_integers_are_bounded() -> Result<()> {
    run_in_namespace("crd-bounds-daemonset", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[DAEMONSET_CRD]).await?;
        let base = manifest(DAEMONSET)?;
        admitted::<DaemonSet>(&ctx, &base).await?;
        for label in CONTROLLER_OWNED_POD_LABELS {
            let mut object = base.clone();
            object["spec"]["selector"]["matchLabels"][label] = json!("x");
            object["spec"]["template"]["metadata"]["labels"][label] = json!("x");
            refused::<DaemonSet>(
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
            refused::<DaemonSet>(
                &ctx,
                &object,
                &[
                    label,
                    "spec.selector.matchExpressions",
                    "writes on its pods",
                ],
            )
            .await
            .with_context(|| format!("matchExpressions {label}"))?;
        }
        let cases: Vec<(&str, Value, &[&str])> = vec![
            (
                "/spec/selector/matchLabels/bad key!",
                json!("x"),
                &["spec.selector.matchLabels", "bad key!"],
            ),
            (
                "/spec/updateStrategy/rollingUpdate/selector",
                json!({"matchExpressions": [{"key": "bad key!", "operator": "Exists"}]}),
                &[
                    "spec.updateStrategy.rollingUpdate.selector.matchExpressions[0].key",
                    "bad key!",
                ],
            ),
            (
                "/spec/burstReplicas",
                json!(2_147_483_648_i64),
                &["spec.burstReplicas", "2147483647"],
            ),
            (
                "/spec/minReadySeconds",
                json!(2_147_483_648_i64),
                &["spec.minReadySeconds"],
            ),
        ];
        for (pointer, value, words) in cases {
            let object = with(base.clone(), pointer, value)?;
            refused::<DaemonSet>(&ctx, &object, words)
                .await
                .with_context(|| format!("setting {pointer}"))?;
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn broadcastjob_parallelism_is_bounded_to_32_bits() -> Result<()> {
    run_in_namespace("crd-bounds-broadcastjob", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[BROADCASTJOB_CRD]).await?;
        let base = manifest(BROADCASTJOB)?;
        let max = with(base.clone(), "/spec/parallelism", json!(2_147_483_647))?;
        admitted::<BroadcastJob>(&ctx, &max).await?;
        let over = with(base, "/spec/parallelism", json!(2_147_483_648_i64))?;
        refused::<BroadcastJob>(&ctx, &over, &["spec.parallelism", "2147483647"]).await
    })
    .await
}

#[tokio::test]
async fn a_recreate_request_names_a_pod_not_a_path() -> Result<()> {
    run_in_namespace("crd-bounds-crr", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[CRR_CRD]).await?;
        let request = |pod: &str| {
            json!({
                "apiVersion": "apps.kruise.io/v1alpha1",
                "kind": "ContainerRecreateRequest",
                "metadata": {"name": "crr"},
                "spec": {"podName": pod, "containers": [{"name": "app"}]}
            })
        };
        // The schema admits the name; the admission webhook then refuses the request
        // for want of the pod (a path is refused by the schema before it is looked up).
        let no_pod = ["spec.podName: there is no pod web-0"];
        refused::<ContainerRecreateRequest>(&ctx, &request("web-0"), &no_pod).await?;
        for pod in ["../other/web-0", "web/0", "Web-0"] {
            refused::<ContainerRecreateRequest>(&ctx, &request(pod), &["spec.podName"])
                .await
                .with_context(|| format!("podName {pod}"))?;
        }
        Ok(())
    })
    .await
}

//! The ImageList and ImagePullJob CRDs against the real apiserver: the seed 004 ImageList
//! and OpenKruise's ImagePullJob example apply unchanged, the image-reference rule agrees
//! with the agent's parser, each CEL/schema rule refuses a bad object with a message
//! naming the key or field, field managers own their own ImageList keys under
//! server-side apply, and the printer columns and status subresource are served.

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use stevedore_agent::reference::Reference;
use stevedore_api::imagelist::{ImagePullPhase, ImageStatus};
use stevedore_api::{ImageList, ImageListStatus, ImagePullJob};
use stevedore_tests::{TestContext, run_in_namespace};

const IMAGELIST_CRD: (&str, &str) = (
    "imagelists.stevedore.dev",
    include_str!("../../../deploy/crds/stevedore.dev_imagelists.yaml"),
);
const IMAGEPULLJOB_CRD: (&str, &str) = (
    "imagepulljobs.apps.kruise.io",
    include_str!("../../../deploy/crds/apps.kruise.io_imagepulljobs.yaml"),
);
const SEED_IMAGELIST: &str = include_str!("../../fixtures/seed-004/imagelist.yaml");
const OPENKRUISE_JOB: &str = include_str!("../../fixtures/openkruise/imagepulljob.yaml");
const SEED_IMAGE: &str = "swr.cn-north-4.myhuaweicloud.com/ddn-k8s/docker.io/mysql:8.0";

fn image_lists(ctx: &TestContext) -> Api<ImageList> {
    Api::all(ctx.client.clone())
}

/// An ImageList named after the test's namespace (ImageLists are cluster-scoped).
fn image_list(ctx: &TestContext, images: Value) -> Value {
    json!({
        "apiVersion": "stevedore.dev/v1alpha1",
        "kind": "ImageList",
        "metadata": {"name": ctx.namespace},
        "spec": {"images": images}
    })
}

async fn apply_list(ctx: &TestContext, manager: &str, object: &Value) -> Result<ImageList> {
    let name = object["metadata"]["name"].as_str().context("a name")?;
    let pp = PatchParams::apply(manager);
    Ok(image_lists(ctx)
        .patch(name, &pp, &Patch::Apply(object))
        .await?)
}

async fn apply_job(ctx: &TestContext, object: &Value) -> Result<ImagePullJob> {
    let name = object["metadata"]["name"].as_str().context("a name")?;
    let pp = PatchParams::apply("stevedore-tests").force();
    Ok(ctx
        .api::<ImagePullJob>()
        .patch(name, &pp, &Patch::Apply(object))
        .await?)
}

/// Whether the apiserver admits `object` (a server-side dry run); the refusal otherwise.
async fn admitted<K>(api: &Api<K>, object: &Value) -> Result<std::result::Result<(), String>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object["metadata"]["name"].as_str().context("a name")?;
    let mut pp = PatchParams::apply("stevedore-tests").force();
    pp.dry_run = true;
    match api.patch(name, &pp, &Patch::Apply(object)).await {
        Ok(_) => Ok(Ok(())),
        Err(kube::Error::Api(status)) => Ok(Err(status.message)),
        Err(e) => Err(e.into()),
    }
}

/// Expects `object` to be refused with a message containing every one of `words`.
async fn expect_refused<K>(api: &Api<K>, object: &Value, words: &[&str]) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match admitted(api, object).await? {
        Ok(()) => bail!("the apiserver accepted an invalid object: {object}"),
        Err(message) => {
            for word in words {
                ensure!(
                    message.contains(word),
                    "refusal {message:?} does not name {word:?}"
                );
            }
            Ok(())
        }
    }
}

/// `count` distinct valid names.
fn many_names(count: usize) -> Value {
    Value::from((0..count).map(|i| format!("n{i}")).collect::<Vec<_>>())
}

async fn delete_list(ctx: &TestContext) {
    let _ = image_lists(ctx)
        .delete(&ctx.namespace, &DeleteParams::background())
        .await;
}

#[tokio::test]
async fn seed_imagelist_and_openkruise_job_apply_unchanged() -> Result<()> {
    run_in_namespace("crd-imagelist-seeds", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[IMAGELIST_CRD.1, IMAGEPULLJOB_CRD.1]).await?;
        let mut seed: Value = serde_saphyr::from_str(SEED_IMAGELIST)?;
        // Cluster-scoped and shared by all runs: named after this test's namespace.
        seed["metadata"]["name"] = json!(ctx.namespace);
        let stored = apply_list(&ctx, "stevedore-tests", &seed).await;
        delete_list(&ctx).await;
        let entry = stored?.spec.images.get(SEED_IMAGE).cloned();
        ensure!(
            entry.is_some_and(|e| !e.always_pull),
            "the seed's image is kept with alwaysPull false"
        );

        let job: Value = serde_saphyr::from_str(OPENKRUISE_JOB)?;
        let stored = apply_job(&ctx, &job).await?;
        ensure!(stored.spec.image == "nginx:1.9.1", "image kept");
        ensure!(stored.spec.pull_secrets.len() == 2, "pullSecrets kept");
        Ok(())
    })
    .await
}

/// The agent's parser decides; the CEL rules must agree (apart from the documented
/// name-length difference, which no case here reaches).
#[tokio::test]
async fn image_reference_rules_agree_with_the_agent_parser() -> Result<()> {
    run_in_namespace("crd-imagelist-references", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[IMAGELIST_CRD.1, IMAGEPULLJOB_CRD.1]).await?;
        let hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let long_path = format!("registry.example.com/{}", "a".repeat(240));
        let too_long = format!("{}/{}", "b".repeat(300), "c".repeat(250));
        let references = [
            "nginx".to_owned(),
            "nginx:1.25".to_owned(),
            "library/nginx:latest".to_owned(),
            SEED_IMAGE.to_owned(),
            "localhost:5000/foo/bar:v1".to_owned(),
            "localhost/foo".to_owned(),
            "registry:5000/foo".to_owned(),
            "Registry.Example.com/foo".to_owned(),
            "Foo/bar".to_owned(),
            "a.b".to_owned(),
            "foo_bar/baz".to_owned(),
            "foo__bar---baz".to_owned(),
            format!("nginx@sha256:{hex}"),
            format!("nginx:1.25@sha256:{hex}"),
            format!("nginx@sha512:{hex}{hex}"),
            "my_reg.io/x".to_owned(),
            "UPPER".to_owned(),
            "a b".to_owned(),
            "nginx;rm -rf /".to_owned(),
            "nginx$(id)".to_owned(),
            "foo//bar".to_owned(),
            "foo:bar:baz".to_owned(),
            "-foo.io/x".to_owned(),
            "nginx:-tag".to_owned(),
            format!("nginx:{}", "t".repeat(129)),
            "nginx@sha256:0123".to_owned(),
            format!("nginx@sha256:{}", hex.to_uppercase()),
            "registry:port/foo".to_owned(),
            hex.to_owned(),
            format!("{hex}:v1"),
            long_path,
            too_long,
        ];
        let lists = image_lists(&ctx);
        let jobs = ctx.api::<ImagePullJob>();
        for reference in references {
            let agent = Reference::parse_normalized(&reference).is_ok();
            let list = image_list(&ctx, json!({ reference.clone(): {} }));
            let by_list = admitted(&lists, &list).await?;
            ensure!(
                by_list.is_ok() == agent,
                "ImageList key {reference:?}: agent accepts: {agent}, apiserver: {by_list:?}"
            );
            if let Err(message) = by_list {
                let start = &reference[..reference.len().min(80)];
                ensure!(
                    message.contains(start),
                    "refusal {message:?} does not name the key"
                );
            }
            let job = json!({
                "apiVersion": "apps.kruise.io/v1alpha1",
                "kind": "ImagePullJob",
                "metadata": {"name": "ref", "namespace": ctx.namespace},
                "spec": {"image": reference}
            });
            let by_job = admitted(&jobs, &job).await?;
            ensure!(
                by_job.is_ok() == agent,
                "ImagePullJob image {reference:?}: agent accepts: {agent}, apiserver: {by_job:?}"
            );
            if let Err(message) = by_job {
                ensure!(
                    message.contains("spec.image"),
                    "{message:?} names spec.image"
                );
            }
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn bad_imagelist_entries_are_refused_with_the_key_named() -> Result<()> {
    run_in_namespace("crd-imagelist-rules", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[IMAGELIST_CRD.1, IMAGEPULLJOB_CRD.1]).await?;
        let lists = image_lists(&ctx);
        let accepted = [
            json!({"pullInterval": "24h"}),
            json!({"pullInterval": "1h30m", "alwaysPull": true}),
            json!({"pullInterval": "1m"}),
            json!({"timeoutSeconds": 1, "backoffLimit": 0}),
            json!({"pullSecrets": [{"namespace": "a", "name": "s"}, {"namespace": "b", "name": "s"}]}),
        ];
        for entry in accepted {
            let object = image_list(&ctx, json!({ "nginx:1.25": entry.clone() }));
            let verdict = admitted(&lists, &object).await?;
            ensure!(verdict.is_ok(), "{entry} refused: {verdict:?}");
        }
        let cases: Vec<(Value, &[&str])> = vec![
            (json!({"pullInterval": "30s"}), &["nginx:1.25", "pullInterval", "1m"]),
            (json!({"pullInterval": "daily"}), &["nginx:1.25", "pullInterval"]),
            (json!({"pullInterval": "-1h"}), &["nginx:1.25", "pullInterval"]),
            (json!({"timeoutSeconds": 0}), &["nginx:1.25", "timeoutSeconds"]),
            (json!({"backoffLimit": -1}), &["nginx:1.25", "backoffLimit"]),
            (json!({"pullSecrets": [{"namespace": "a"}]}), &["nginx:1.25", "pullSecrets", "name"]),
            (json!({"pullSecrets": [{"name": "s"}]}), &["nginx:1.25", "pullSecrets", "namespace"]),
        ];
        for (entry, words) in cases {
            let object = image_list(&ctx, json!({ "nginx:1.25": entry.clone() }));
            expect_refused(&lists, &object, words)
                .await
                .with_context(|| format!("entry {entry}"))?;
        }
        let object = image_list(&ctx, json!({ "nginx": {}, "Bad/Ref:": {} }));
        expect_refused(&lists, &object, &["spec.images", "Bad/Ref:"]).await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn field_managers_own_their_own_images() -> Result<()> {
    run_in_namespace("crd-imagelist-ssa", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[IMAGELIST_CRD.1, IMAGEPULLJOB_CRD.1]).await?;
        let result = async {
            let person = image_list(
                &ctx,
                json!({"person/app:v1": {"alwaysPull": true}, "shared:v1": {}}),
            );
            let job = image_list(
                &ctx,
                json!({"job/app:v1": {"pullSecrets": [{"namespace": "ns", "name": "s"}]}, "shared:v1": {}}),
            );
            apply_list(&ctx, "person", &person).await?;
            let both = apply_list(&ctx, "imagepulljob-ns-job", &job).await?;
            let keys: Vec<&str> = both.spec.images.keys().map(String::as_str).collect();
            ensure!(
                keys == ["job/app:v1", "person/app:v1", "shared:v1"],
                "both managers' images survive: {keys:?}"
            );
            ensure!(
                both.spec.images["person/app:v1"].always_pull,
                "the person's entry is unchanged"
            );

            // The person stops asking for its images: only what nobody else applies goes.
            let after = apply_list(&ctx, "person", &image_list(&ctx, json!({}))).await?;
            let keys: Vec<&str> = after.spec.images.keys().map(String::as_str).collect();
            ensure!(
                keys == ["job/app:v1", "shared:v1"],
                "only the person's own image is removed: {keys:?}"
            );
            ensure!(
                after.spec.images["job/app:v1"].pull_secrets.len() == 1,
                "the job's entry is unchanged"
            );

            let after = apply_list(&ctx, "imagepulljob-ns-job", &image_list(&ctx, json!({}))).await?;
            ensure!(after.spec.images.is_empty(), "no images left: {:?}", after.spec.images);
            Ok(())
        }
        .await;
        delete_list(&ctx).await;
        result
    })
    .await
}

#[tokio::test]
async fn status_subresource_and_printer_columns() -> Result<()> {
    run_in_namespace("crd-imagelist-status", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[IMAGELIST_CRD.1, IMAGEPULLJOB_CRD.1]).await?;
        let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
        for (name, want) in [
            (
                IMAGELIST_CRD.0,
                &["DESIRED", "SUCCEEDED", "FAILED", "PULLING", "AGE"][..],
            ),
            (
                IMAGEPULLJOB_CRD.0,
                &["TOTAL", "ACTIVE", "SUCCEED", "FAILED", "AGE", "MESSAGE"][..],
            ),
        ] {
            let crd = crds.get(name).await?;
            let columns: Vec<String> = crd.spec.versions[0]
                .additional_printer_columns
                .iter()
                .flatten()
                .map(|c| c.name.clone())
                .collect();
            ensure!(columns == want, "{name} columns: {columns:?}");
        }

        let result = async {
            let list = image_list(&ctx, json!({"nginx:1.25": {}, "redis:7": {}}));
            let stored = apply_list(&ctx, "person", &list).await?;
            let mut status = ImageListStatus::default();
            status.images.insert(
                "nginx:1.25".into(),
                ImageStatus {
                    phase: ImagePullPhase::Pulling,
                    bytes_done: 10,
                    bytes_total: 100,
                    attempts: 1,
                    ..ImageStatus::default()
                },
            );
            status.update_counts(&stored.spec);
            status.observed_generation = stored.metadata.generation.unwrap_or_default();
            let patch = json!({
                "apiVersion": "stevedore.dev/v1alpha1",
                "kind": "ImageList",
                "metadata": {"name": ctx.namespace},
                "status": status
            });
            let pp = PatchParams::apply("stevedore-distributor");
            image_lists(&ctx)
                .patch_status(&ctx.namespace, &pp, &Patch::Apply(&patch))
                .await?;
            // A spec apply does not touch status, and status went through its subresource.
            let stored = apply_list(&ctx, "person", &list).await?;
            let status = stored.status.context("status kept")?;
            ensure!(
                (status.desired, status.pulling, status.waiting) == (2, 1, 1),
                "counts stored: {status:?}"
            );
            ensure!(
                status.images["nginx:1.25"].bytes_done == 10,
                "per-image progress stored"
            );
            Ok(())
        }
        .await;
        delete_list(&ctx).await;
        result
    })
    .await
}

#[tokio::test]
async fn bad_imagepulljobs_are_refused_with_the_field_named() -> Result<()> {
    run_in_namespace("crd-imagepulljob-rules", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[IMAGELIST_CRD.1, IMAGEPULLJOB_CRD.1]).await?;
        let jobs = ctx.api::<ImagePullJob>();
        let job = |spec: Value| {
            json!({
                "apiVersion": "apps.kruise.io/v1alpha1",
                "kind": "ImagePullJob",
                "metadata": {"name": "job", "namespace": ctx.namespace},
                "spec": spec
            })
        };
        let accepted = [
            json!({"image": "nginx"}),
            json!({"image": "nginx", "selector": {"names": ["a", "b"]}}),
            json!({"image": "nginx", "podSelector": {"matchLabels": {"app": "web"}}}),
            json!({"image": "nginx", "parallelism": "50%"}),
            json!({"image": "nginx", "completionPolicy": {"type": "Never"}}),
            json!({"image": "nginx", "completionPolicy": {"activeDeadlineSeconds": 600}}),
            json!({"image": "nginx", "pullPolicy": {"timeoutSeconds": 60}, "completionPolicy": {"activeDeadlineSeconds": 60}}),
            json!({"image": "nginx", "pullSecrets": ["regcred", "other.cred"]}),
            json!({"image": "nginx", "selector": {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}}),
            json!({"image": "nginx", "parallelism": 2147483647}),
        ];
        for spec in accepted {
            let verdict = admitted(&jobs, &job(spec.clone())).await?;
            ensure!(verdict.is_ok(), "{spec} refused: {verdict:?}");
        }
        let cases: Vec<(Value, &[&str])> = vec![
            (json!({"image": "Nginx"}), &["spec.image"]),
            (json!({"image": ""}), &["spec.image"]),
            (
                json!({"image": "nginx", "selector": {"names": ["a"]}, "podSelector": {"matchLabels": {"a": "b"}}}),
                &["spec.selector", "spec.podSelector"],
            ),
            (
                json!({"image": "nginx", "selector": {"names": ["a"], "matchLabels": {"a": "b"}}}),
                &["spec.selector", "names"],
            ),
            (json!({"image": "nginx", "selector": {"names": ["a", "a"]}}), &["spec.selector.names"]),
            (json!({"image": "nginx", "parallelism": "150%"}), &["spec.parallelism"]),
            (json!({"image": "nginx", "parallelism": -1}), &["spec.parallelism"]),
            (
                json!({"image": "nginx", "completionPolicy": {"type": "Never", "ttlSecondsAfterFinished": 5}}),
                &["spec.completionPolicy", "Always"],
            ),
            (
                json!({"image": "nginx", "completionPolicy": {"type": "Never", "activeDeadlineSeconds": 900}}),
                &["spec.completionPolicy", "Always"],
            ),
            (
                json!({"image": "nginx", "completionPolicy": {"activeDeadlineSeconds": 100}}),
                &["spec.completionPolicy.activeDeadlineSeconds", "timeoutSeconds"],
            ),
            (json!({"image": "nginx", "completionPolicy": {"type": "Sometimes"}}), &["spec.completionPolicy.type"]),
            (json!({"image": "nginx", "imagePullPolicy": "Never"}), &["spec.imagePullPolicy"]),
            (json!({"image": "nginx", "pullPolicy": {"timeoutSeconds": 0}}), &["spec.pullPolicy.timeoutSeconds"]),
            (json!({"image": "nginx", "pullPolicy": {"backoffLimit": -1}}), &["spec.pullPolicy.backoffLimit"]),
            // Issue 28: bounds and names.
            (json!({"image": "nginx", "parallelism": 2_147_483_648_i64}), &["spec.parallelism", "2147483647"]),
            (json!({"image": "nginx", "pullPolicy": {"backoffLimit": 2_147_483_648_i64}}), &["spec.pullPolicy.backoffLimit"]),
            (json!({"image": "nginx", "pullSecrets": ["Bad/Secret"]}), &["spec.pullSecrets[0]"]),
            (json!({"image": "nginx", "pullSecrets": many_names(65)}), &["spec.pullSecrets", "64"]),
            (json!({"image": "nginx", "selector": {"names": many_names(5001)}}), &["spec.selector.names", "5000"]),
            (json!({"image": "nginx", "selector": {"names": ["node/1"]}}), &["spec.selector.names[0]"]),
            (json!({"image": "nginx", "selector": {"matchLabels": {"bad key!": "x"}}}), &["spec.selector.matchLabels", "bad key!"]),
            (
                json!({"image": "nginx", "selector": {"matchExpressions": [{"key": "bad key!", "operator": "Exists"}]}}),
                &["spec.selector.matchExpressions[0].key", "bad key!"],
            ),
            (json!({"image": "nginx", "podSelector": {"matchLabels": {"bad key!": "x"}}}), &["spec.podSelector.matchLabels", "bad key!"]),
            (json!({"image": "nginx", "podSelector": {"matchLabels": {"app": "bad value!"}}}), &["spec.podSelector.matchLabels"]),
        ];
        for (spec, words) in cases {
            expect_refused(&jobs, &job(spec.clone()), words)
                .await
                .with_context(|| format!("spec {spec}"))?;
        }
        Ok(())
    })
    .await
}

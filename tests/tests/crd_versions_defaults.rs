//! The served versions and OpenKruise's defaults against the real apiserver: minimal
//! objects read back with every default OpenKruise 1.9's webhook would have stored, in each
//! served version; an ImagePullJob written in one version reads and updates in the other;
//! every served version describes its fields (what `kubectl explain` prints); and a
//! template read back with its defaults names the same revision as the template written.

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use stevedore_controlplane::api::CloneSet;
use stevedore_controlplane::cloneset::pods::RevisionSpec;
use stevedore_tests::{TestContext, run_in_namespace};

const CLONESET_CRD: &str = include_str!("../../deploy/crds/apps.kruise.io_clonesets.yaml");
const IMAGEPULLJOB_CRD: &str = include_str!("../../deploy/crds/apps.kruise.io_imagepulljobs.yaml");
const GROUP: &str = "apps.kruise.io";

fn resource(kind: &str, plural: &str, version: &str) -> ApiResource {
    ApiResource {
        group: GROUP.to_owned(),
        version: version.to_owned(),
        api_version: format!("{GROUP}/{version}"),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    }
}

fn api(ctx: &TestContext, resource: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(ctx.client.clone(), &ctx.namespace, resource)
}

async fn setup(ctx: &TestContext) -> Result<()> {
    stevedore_tests::crds::install(&ctx.client, &[CLONESET_CRD, IMAGEPULLJOB_CRD]).await
}

/// Creates `object` in `resource`'s version and returns it as the apiserver stored it.
async fn create(ctx: &TestContext, resource: &ApiResource, object: Value) -> Result<Value> {
    let object: DynamicObject = serde_json::from_value(object)?;
    let created = api(ctx, resource)
        .create(&PostParams::default(), &object)
        .await?;
    Ok(serde_json::to_value(created)?)
}

async fn read(ctx: &TestContext, resource: &ApiResource, name: &str) -> Result<Value> {
    Ok(serde_json::to_value(api(ctx, resource).get(name).await?)?)
}

/// Fails naming every pointer whose value is not the expected one (`Value::Null`: absent).
fn expect_values<P: AsRef<str>>(object: &Value, expected: &[(P, Value)]) -> Result<()> {
    let wrong: Vec<String> = expected
        .iter()
        .map(|(pointer, value)| (pointer.as_ref(), value))
        .filter(|(pointer, value)| object.pointer(pointer).unwrap_or(&Value::Null) != *value)
        .map(|(pointer, value)| {
            format!(
                "{pointer}: expected {value}, read {:?}",
                object.pointer(pointer)
            )
        })
        .collect();
    ensure!(
        wrong.is_empty(),
        "defaults not as OpenKruise stores them:\n{}",
        wrong.join("\n")
    );
    Ok(())
}

fn minimal_cloneset(name: &str) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": { "name": name },
        "spec": {
            "replicas": 0,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "initContainers": [{ "name": "init", "image": "busybox:1.36" }],
                    "containers": [{
                        "name": "app",
                        "image": "nginx:1.27",
                        "ports": [{ "containerPort": 80 }],
                        "env": [{ "name": "POD", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } }],
                        "livenessProbe": { "httpGet": { "port": 80 } },
                        "readinessProbe": { "tcpSocket": { "port": 80 } },
                        "startupProbe": { "exec": { "command": ["true"] } },
                        "lifecycle": { "preStop": { "httpGet": { "port": 80 } } }
                    }],
                    "volumes": [
                        { "name": "s", "secret": { "secretName": "s" } },
                        { "name": "c", "configMap": { "name": "c" } },
                        { "name": "d", "downwardAPI": { "items": [{ "path": "n", "fieldRef": { "fieldPath": "metadata.name" } }] } },
                        { "name": "p", "projected": { "sources": [
                            { "serviceAccountToken": { "path": "t" } },
                            { "downwardAPI": { "items": [{ "path": "n", "fieldRef": { "fieldPath": "metadata.name" } }] } }
                        ] } },
                        { "name": "h", "hostPath": { "path": "/data" } }
                    ]
                }
            },
            "volumeClaimTemplates": [{ "metadata": { "name": "data" }, "spec": { "accessModes": ["ReadWriteOnce"] } }]
        }
    })
}

/// Every CloneSet default: OpenKruise's `SetDefaultsCloneSet` and, through
/// `SetDefaultPodSpec`, Kubernetes' core defaulters on the template.
fn cloneset_defaults() -> Vec<(String, Value)> {
    let probe = |p: &str| -> [(String, Value); 4] {
        [
            (format!("{p}/timeoutSeconds"), json!(1)),
            (format!("{p}/periodSeconds"), json!(10)),
            (format!("{p}/successThreshold"), json!(1)),
            (format!("{p}/failureThreshold"), json!(3)),
        ]
    };
    let mut defaults: Vec<(String, Value)> = vec![
        ("/spec/revisionHistoryLimit".into(), json!(10)),
        ("/spec/scaleStrategy".into(), json!({})),
        ("/spec/updateStrategy/type".into(), json!("ReCreate")),
        ("/spec/updateStrategy/partition".into(), json!(0)),
        ("/spec/updateStrategy/maxUnavailable".into(), json!("20%")),
        ("/spec/updateStrategy/maxSurge".into(), json!(0)),
    ];
    let pod = "/spec/template/spec";
    let app = format!("{pod}/containers/0");
    let init = format!("{pod}/initContainers/0");
    defaults.extend([
        (format!("{pod}/restartPolicy"), json!("Always")),
        (format!("{pod}/dnsPolicy"), json!("ClusterFirst")),
        (format!("{pod}/schedulerName"), json!("default-scheduler")),
        (format!("{pod}/securityContext"), json!({})),
        (format!("{pod}/terminationGracePeriodSeconds"), json!(30)),
        (format!("{app}/imagePullPolicy"), json!("Always")),
        (
            format!("{app}/terminationMessagePath"),
            json!("/dev/termination-log"),
        ),
        (format!("{app}/terminationMessagePolicy"), json!("File")),
        (format!("{app}/resources"), json!({})),
        (format!("{app}/ports/0/protocol"), json!("TCP")),
        (
            format!("{app}/env/0/valueFrom/fieldRef/apiVersion"),
            json!("v1"),
        ),
        (format!("{app}/livenessProbe/httpGet/path"), json!("/")),
        (format!("{app}/livenessProbe/httpGet/scheme"), json!("HTTP")),
        (format!("{app}/lifecycle/preStop/httpGet/path"), json!("/")),
        (
            format!("{app}/lifecycle/preStop/httpGet/scheme"),
            json!("HTTP"),
        ),
        (format!("{init}/imagePullPolicy"), Value::Null),
        (
            format!("{init}/terminationMessagePath"),
            json!("/dev/termination-log"),
        ),
        (format!("{init}/terminationMessagePolicy"), json!("File")),
        (format!("{init}/resources"), json!({})),
        (format!("{pod}/volumes/0/secret/defaultMode"), json!(420)),
        (format!("{pod}/volumes/1/configMap/defaultMode"), json!(420)),
        (
            format!("{pod}/volumes/2/downwardAPI/defaultMode"),
            json!(420),
        ),
        (
            format!("{pod}/volumes/2/downwardAPI/items/0/fieldRef/apiVersion"),
            json!("v1"),
        ),
        (format!("{pod}/volumes/3/projected/defaultMode"), json!(420)),
        (
            format!("{pod}/volumes/3/projected/sources/0/serviceAccountToken/expirationSeconds"),
            json!(3600),
        ),
        (
            format!("{pod}/volumes/3/projected/sources/1/downwardAPI/items/0/fieldRef/apiVersion"),
            json!("v1"),
        ),
        (format!("{pod}/volumes/4/hostPath/type"), json!("")),
        (
            "/spec/volumeClaimTemplates/0/status/phase".into(),
            json!("Pending"),
        ),
    ]);
    for p in ["livenessProbe", "readinessProbe", "startupProbe"] {
        defaults.extend(probe(&format!("{app}/{p}")));
    }
    defaults
}

#[tokio::test]
async fn a_minimal_cloneset_reads_back_with_openkruise_defaults() -> Result<()> {
    run_in_namespace("crd-defaults-cloneset", |ctx| async move {
        setup(&ctx).await?;
        let clonesets = resource("CloneSet", "clonesets", "v1alpha1");
        let mut object = minimal_cloneset("minimal");
        object["spec"]
            .as_object_mut()
            .context("spec")?
            .remove("replicas");
        let stored = create(&ctx, &clonesets, object).await?;
        let mut expected = cloneset_defaults();
        expected.push(("/spec/replicas".to_owned(), json!(1)));
        expect_values(&stored, &expected)?;
        expect_values(&read(&ctx, &clonesets, "minimal").await?, &expected)?;

        // Values other than the defaults are kept.
        let mut object = minimal_cloneset("explicit");
        object["spec"]["updateStrategy"] =
            json!({ "type": "InPlaceIfPossible", "maxSurge": "10%" });
        object["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(5);
        object["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] =
            json!("IfNotPresent");
        let stored = create(&ctx, &clonesets, object).await?;
        expect_values(
            &stored,
            &[
                ("/spec/replicas", json!(0)),
                ("/spec/updateStrategy/type", json!("InPlaceIfPossible")),
                ("/spec/updateStrategy/maxSurge", json!("10%")),
                ("/spec/updateStrategy/maxUnavailable", json!("20%")),
                (
                    "/spec/template/spec/terminationGracePeriodSeconds",
                    json!(5),
                ),
                (
                    "/spec/template/spec/containers/0/imagePullPolicy",
                    json!("IfNotPresent"),
                ),
            ],
        )
    })
    .await
}

#[tokio::test]
async fn a_template_read_back_with_defaults_names_the_same_revision() -> Result<()> {
    run_in_namespace("crd-defaults-revision", |ctx| async move {
        setup(&ctx).await?;
        let written: CloneSet = serde_json::from_value(minimal_cloneset("hashed"))?;
        let stored = ctx
            .api::<CloneSet>()
            .create(&PostParams::default(), &written)
            .await?;
        let (written, stored) = (RevisionSpec::of(&written), RevisionSpec::of(&stored));
        ensure!(
            written != stored,
            "the apiserver added no defaults to the template"
        );
        ensure!(
            written.to_data()? == stored.to_data()?,
            "the defaulted template names another revision:\nwritten {}\nstored  {}",
            String::from_utf8_lossy(&written.to_data()?),
            String::from_utf8_lossy(&stored.to_data()?)
        );
        Ok(())
    })
    .await
}

/// Reads `name`, changes it with `edit` and writes it back with `replace`.
async fn edit(
    ctx: &TestContext,
    resource: &ApiResource,
    name: &str,
    edit: impl FnOnce(&mut Value),
) -> Result<Value> {
    let mut object = read(ctx, resource, name).await?;
    edit(&mut object);
    let object: DynamicObject = serde_json::from_value(object)?;
    let replaced = api(ctx, resource)
        .replace(name, &PostParams::default(), &object)
        .await?;
    Ok(serde_json::to_value(replaced)?)
}

#[tokio::test]
async fn in_place_only_judges_defaulted_templates() -> Result<()> {
    run_in_namespace("crd-defaults-inplace-only", |ctx| async move {
        setup(&ctx).await?;
        let clonesets = resource("CloneSet", "clonesets", "v1alpha1");
        let mut object = minimal_cloneset("strict");
        object["spec"]["updateStrategy"] = json!({ "type": "InPlaceOnly" });
        object["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array_mut()
            .context("env")?
            .push(json!({ "name": "MODE", "value": "a" }));
        create(&ctx, &clonesets, object).await?;

        edit(&ctx, &clonesets, "strict", |o| {
            let app = &mut o["spec"]["template"]["spec"]["containers"][0];
            app["terminationMessagePolicy"] = json!("File");
            app["image"] = json!("nginx:1.28");
        })
        .await
        .context("an image change, with a default spelled out, is allowed")?;

        let refused = edit(&ctx, &clonesets, "strict", |o| {
            o["spec"]["template"]["spec"]["containers"][0]["env"][1]["value"] = json!("b");
        })
        .await;
        match refused {
            Ok(_) => bail!("InPlaceOnly accepted an env change of a container whose image stayed"),
            Err(e) => ensure!(
                e.to_string().contains("InPlaceOnly"),
                "refusal {e} does not name InPlaceOnly"
            ),
        }
        Ok(())
    })
    .await
}

fn minimal_imagepulljob(name: &str, version: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{version}"),
        "kind": "ImagePullJob",
        "metadata": { "name": name },
        "spec": { "image": "nginx:1.27" }
    })
}

/// Every ImagePullJob default: OpenKruise's `SetDefaultsImagePullJob` (the same in both
/// versions). `parallelism` is not defaulted there; the controller reads its absence as 1.
fn imagepulljob_defaults() -> [(&'static str, Value); 5] {
    [
        ("/spec/completionPolicy/type", json!("Always")),
        ("/spec/imagePullPolicy", json!("IfNotPresent")),
        ("/spec/pullPolicy/timeoutSeconds", json!(600)),
        ("/spec/pullPolicy/backoffLimit", json!(3)),
        ("/spec/parallelism", Value::Null),
    ]
}

#[tokio::test]
async fn a_minimal_imagepulljob_reads_back_with_defaults_in_both_versions() -> Result<()> {
    run_in_namespace("crd-defaults-imagepulljob", |ctx| async move {
        setup(&ctx).await?;
        let versions = ["v1alpha1", "v1beta1"];
        for written in versions {
            let name = format!("minimal-{written}");
            let resource = resource("ImagePullJob", "imagepulljobs", written);
            create(&ctx, &resource, minimal_imagepulljob(&name, written)).await?;
            for read_as in versions {
                let object = read(
                    &ctx,
                    &self::resource("ImagePullJob", "imagepulljobs", read_as),
                    &name,
                )
                .await?;
                ensure!(
                    object["apiVersion"] == json!(format!("{GROUP}/{read_as}")),
                    "{name} read as {read_as} came back as {}",
                    object["apiVersion"]
                );
                expect_values(&object, &imagepulljob_defaults())?;
            }
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn an_imagepulljob_round_trips_between_v1alpha1_and_v1beta1() -> Result<()> {
    run_in_namespace("crd-versions-round-trip", |ctx| async move {
        setup(&ctx).await?;
        let (alpha, beta) = (
            resource("ImagePullJob", "imagepulljobs", "v1alpha1"),
            resource("ImagePullJob", "imagepulljobs", "v1beta1"),
        );
        let mut object = minimal_imagepulljob("trip", "v1beta1");
        object["spec"] = json!({
            "image": "nginx:1.27",
            "pullSecrets": ["registry"],
            "selector": { "names": ["node-a", "node-b"] },
            "parallelism": "50%",
            "pullPolicy": { "timeoutSeconds": 120, "backoffLimit": 1 },
            "completionPolicy": { "type": "Always", "activeDeadlineSeconds": 900, "ttlSecondsAfterFinished": 60 },
            "imagePullPolicy": "Always"
        });
        let written = create(&ctx, &beta, object.clone()).await?;
        ensure!(written["spec"] == object["spec"], "v1beta1 kept the spec: {}", written["spec"]);

        let mut as_alpha = read(&ctx, &alpha, "trip").await?;
        ensure!(as_alpha["spec"] == object["spec"], "v1alpha1 reads the same spec: {}", as_alpha["spec"]);
        as_alpha["spec"]["parallelism"] = json!(3);
        let as_alpha: DynamicObject = serde_json::from_value(as_alpha)?;
        api(&ctx, &alpha).replace("trip", &PostParams::default(), &as_alpha).await?;

        let as_beta = read(&ctx, &beta, "trip").await?;
        ensure!(as_beta["spec"]["parallelism"] == json!(3), "the v1alpha1 update reads back in v1beta1");
        ensure!(as_beta["spec"]["selector"] == object["spec"]["selector"], "the rest is unchanged");
        for version in [&alpha, &beta] {
            let names: Vec<String> = api(&ctx, version)
                .list(&Default::default())
                .await?
                .items
                .iter()
                .filter_map(|o| o.metadata.name.clone())
                .collect();
            ensure!(names == ["trip"], "listing {} shows {names:?}", version.version);
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_declared_template_field_with_a_bad_value_is_refused_naming_it() -> Result<()> {
    run_in_namespace("crd-defaults-bad-input", |ctx| async move {
        setup(&ctx).await?;
        let clonesets = resource("CloneSet", "clonesets", "v1alpha1");
        let pod = "/spec/template/spec";
        let cases = [
            (
                format!("{pod}/terminationGracePeriodSeconds"),
                json!("thirty"),
            ),
            (format!("{pod}/restartPolicy"), json!("Sometimes")),
            (format!("{pod}/dnsPolicy"), json!("ClusterLast")),
            (
                format!("{pod}/containers/0/imagePullPolicy"),
                json!("Sometimes"),
            ),
            (
                format!("{pod}/initContainers/0/imagePullPolicy"),
                json!("Sometimes"),
            ),
            (
                format!("{pod}/containers/0/terminationMessagePolicy"),
                json!("Logs"),
            ),
            (
                format!("{pod}/containers/0/ports/0/protocol"),
                json!("QUIC"),
            ),
            (
                format!("{pod}/containers/0/livenessProbe/httpGet/scheme"),
                json!("FTP"),
            ),
            (format!("{pod}/volumes/0/secret/defaultMode"), json!(1000)),
            (
                format!(
                    "{pod}/volumes/3/projected/sources/0/serviceAccountToken/expirationSeconds"
                ),
                json!(60),
            ),
            (format!("{pod}/volumes/4/hostPath/type"), json!("Pipe")),
            (
                "/spec/volumeClaimTemplates/0/status".to_owned(),
                json!({ "phase": "Gone" }),
            ),
        ];
        for (index, (pointer, value)) in cases.into_iter().enumerate() {
            let mut object = minimal_cloneset(&format!("bad-{index}"));
            let (parent, key) = pointer.rsplit_once('/').context("pointer has a parent")?;
            object.pointer_mut(parent).context("parent exists")?[key] = value.clone();
            // `/a/0/b` is named `a[0].b` by the apiserver.
            let field = pointer
                .trim_start_matches('/')
                .split('/')
                .map(|part| {
                    part.parse::<usize>()
                        .map_or_else(|_| format!(".{part}"), |i| format!("[{i}]"))
                })
                .collect::<String>();
            let field = field.trim_start_matches('.');
            match create(&ctx, &clonesets, object).await {
                Ok(_) => bail!("the apiserver accepted {pointer} = {value}"),
                Err(e) => ensure!(
                    e.to_string().contains(field),
                    "refusal of {pointer} = {value} does not name {field}: {e}"
                ),
            }
        }
        Ok(())
    })
    .await
}

/// Properties without a description in `schema`, as JSON paths.
fn undescribed(schema: &Value, path: &str, found: &mut Vec<String>) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let child = format!("{path}.{name}");
            let described = property
                .get("description")
                .and_then(Value::as_str)
                .is_some_and(|d| !d.trim().is_empty());
            let root_meta =
                path.is_empty() && ["apiVersion", "kind", "metadata"].contains(&name.as_str());
            if !described && !root_meta {
                found.push(child.clone());
            }
            undescribed(property, &child, found);
        }
    }
    if let Some(items) = schema.get("items") {
        undescribed(items, &format!("{path}[*]"), found);
    }
}

#[tokio::test]
async fn every_served_version_describes_its_fields() -> Result<()> {
    run_in_namespace("crd-versions-explain", |ctx| async move {
        setup(&ctx).await?;
        let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
        let expected = [
            ("clonesets.apps.kruise.io", vec!["v1alpha1"]),
            ("imagepulljobs.apps.kruise.io", vec!["v1alpha1", "v1beta1"]),
        ];
        for (name, served) in expected {
            let crd = crds.get(name).await?;
            let versions: Vec<&str> = crd
                .spec
                .versions
                .iter()
                .filter(|v| v.served)
                .map(|v| v.name.as_str())
                .collect();
            ensure!(versions == served, "{name} is served in {versions:?}");
            let storage: Vec<&str> = crd
                .spec
                .versions
                .iter()
                .filter(|v| v.storage)
                .map(|v| v.name.as_str())
                .collect();
            ensure!(storage == ["v1alpha1"], "{name} stores {storage:?}");
            for version in &crd.spec.versions {
                let schema = serde_json::to_value(
                    &version
                        .schema
                        .as_ref()
                        .context("a schema")?
                        .open_api_v3_schema,
                )?;
                let mut missing = Vec::new();
                undescribed(&schema, "", &mut missing);
                ensure!(
                    missing.is_empty(),
                    "{name} {}: no description for {missing:?}",
                    version.name
                );
            }
        }
        Ok(())
    })
    .await
}

//! The served versions and OpenKruise's defaults against the real apiserver: minimal
//! objects (CloneSet, ImagePullJob, Advanced DaemonSet, BroadcastJob, AdvancedCronJob,
//! ImageListPullJob) read back with every default OpenKruise 1.9's webhook would have
//! stored, in each served version; an ImagePullJob written in one version reads and updates
//! in the other; every served version describes its fields (what `kubectl explain` prints);
//! and a CloneSet's or DaemonSet's template read back with its defaults names the same
//! revision as the template written.

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use stevedore_api::{CloneSet, DaemonSet};
use stevedore_controlplane::cloneset::pods::revision_spec;
use stevedore_controlplane::workload::revision_spec::RevisionSpec;
use stevedore_tests::run_in_namespace;

use crate::crd_versions_support;

use crd_versions_support::*;

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
        let (written, stored) = (revision_spec(&written), revision_spec(&stored));
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
async fn a_minimal_daemonset_reads_back_with_openkruise_defaults_in_both_versions() -> Result<()> {
    run_in_namespace("crd-defaults-daemonset", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[DAEMONSET_CRD]).await?;
        expect_defaults_in_each_version(
            &ctx,
            ("DaemonSet", "daemonsets"),
            &ALPHA_AND_BETA,
            minimal_daemonset,
            &daemonset_defaults(),
        )
        .await
    })
    .await
}

#[tokio::test]
async fn a_daemonset_with_only_a_rolling_update_type_reads_back_with_every_default() -> Result<()> {
    // OpenKruise's `SetDefaultsDaemonSet` fills `rollingUpdate` for `{type: RollingUpdate}`.
    run_in_namespace("crd-defaults-daemonset-nested", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[DAEMONSET_CRD]).await?;
        let with_type_only = |name: &str, version: &str| {
            let mut object = minimal_daemonset(name, version);
            object["spec"]["updateStrategy"] = json!({ "type": "RollingUpdate" });
            object
        };
        expect_defaults_in_each_version(
            &ctx,
            ("DaemonSet", "daemonsets"),
            &ALPHA_AND_BETA,
            with_type_only,
            &daemonset_defaults(),
        )
        .await
    })
    .await
}

#[tokio::test]
async fn a_daemonset_template_read_back_with_defaults_names_the_same_revision() -> Result<()> {
    run_in_namespace("crd-defaults-daemonset-revision", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[DAEMONSET_CRD]).await?;
        let written: DaemonSet = serde_json::from_value(minimal_daemonset("hashed", "v1alpha1"))?;
        let stored = ctx
            .api::<DaemonSet>()
            .create(&PostParams::default(), &written)
            .await?;
        // The DaemonSet controller names its revisions by this data.
        let revision = |ds: &DaemonSet| RevisionSpec::template_only(ds.spec.template.clone());
        let (written, stored) = (revision(&written), revision(&stored));
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

#[tokio::test]
async fn a_minimal_broadcastjob_reads_back_with_openkruise_defaults_in_both_versions() -> Result<()>
{
    run_in_namespace("crd-defaults-broadcastjob", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[BROADCASTJOB_CRD]).await?;
        expect_defaults_in_each_version(
            &ctx,
            ("BroadcastJob", "broadcastjobs"),
            &ALPHA_AND_BETA,
            minimal_broadcastjob,
            &broadcastjob_defaults("/spec"),
        )
        .await
    })
    .await
}

#[tokio::test]
async fn a_minimal_advancedcronjob_reads_back_with_openkruise_defaults_in_both_versions()
-> Result<()> {
    run_in_namespace("crd-defaults-advancedcronjob", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[ADVANCEDCRONJOB_CRD]).await?;
        let kind = ("AdvancedCronJob", "advancedcronjobs");

        // A Job's pod template gets the template defaults but no restartPolicy: the
        // template's Always is one a Job refuses.
        let mut expected = advancedcronjob_defaults();
        let job_pod = "/spec/template/jobTemplate/spec/template/spec";
        expected.extend(pod_spec_defaults(job_pod, Value::Null));
        expected.push(("/spec/template/broadcastJobTemplate".into(), Value::Null));
        let with_job = |name: &str, version: &str| {
            minimal_advancedcronjob(&format!("{name}-job"), version, "jobTemplate")
        };
        expect_defaults_in_each_version(&ctx, kind, &ALPHA_AND_BETA, with_job, &expected)
            .await
            .context("with a jobTemplate")?;

        let mut expected = advancedcronjob_defaults();
        expected.extend(broadcastjob_defaults(
            "/spec/template/broadcastJobTemplate/spec",
        ));
        expected.push(("/spec/template/jobTemplate".into(), Value::Null));
        let with_broadcast = |name: &str, version: &str| {
            minimal_advancedcronjob(
                &format!("{name}-broadcast"),
                version,
                "broadcastJobTemplate",
            )
        };
        expect_defaults_in_each_version(&ctx, kind, &ALPHA_AND_BETA, with_broadcast, &expected)
            .await
            .context("with a broadcastJobTemplate")
    })
    .await
}

#[tokio::test]
async fn a_minimal_imagelistpulljob_reads_back_with_openkruise_defaults_in_both_versions()
-> Result<()> {
    run_in_namespace("crd-defaults-imagelistpulljob", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[IMAGELISTPULLJOB_CRD]).await?;
        expect_defaults_in_each_version(
            &ctx,
            ("ImageListPullJob", "imagelistpulljobs"),
            &ALPHA_AND_BETA,
            minimal_imagelistpulljob,
            &imagelistpulljob_defaults(),
        )
        .await
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

        let as_alpha = read(&ctx, &alpha, "trip").await?;
        ensure!(as_alpha["spec"] == object["spec"], "v1alpha1 reads the same spec: {}", as_alpha["spec"]);
        edit(&ctx, &alpha, "trip", |o| o["spec"]["parallelism"] = json!(3)).await?;

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

/// `kubectl get <short name>` works for every kind with OpenKruise's short names
/// (OpenKruise 1.9: `clone`, `asts`, `daemon` and `ads`, `bcj`, `acj`, `crr`, `pub`).
#[tokio::test]
async fn every_kind_answers_to_openkruises_short_names() -> Result<()> {
    run_in_namespace("crd-short-names", |ctx| async move {
        let short_names = [
            ("clone", "clonesets.apps.kruise.io"),
            ("asts", "statefulsets.apps.kruise.io"),
            ("daemon", "daemonsets.apps.kruise.io"),
            ("ads", "daemonsets.apps.kruise.io"),
            ("bcj", "broadcastjobs.apps.kruise.io"),
            ("acj", "advancedcronjobs.apps.kruise.io"),
            ("crr", "containerrecreaterequests.apps.kruise.io"),
            ("pub", "podunavailablebudgets.policy.kruise.io"),
        ];
        let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
        for (short, crd) in short_names {
            let names = crds.get(crd).await?.spec.names;
            let declared = names.short_names.unwrap_or_default();
            ensure!(
                declared.iter().any(|n| n == short),
                "{crd} declares {declared:?}, not {short}"
            );
            ctx.kubectl(&["get", short]).await?;
        }
        Ok(())
    })
    .await
}

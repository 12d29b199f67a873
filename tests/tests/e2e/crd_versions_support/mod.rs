//! Shared by the CRD version and default suite: each served version as a dynamic API, the
//! minimal objects it creates, and the defaults OpenKruise stores for them.

use anyhow::{Context as _, Result, ensure};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use stevedore_tests::TestContext;

pub const CLONESET_CRD: &str =
    include_str!("../../../../deploy/crds/apps.kruise.io_clonesets.yaml");
pub const IMAGEPULLJOB_CRD: &str =
    include_str!("../../../../deploy/crds/apps.kruise.io_imagepulljobs.yaml");
pub const DAEMONSET_CRD: &str =
    include_str!("../../../../deploy/crds/apps.kruise.io_daemonsets.yaml");
pub const BROADCASTJOB_CRD: &str =
    include_str!("../../../../deploy/crds/apps.kruise.io_broadcastjobs.yaml");
pub const ADVANCEDCRONJOB_CRD: &str =
    include_str!("../../../../deploy/crds/apps.kruise.io_advancedcronjobs.yaml");
pub const IMAGELISTPULLJOB_CRD: &str =
    include_str!("../../../../deploy/crds/apps.kruise.io_imagelistpulljobs.yaml");
pub const GROUP: &str = "apps.kruise.io";
/// The versions OpenKruise 1.9 serves DaemonSet, BroadcastJob, AdvancedCronJob,
/// ImagePullJob and ImageListPullJob in.
pub const ALPHA_AND_BETA: [&str; 2] = ["v1alpha1", "v1beta1"];

pub fn resource(kind: &str, plural: &str, version: &str) -> ApiResource {
    ApiResource {
        group: GROUP.to_owned(),
        version: version.to_owned(),
        api_version: format!("{GROUP}/{version}"),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    }
}

pub fn api(ctx: &TestContext, resource: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(ctx.client.clone(), &ctx.namespace, resource)
}

pub async fn setup(ctx: &TestContext) -> Result<()> {
    stevedore_tests::crds::install(&ctx.client, &[CLONESET_CRD, IMAGEPULLJOB_CRD]).await
}

/// Creates `object` in `resource`'s version and returns it as the apiserver stored it.
pub async fn create(ctx: &TestContext, resource: &ApiResource, object: Value) -> Result<Value> {
    let object: DynamicObject = serde_json::from_value(object)?;
    let created = api(ctx, resource)
        .create(&PostParams::default(), &object)
        .await?;
    Ok(serde_json::to_value(created)?)
}

pub async fn read(ctx: &TestContext, resource: &ApiResource, name: &str) -> Result<Value> {
    Ok(serde_json::to_value(api(ctx, resource).get(name).await?)?)
}

/// Fails naming every pointer whose value is not the expected one (`Value::Null`: absent).
pub fn expect_values<P: AsRef<str>>(object: &Value, expected: &[(P, Value)]) -> Result<()> {
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

pub fn minimal_cloneset(name: &str) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": { "name": name },
        "spec": {
            "replicas": 0,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": minimal_pod_spec()
            },
            "volumeClaimTemplates": [{ "metadata": { "name": "data" }, "spec": { "accessModes": ["ReadWriteOnce"] } }]
        }
    })
}

/// A pod spec with one of each field below which the template schema declares a default:
/// an init container, a container with a port, a fieldRef variable, three probes and a
/// preStop hook, and the five kinds of volume with defaults.
pub fn minimal_pod_spec() -> Value {
    json!({
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
    })
}

/// [`minimal_pod_spec`] for a workload that creates pods on its own (a DaemonSet, a
/// BroadcastJob): a node selector no node matches keeps it from creating any.
pub fn minimal_pod_spec_placed_nowhere() -> Value {
    let mut spec = minimal_pod_spec();
    spec["nodeSelector"] = json!({ "stevedore.dev/no-such-node": "true" });
    spec
}

/// Every CloneSet default: OpenKruise's `SetDefaultsCloneSet` and, through
/// `SetDefaultPodSpec`, Kubernetes' core defaulters on the template.
pub fn cloneset_defaults() -> Vec<(String, Value)> {
    let mut defaults: Vec<(String, Value)> = vec![
        ("/spec/revisionHistoryLimit".into(), json!(10)),
        ("/spec/scaleStrategy".into(), json!({})),
        ("/spec/updateStrategy/type".into(), json!("ReCreate")),
        ("/spec/updateStrategy/partition".into(), json!(0)),
        ("/spec/updateStrategy/maxUnavailable".into(), json!("20%")),
        ("/spec/updateStrategy/maxSurge".into(), json!(0)),
        (
            "/spec/volumeClaimTemplates/0/status/phase".into(),
            json!("Pending"),
        ),
    ];
    defaults.extend(pod_spec_defaults("/spec/template/spec", json!("Always")));
    defaults
}

/// The defaults `SetDefaultPodSpec` (Kubernetes' core defaulters, after OpenKruise's
/// container `imagePullPolicy: Always`) stores in [`minimal_pod_spec`] at the pointer
/// `pod`, with `restart_policy` the kind's (`Value::Null`: not defaulted).
pub fn pod_spec_defaults(pod: &str, restart_policy: Value) -> Vec<(String, Value)> {
    let probe = |p: &str| -> [(String, Value); 4] {
        [
            (format!("{p}/timeoutSeconds"), json!(1)),
            (format!("{p}/periodSeconds"), json!(10)),
            (format!("{p}/successThreshold"), json!(1)),
            (format!("{p}/failureThreshold"), json!(3)),
        ]
    };
    let app = format!("{pod}/containers/0");
    let init = format!("{pod}/initContainers/0");
    let mut defaults = vec![
        (format!("{pod}/restartPolicy"), restart_policy),
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
    ];
    for p in ["livenessProbe", "readinessProbe", "startupProbe"] {
        defaults.extend(probe(&format!("{app}/{p}")));
    }
    defaults
}

/// Reads `name`, changes it with `edit` and writes it back with `replace`; a write that
/// lost a race with the controller (409: it wrote status or a finalizer meanwhile) is read
/// and edited again.
pub async fn edit(
    ctx: &TestContext,
    resource: &ApiResource,
    name: &str,
    edit: impl Fn(&mut Value),
) -> Result<Value> {
    let mut attempts = 0;
    loop {
        let mut object = read(ctx, resource, name).await?;
        edit(&mut object);
        let object: DynamicObject = serde_json::from_value(object)?;
        match api(ctx, resource)
            .replace(name, &PostParams::default(), &object)
            .await
        {
            Ok(replaced) => return Ok(serde_json::to_value(replaced)?),
            Err(kube::Error::Api(status)) if status.code == 409 && attempts < 5 => attempts += 1,
            Err(err) => return Err(err.into()),
        }
    }
}

pub fn minimal_imagepulljob(name: &str, version: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{version}"),
        "kind": "ImagePullJob",
        "metadata": { "name": name },
        "spec": { "image": "nginx:1.27" }
    })
}

/// Every ImagePullJob default: OpenKruise's `SetDefaultsImagePullJob` (the same in both
/// versions). `parallelism` is not defaulted there; the controller reads its absence as 1.
pub fn imagepulljob_defaults() -> [(&'static str, Value); 5] {
    [
        ("/spec/completionPolicy/type", json!("Always")),
        ("/spec/imagePullPolicy", json!("IfNotPresent")),
        ("/spec/pullPolicy/timeoutSeconds", json!(600)),
        ("/spec/pullPolicy/backoffLimit", json!(3)),
        ("/spec/parallelism", Value::Null),
    ]
}

/// Creates `object(name, version)` in each of `versions` and reads each back in every one
/// of them, failing unless each read is in the version asked for and has `expected`.
pub async fn expect_defaults_in_each_version(
    ctx: &TestContext,
    (kind, plural): (&str, &str),
    versions: &[&str],
    object: impl Fn(&str, &str) -> Value,
    expected: &[(String, Value)],
) -> Result<()> {
    for written in versions {
        let object = object(&format!("minimal-{written}"), written);
        let name = object["metadata"]["name"]
            .as_str()
            .context("a name")?
            .to_owned();
        let stored = create(ctx, &resource(kind, plural, written), object).await?;
        expect_values(&stored, expected).with_context(|| format!("{kind} {name} as created"))?;
        for read_as in versions {
            let object = read(ctx, &resource(kind, plural, read_as), &name).await?;
            ensure!(
                object["apiVersion"] == json!(format!("{GROUP}/{read_as}")),
                "{name} read as {read_as} came back as {}",
                object["apiVersion"]
            );
            expect_values(&object, expected)
                .with_context(|| format!("{kind} {name} read as {read_as}"))?;
        }
    }
    Ok(())
}

pub fn minimal_daemonset(name: &str, version: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{version}"),
        "kind": "DaemonSet",
        "metadata": { "name": name },
        "spec": {
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": minimal_pod_spec_placed_nowhere()
            }
        }
    })
}

/// Every Advanced DaemonSet default: OpenKruise's `SetDefaultsDaemonSet` /
/// `SetDefaultsDaemonSetV1beta1`, Stevedore's `partition` and `paused` (which OpenKruise
/// leaves unset and reads as 0 and false), and the template defaults.
pub fn daemonset_defaults() -> Vec<(String, Value)> {
    let rolling = "/spec/updateStrategy/rollingUpdate";
    let mut defaults: Vec<(String, Value)> = vec![
        ("/spec/burstReplicas".into(), json!(250)),
        ("/spec/revisionHistoryLimit".into(), json!(10)),
        ("/spec/minReadySeconds".into(), Value::Null),
        ("/spec/updateStrategy/type".into(), json!("RollingUpdate")),
        (format!("{rolling}/rollingUpdateType"), json!("Standard")),
        (format!("{rolling}/maxUnavailable"), json!(1)),
        (format!("{rolling}/maxSurge"), json!(0)),
        (format!("{rolling}/partition"), json!(0)),
        (format!("{rolling}/paused"), json!(false)),
    ];
    defaults.extend(pod_spec_defaults("/spec/template/spec", json!("Always")));
    defaults
}

pub fn minimal_broadcastjob(name: &str, version: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{version}"),
        "kind": "BroadcastJob",
        "metadata": { "name": name },
        "spec": broadcastjob_spec()
    })
}

fn broadcastjob_spec() -> Value {
    json!({ "template": { "spec": minimal_pod_spec_placed_nowhere() } })
}

/// Every BroadcastJob default below the pointer `spec`: OpenKruise's
/// `SetDefaultsBroadcastJob` and the template defaults, with `restartPolicy: OnFailure`
/// for a pod that runs to completion.
pub fn broadcastjob_defaults(spec: &str) -> Vec<(String, Value)> {
    let mut defaults: Vec<(String, Value)> = vec![
        (format!("{spec}/parallelism"), json!(2_147_483_647)),
        (format!("{spec}/completionPolicy/type"), json!("Always")),
        (format!("{spec}/failurePolicy/type"), json!("FailFast")),
    ];
    defaults.extend(pod_spec_defaults(
        &format!("{spec}/template/spec"),
        json!("OnFailure"),
    ));
    defaults
}

/// A minimal AdvancedCronJob whose runs are `template` (`jobTemplate` or
/// `broadcastJobTemplate`), scheduled once a year so that none starts during a test.
pub fn minimal_advancedcronjob(name: &str, version: &str, template: &str) -> Value {
    let spec = match template {
        "jobTemplate" => json!({ "template": { "spec": minimal_pod_spec() } }),
        _ => broadcastjob_spec(),
    };
    let mut runs = json!({});
    runs[template] = json!({ "spec": spec });
    json!({
        "apiVersion": format!("{GROUP}/{version}"),
        "kind": "AdvancedCronJob",
        "metadata": { "name": name },
        "spec": { "schedule": "0 0 1 1 *", "template": runs }
    })
}

/// The AdvancedCronJob defaults of OpenKruise's `SetDefaultsAdvancedCronJob`.
pub fn advancedcronjob_defaults() -> Vec<(String, Value)> {
    vec![
        ("/spec/concurrencyPolicy".into(), json!("Allow")),
        ("/spec/paused".into(), json!(false)),
        ("/spec/successfulJobsHistoryLimit".into(), json!(3)),
        ("/spec/failedJobsHistoryLimit".into(), json!(1)),
        ("/spec/startingDeadlineSeconds".into(), Value::Null),
        ("/spec/timeZone".into(), Value::Null),
    ]
}

pub fn minimal_imagelistpulljob(name: &str, version: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{version}"),
        "kind": "ImageListPullJob",
        "metadata": { "name": name },
        "spec": {
            "images": ["nginx:1.27", "busybox:1.36"],
            "selector": { "names": ["stevedore-no-such-node"] }
        }
    })
}

/// Every ImageListPullJob default: OpenKruise's `SetDefaultsImageListPullJob` /
/// `SetDefaultsImageListPullJobV1beta1` (completion policy and pull policy), and
/// `imagePullPolicy: IfNotPresent`, which OpenKruise's webhook sets only on the
/// ImagePullJobs it creates (the value they get either way).
pub fn imagelistpulljob_defaults() -> Vec<(String, Value)> {
    vec![
        ("/spec/completionPolicy/type".into(), json!("Always")),
        ("/spec/pullPolicy/timeoutSeconds".into(), json!(600)),
        ("/spec/pullPolicy/backoffLimit".into(), json!(3)),
        ("/spec/imagePullPolicy".into(), json!("IfNotPresent")),
        ("/spec/parallelism".into(), Value::Null),
    ]
}

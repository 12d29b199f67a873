//! Shared by the CRD version and default suite: each served version as a dynamic API, the
//! minimal objects it creates, and the defaults OpenKruise stores for them.

use anyhow::{Result, ensure};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use stevedore_tests::TestContext;

pub const CLONESET_CRD: &str = include_str!("../../../deploy/crds/apps.kruise.io_clonesets.yaml");
pub const IMAGEPULLJOB_CRD: &str =
    include_str!("../../../deploy/crds/apps.kruise.io_imagepulljobs.yaml");
pub const GROUP: &str = "apps.kruise.io";

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
pub fn cloneset_defaults() -> Vec<(String, Value)> {
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

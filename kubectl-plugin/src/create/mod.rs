//! `create job|broadcastjob <name> --from=acj/<name>` and `create crr <name> --pod <pod>`:
//! read the source, build the object with [`objects`], create it, print what was made.

pub mod objects;

use anyhow::{Result, anyhow};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, PostParams};
use kube::core::ApiResource;
use kube::{Api, Client};
use serde::Serialize;
use serde_json::Value;
use stevedore_api::{AdvancedCronJob, BroadcastJob, ContainerRecreateRequest};

use crate::apiserver;
use crate::cli::{CreateCommand, Output};
use crate::output;
use objects::{CrrArgs, JobKind};

#[derive(Serialize)]
struct Created {
    resource: String,
    name: String,
    message: String,
}

fn created(out: Output, resource: &str, name: &str, detail: &str) -> Result<u8> {
    let result = Created {
        resource: resource.to_owned(),
        name: name.to_owned(),
        message: format!("{resource}/{name} created{detail}"),
    };
    if !output::structured(out, &result)? {
        output::line(&result.message)?;
    }
    Ok(0)
}

fn dynamic<K: kube::Resource<DynamicType = ()>>(
    client: &Client,
    namespace: &str,
) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &ApiResource::erase::<K>(&()))
}

pub async fn run(
    client: &Client,
    namespace: &str,
    command: CreateCommand,
    out: Output,
) -> Result<u8> {
    match command {
        CreateCommand::Job { name, from } => {
            job(client, namespace, JobKind::Job, &name, &from, out).await
        }
        CreateCommand::Broadcastjob { name, from } => {
            job(client, namespace, JobKind::BroadcastJob, &name, &from, out).await
        }
        CreateCommand::Crr {
            name,
            pod,
            containers,
            unready_grace_period_seconds,
            min_started_seconds,
        } => {
            let args = CrrArgs {
                name,
                containers,
                unready_grace_period_seconds,
                min_started_seconds,
            };
            crr(client, namespace, &pod, args, out).await
        }
    }
}

async fn job(
    client: &Client,
    namespace: &str,
    kind: JobKind,
    name: &str,
    from: &str,
    out: Output,
) -> Result<u8> {
    let cronjob_name = objects::from_cronjob(from).map_err(|e| anyhow!(e))?;
    let cronjob = dynamic::<AdvancedCronJob>(client, namespace)
        .get(&cronjob_name)
        .await
        .map_err(|e| {
            apiserver::error(
                format!("reading AdvancedCronJob {cronjob_name} in namespace {namespace}"),
                e,
            )
        })?;
    let object = objects::job_from_cronjob(kind, &serde_json::to_value(cronjob)?, name)
        .map_err(|e| anyhow!("cannot create {name}: {e}"))?;
    let doing = |resource: &str| format!("creating {resource} {name} in namespace {namespace}");
    let resource = match kind {
        JobKind::Job => {
            let job: Job = serde_json::from_value(object)?;
            Api::<Job>::namespaced(client.clone(), namespace)
                .create(&PostParams::default(), &job)
                .await
                .map_err(|e| apiserver::error(doing("Job"), e))?;
            "job.batch"
        }
        JobKind::BroadcastJob => {
            let job: DynamicObject = serde_json::from_value(object)?;
            dynamic::<BroadcastJob>(client, namespace)
                .create(&PostParams::default(), &job)
                .await
                .map_err(|e| apiserver::error(doing("BroadcastJob"), e))?;
            "broadcastjob.apps.kruise.io"
        }
    };
    created(
        out,
        resource,
        name,
        &format!(" from AdvancedCronJob {cronjob_name}"),
    )
}

async fn crr(
    client: &Client,
    namespace: &str,
    pod_name: &str,
    args: CrrArgs,
    out: Output,
) -> Result<u8> {
    let pod = Api::<Pod>::namespaced(client.clone(), namespace)
        .get(pod_name)
        .await
        .map_err(|e| {
            apiserver::error(
                format!("reading pod {pod_name} in namespace {namespace}"),
                e,
            )
        })?;
    let pod: Value = serde_json::to_value(pod)?;
    let object = objects::container_recreate_request(&pod, &args)
        .map_err(|e| anyhow!("cannot create ContainerRecreateRequest {}: {e}", args.name))?;
    let containers: Vec<String> = object["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect();
    let request: DynamicObject = serde_json::from_value(object)?;
    dynamic::<ContainerRecreateRequest>(client, namespace)
        .create(&PostParams::default(), &request)
        .await
        .map_err(|e| {
            apiserver::error(
                format!(
                    "creating ContainerRecreateRequest {} in namespace {namespace}",
                    args.name
                ),
                e,
            )
        })?;
    let detail = format!(" (recreating {} of pod {pod_name})", containers.join(", "));
    created(
        out,
        "containerrecreaterequest.apps.kruise.io",
        &args.name,
        &detail,
    )
}

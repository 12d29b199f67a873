//! The objects `create` makes, as kubectl-kruise makes them: a Job or BroadcastJob from an
//! AdvancedCronJob's template, and a ContainerRecreateRequest for a pod (pure: the source
//! object and the arguments in, the new object out).

use serde_json::{Map, Value, json};

/// The annotation kubectl puts on a Job made by hand from a CronJob.
pub const INSTANTIATE: &str = "cronjob.kubernetes.io/instantiate";

/// The AdvancedCronJob `--from` names: `acj/<name>`, `advancedcronjob/<name>` or
/// `advancedcronjobs.apps.kruise.io/<name>`.
pub fn from_cronjob(from: &str) -> Result<String, String> {
    let (kind, name) = from
        .split_once('/')
        .ok_or_else(|| format!("--from=\"{from}\" is not acj/<name>"))?;
    let kind = kind.to_ascii_lowercase();
    let kind = crate::workload::strip_group_and_version(&kind);
    match kind {
        "acj" | "advancedcronjob" | "advancedcronjobs"
            if !name.is_empty() && !name.contains('/') =>
        {
            Ok(name.to_owned())
        }
        "cronjob" | "cronjobs" | "cj" => Err(format!(
            "--from=\"{from}\" names a CronJob; this plugin makes jobs from AdvancedCronJobs (acj/<name>): for a CronJob use kubectl create job --from=cronjob/<name>"
        )),
        _ => Err(format!(
            "--from=\"{from}\" does not name an AdvancedCronJob (acj/<name>)"
        )),
    }
}

/// Which of the AdvancedCronJob's templates a command instantiates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    Job,
    BroadcastJob,
}

impl JobKind {
    fn template_field(self) -> &'static str {
        match self {
            Self::Job => "jobTemplate",
            Self::BroadcastJob => "broadcastJobTemplate",
        }
    }

    fn type_meta(self) -> (&'static str, &'static str) {
        match self {
            Self::Job => ("batch/v1", "Job"),
            Self::BroadcastJob => ("apps.kruise.io/v1alpha1", "BroadcastJob"),
        }
    }

    fn command(self) -> &'static str {
        match self {
            Self::Job => "create job",
            Self::BroadcastJob => "create broadcastjob",
        }
    }
}

/// The Job or BroadcastJob named `name` from the AdvancedCronJob `cronjob`'s template:
/// its labels, its annotations plus `cronjob.kubernetes.io/instantiate: manual`, its spec,
/// and an owner reference to the AdvancedCronJob (as kubectl-kruise writes it).
pub fn job_from_cronjob(kind: JobKind, cronjob: &Value, name: &str) -> Result<Value, String> {
    let cronjob_name = cronjob
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let Some(template) = cronjob.pointer(&format!("/spec/template/{}", kind.template_field()))
    else {
        let other = match kind {
            JobKind::Job => JobKind::BroadcastJob,
            JobKind::BroadcastJob => JobKind::Job,
        };
        return Err(format!(
            "AdvancedCronJob {cronjob_name} has no {}; use `{}` for its {}",
            kind.template_field(),
            other.command(),
            other.template_field()
        ));
    };
    let mut annotations: Map<String, Value> = template
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    annotations.insert(INSTANTIATE.to_owned(), json!("manual"));
    let (api_version, object_kind) = kind.type_meta();
    Ok(json!({
        "apiVersion": api_version,
        "kind": object_kind,
        "metadata": {
            "name": name,
            "labels": template.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": cronjob.get("apiVersion").cloned().unwrap_or_else(|| json!("apps.kruise.io/v1alpha1")),
                "kind": "AdvancedCronJob",
                "name": cronjob_name,
                "uid": cronjob.pointer("/metadata/uid").cloned().unwrap_or_default(),
            }],
        },
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    }))
}

/// The arguments of `create crr`, with kubectl-kruise's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrrArgs {
    pub name: String,
    /// The containers to recreate; empty: all of the pod's.
    pub containers: Vec<String>,
    pub unready_grace_period_seconds: i64,
    pub min_started_seconds: i32,
}

/// The ContainerRecreateRequest for `pod` (its JSON): every named container must be one
/// of the pod's.
pub fn container_recreate_request(pod: &Value, args: &CrrArgs) -> Result<Value, String> {
    let pod_name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let in_pod: Vec<&str> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    let missing: Vec<&str> = args
        .containers
        .iter()
        .map(String::as_str)
        .filter(|c| !in_pod.contains(c))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "pod {pod_name} has no container {} (its containers: {})",
            missing.join(", "),
            in_pod.join(", ")
        ));
    }
    let chosen: Vec<Value> = in_pod
        .iter()
        .filter(|c| args.containers.is_empty() || args.containers.iter().any(|a| a == *c))
        .map(|c| json!({ "name": c }))
        .collect();
    Ok(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ContainerRecreateRequest",
        "metadata": { "name": args.name },
        "spec": {
            "podName": pod_name,
            "containers": chosen,
            "strategy": {
                "failurePolicy": "Fail",
                "orderedRecreate": false,
                "unreadyGracePeriodSeconds": args.unready_grace_period_seconds,
                "minStartedSeconds": args.min_started_seconds,
            },
            "activeDeadlineSeconds": 300,
            "ttlSecondsAfterFinished": 1800,
        }
    }))
}

#[cfg(test)]
#[path = "objects_tests.rs"]
mod tests;

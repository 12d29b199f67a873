//! AdvancedCronJob (`apps.kruise.io/v1alpha1`, also served as `v1beta1`): a batch/v1 Job
//! or a BroadcastJob created on a cron schedule in a time zone. OpenKruise's field names
//! and the defaults of its `SetDefaultsAdvancedCronJob` as schema defaults. The schedule's
//! language and the time zone's spelling are checked at admission (`cron_rules`); what a
//! rule cannot see (a reversed range, a zone missing from the IANA database) the
//! controller refuses with an Event naming the field (`advancedcronjob::schedule`).

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::{CustomResource, KubeSchema};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::broadcastjob::BroadcastJobSpec;
use super::{cron_rules, schema};

/// The default of `successfulJobsHistoryLimit`.
pub const DEFAULT_SUCCESSFUL_HISTORY: i32 = 3;
/// The default of `failedJobsHistoryLimit`.
pub const DEFAULT_FAILED_HISTORY: i32 = 1;

/// The desired state of an AdvancedCronJob.
// clippy reads the repeated keys of separate `printcolumn(...)` entries as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "AdvancedCronJob",
    namespaced,
    status = "AdvancedCronJobStatus",
    shortname = "acj",
    doc = "AdvancedCronJob creates a Job or a BroadcastJob on a cron schedule in a time zone (OpenKruise compatible).",
    printcolumn(
        name = "SCHEDULE",
        type_ = "string",
        json_path = ".spec.schedule",
        description = "The cron schedule."
    ),
    printcolumn(
        name = "TYPE",
        type_ = "string",
        json_path = ".status.type",
        description = "The kind of the runs: Job or BroadcastJob."
    ),
    printcolumn(
        name = "LASTSCHEDULETIME",
        type_ = "date",
        json_path = ".status.lastScheduleTime",
        description = "When a run was last scheduled."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the AdvancedCronJob was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct AdvancedCronJobSpec {
    /// The schedule in cron format: five fields, a descriptor (`@hourly`, ...) or
    /// `@every <duration>`.
    #[schemars(length(min = 1, max = 1024))]
    #[x_kube(
        validation = Rule::new("!self.startsWith('TZ=') && !self.startsWith('CRON_TZ=')").message("spec.schedule must not set a time zone (TZ= or CRON_TZ=): use spec.timeZone"),
        validation = Rule::new(cron_rules::SCHEDULE_RULE).message(cron_rules::SCHEDULE_MESSAGE),
        validation = Rule::new(cron_rules::EVERY_NONZERO_RULE).message(cron_rules::EVERY_NONZERO_MESSAGE)
    )]
    pub schedule: String,

    /// The IANA name of the schedule's time zone. Unset: the control plane's zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(
        validation = Rule::new(cron_rules::TIME_ZONE_RULE).message(cron_rules::TIME_ZONE_MESSAGE),
        validation = Rule::new(cron_rules::time_zone_known_rule())
            .message(kube::core::Message::Expression(cron_rules::TIME_ZONE_KNOWN_MESSAGE.into()))
    )]
    pub time_zone: Option<String>,

    /// Seconds after its scheduled time within which a missed run still starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub starting_deadline_seconds: Option<i64>,

    /// Allow (default), Forbid or Replace: what happens when a run is due while one is
    /// still active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Allow"))]
    pub concurrency_policy: Option<ConcurrencyPolicy>,

    /// Suspends subsequent runs; runs already started go on. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub paused: Option<bool>,

    /// Finished successful runs to keep. Defaults to 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = DEFAULT_SUCCESSFUL_HISTORY))]
    pub successful_jobs_history_limit: Option<i32>,

    /// Finished failed runs to keep. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = DEFAULT_FAILED_HISTORY))]
    pub failed_jobs_history_limit: Option<i32>,

    /// What each run creates: a Job or a BroadcastJob.
    pub template: CronJobTemplate,
}

/// `spec.concurrencyPolicy`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Runs may overlap.
    #[default]
    Allow,
    /// A run due while one is active is skipped.
    Forbid,
    /// A run due while one is active replaces it.
    Replace,
}

/// The template of each run: exactly one of jobTemplate and broadcastJobTemplate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.jobTemplate) != has(self.broadcastJobTemplate)").message("spec.template must set exactly one of jobTemplate and broadcastJobTemplate"))]
pub struct CronJobTemplate {
    /// A batch/v1 Job template; the cluster's Job controller runs the Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "job_template")]
    pub job_template: Option<JobTemplateSpec>,
    /// A BroadcastJob template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broadcast_job_template: Option<BroadcastJobTemplateSpec>,
}

/// A BroadcastJob's metadata and spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastJobTemplateSpec {
    /// Labels and annotations of the created BroadcastJobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "open_object")]
    pub metadata: Option<ObjectMeta>,
    /// The spec of the created BroadcastJobs.
    pub spec: BroadcastJobSpec,
}

/// A Job template: its pod template gets OpenKruise's template defaults (its webhook runs
/// `SetDefaultPodSpec` on `jobTemplate.spec.template.spec`) through the shared pod
/// template schema, but no `restartPolicy`: the pod template's `Always` is one a Job
/// refuses, so an unset policy is left for the Job's validation to name. The rest of the
/// Job spec is kept as written; the apiserver validates and defaults it when each Job is
/// created, as it does for a native CronJob.
fn job_template(generator: &mut SchemaGenerator) -> Schema {
    let mut template = schema::pod_template(generator);
    if let Some(policy) = template.pointer_mut("/properties/spec/properties/restartPolicy") {
        policy["description"] = json!(
            "Restart policy of the containers: OnFailure or Never for a Job (Always is refused when the Job is created). Not defaulted."
        );
        if let Some(policy) = policy.as_object_mut() {
            policy.remove("default");
        }
    }
    json_schema!({
        "type": "object",
        "description": "A batch/v1 JobTemplateSpec (metadata and spec of the created Jobs), validated when each Job is created.",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "spec": {
                "type": "object",
                "description": "Spec of the created Jobs (a batch/v1 JobSpec); its pod template gets the pod template defaults.",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": { "template": template }
            }
        }
    })
}

fn open_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "Standard object metadata of the created objects.",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// The kind of the runs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TemplateKind {
    Job,
    BroadcastJob,
}

/// The observed state of an AdvancedCronJob.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdvancedCronJobStatus {
    /// The kind of the runs.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<TemplateKind>,
    /// The runs still active.
    #[serde(default)]
    pub active: Vec<ObjectReference>,
    /// When a run was last scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
}

impl AdvancedCronJobSpec {
    pub fn concurrency(&self) -> ConcurrencyPolicy {
        self.concurrency_policy.unwrap_or_default()
    }

    pub fn is_paused(&self) -> bool {
        self.paused.unwrap_or(false)
    }

    pub fn successful_history(&self) -> usize {
        history(
            self.successful_jobs_history_limit,
            DEFAULT_SUCCESSFUL_HISTORY,
        )
    }

    pub fn failed_history(&self) -> usize {
        history(self.failed_jobs_history_limit, DEFAULT_FAILED_HISTORY)
    }
}

fn history(limit: Option<i32>, default: i32) -> usize {
    usize::try_from(limit.unwrap_or(default)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt as _;
    use serde_json::{Value, json};

    use super::*;

    fn spec_schema() -> Value {
        let crd = AdvancedCronJob::crd();
        let schema = crd.spec.versions[0].schema.clone().expect("a schema");
        serde_json::to_value(schema.open_api_v3_schema).expect("schema as JSON")["properties"]
            ["spec"]
            .clone()
    }

    #[test]
    fn defaults_are_openkruise_defaults() {
        let properties = &spec_schema()["properties"];
        assert_eq!(properties["concurrencyPolicy"]["default"], json!("Allow"));
        assert_eq!(properties["paused"]["default"], json!(false));
        assert_eq!(
            properties["successfulJobsHistoryLimit"]["default"],
            json!(3)
        );
        assert_eq!(properties["failedJobsHistoryLimit"]["default"], json!(1));
        let spec = AdvancedCronJobSpec::default();
        assert_eq!((spec.successful_history(), spec.failed_history()), (3, 1));
        assert_eq!(spec.concurrency(), ConcurrencyPolicy::Allow);
    }

    #[test]
    fn a_job_template_gets_the_pod_template_defaults_but_no_restart_policy() {
        let spec = spec_schema();
        let pod = &spec["properties"]["template"]["properties"]["jobTemplate"]["properties"]["spec"]
            ["properties"]["template"]["properties"]["spec"]["properties"];
        assert_eq!(pod["dnsPolicy"]["default"], json!("ClusterFirst"));
        assert_eq!(pod["terminationGracePeriodSeconds"]["default"], json!(30));
        assert_eq!(
            pod["containers"]["items"]["properties"]["imagePullPolicy"]["default"],
            json!("Always")
        );
        assert!(pod["restartPolicy"].get("default").is_none(), "{pod}");
        assert!(pod["restartPolicy"]["enum"].is_array(), "{pod}");
    }

    #[test]
    fn rules_name_the_fields() {
        let spec = spec_schema();
        let template = spec["properties"]["template"]["x-kubernetes-validations"].to_string();
        assert!(template.contains("exactly one of jobTemplate and broadcastJobTemplate"));
        let schedule = spec["properties"]["schedule"]["x-kubernetes-validations"].to_string();
        assert!(schedule.contains("spec.timeZone"), "{schedule}");
    }

    #[test]
    fn crd_has_short_name_and_columns() {
        let crd = AdvancedCronJob::crd();
        assert_eq!(crd.spec.names.short_names, Some(vec!["acj".to_owned()]));
        let columns: Vec<&str> = crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(columns, ["SCHEDULE", "TYPE", "LASTSCHEDULETIME", "AGE"]);
    }
}

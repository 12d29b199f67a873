//! BroadcastJob (`apps.kruise.io/v1alpha1`, also served as `v1beta1`): one task pod on
//! every eligible node, run to completion. OpenKruise's field names and the defaults of its
//! `SetDefaultsBroadcastJob` as schema defaults; its webhook checks as schema rules.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::common::{CompletionPolicy, INT_OR_PERCENT_RULE, is_default, is_zero};
use super::schema;

/// OpenKruise's default parallelism: no limit (`1<<31 - 1`).
pub const UNLIMITED_PARALLELISM: i32 = i32::MAX;

/// The desired state of a BroadcastJob.
// clippy reads the repeated keys of separate `printcolumn(...)` entries as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "BroadcastJob",
    namespaced,
    status = "BroadcastJobStatus",
    shortname = "bcj",
    doc = "BroadcastJob runs one pod to completion on every eligible node, a bounded number at a time (OpenKruise compatible).",
    printcolumn(
        name = "DESIRED",
        type_ = "integer",
        json_path = ".status.desired",
        description = "The desired number of pods: the number of nodes fit to run one."
    ),
    printcolumn(
        name = "ACTIVE",
        type_ = "integer",
        json_path = ".status.active",
        description = "The number of actively running pods."
    ),
    printcolumn(
        name = "SUCCEEDED",
        type_ = "integer",
        json_path = ".status.succeeded",
        description = "The number of pods which reached phase Succeeded."
    ),
    printcolumn(
        name = "FAILED",
        type_ = "integer",
        json_path = ".status.failed",
        description = "The number of pods which reached phase Failed."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the BroadcastJob was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastJobSpec {
    /// The most pods active at once, as a number or a percentage of the desired pods.
    /// Defaults to 2147483647 (no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = UNLIMITED_PARALLELISM))]
    #[x_kube(validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.parallelism must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"))]
    pub parallelism: Option<IntOrString>,

    /// Template describes the pod run on each node; restartPolicy OnFailure (default)
    /// or Never.
    #[schemars(schema_with = "task_template")]
    pub template: PodTemplateSpec,

    /// When the job counts as finished. Defaults to type Always.
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(extend("default" = {}))]
    pub completion_policy: CompletionPolicy,

    /// Paused stops creating pods; running pods go on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,

    /// What a failed pod does to the job. Defaults to type FailFast.
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(extend("default" = {}))]
    pub failure_policy: FailurePolicy,
}

/// The behaviour of the job when a pod fails.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicy {
    /// Continue, FailFast (default) or Pause.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "FailFast"))]
    pub type_: Option<FailurePolicyType>,
    /// Under restartPolicy OnFailure, a pod whose containers restarted more than this
    /// many times in total counts as failed (0: the first restart fails it, as in
    /// OpenKruise).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0))]
    pub restart_limit: i32,
}

/// What a failed pod does to the job.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum FailurePolicyType {
    /// The job goes on and completes once every node finished, failed pods counted.
    Continue,
    /// The job fails at the first failed pod and deletes its running pods.
    #[default]
    FailFast,
    /// The job pauses at the first failed pod (`spec.paused`).
    Pause,
}

impl FailurePolicy {
    /// The policy type (default FailFast).
    pub fn policy_type(&self) -> FailurePolicyType {
        self.type_.unwrap_or_default()
    }
}

impl BroadcastJobSpec {
    /// parallelism with its default of no limit.
    pub fn parallelism_or_default(&self) -> IntOrString {
        self.parallelism
            .clone()
            .unwrap_or(IntOrString::Int(UNLIMITED_PARALLELISM))
    }
}

/// The pod template with the restart policies a run-to-completion pod may have:
/// OpenKruise refuses `Always` and defaults an unset policy to `OnFailure`.
fn task_template(generator: &mut SchemaGenerator) -> Schema {
    let mut template = schema::pod_template(generator);
    if let Some(policy) = template.pointer_mut("/properties/spec/properties/restartPolicy") {
        *policy = json!({
            "type": "string",
            "description": "Restart policy of the containers: OnFailure or Never (a BroadcastJob's pods run to completion, so Always is refused). Defaults to OnFailure.",
            "enum": ["OnFailure", "Never"],
            "default": "OnFailure"
        });
    }
    template
}

/// The phase of a BroadcastJob, as OpenKruise spells it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BroadcastJobPhase {
    /// Pods are being run.
    #[default]
    Running,
    /// Paused: no new pods are created.
    Paused,
    /// Every pod finished (type Always).
    Completed,
    /// A failure policy or the deadline failed the job.
    Failed,
}

/// The observed state of a BroadcastJob.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastJobStatus {
    /// The latest observations of the job's state: Complete and Failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<JobCondition>,
    /// When the controller first acted on the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// The number of pods running or about to.
    #[serde(default)]
    pub active: i32,
    /// The number of pods which reached phase Succeeded.
    #[serde(default)]
    pub succeeded: i32,
    /// The number of pods which reached phase Failed (or restarted past the limit).
    #[serde(default)]
    pub failed: i32,
    /// The desired number of pods: the nodes fit to run one.
    #[serde(default)]
    pub desired: i32,
    /// The phase of the job: running, paused, completed or failed.
    #[serde(default)]
    pub phase: BroadcastJobPhase,
}

/// One observation of a job's state (`batch/v1` JobCondition's fields).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// Type of the condition: Complete or Failed.
    #[serde(rename = "type")]
    pub type_: String,
    /// Status of the condition: True, False or Unknown.
    pub status: String,
    /// Last time the condition was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// Last time the condition changed status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason of the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable details of the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt as _;
    use serde_json::Value;

    use super::*;

    fn spec_schema() -> Value {
        let crd = BroadcastJob::crd();
        let schema = crd.spec.versions[0].schema.clone().expect("a schema");
        serde_json::to_value(schema.open_api_v3_schema).expect("schema as JSON")
            ["properties"]["spec"]
            .clone()
    }

    #[test]
    fn defaults_are_openkruise_defaults() {
        let spec = spec_schema();
        let properties = &spec["properties"];
        assert_eq!(properties["parallelism"]["default"], json!(2147483647));
        assert_eq!(properties["completionPolicy"]["default"], json!({}));
        assert_eq!(
            properties["completionPolicy"]["properties"]["type"]["default"],
            json!("Always")
        );
        assert_eq!(properties["failurePolicy"]["default"], json!({}));
        assert_eq!(
            properties["failurePolicy"]["properties"]["type"]["default"],
            json!("FailFast")
        );
        let spec = BroadcastJobSpec::default();
        assert_eq!(spec.parallelism_or_default(), IntOrString::Int(i32::MAX));
        assert_eq!(
            spec.failure_policy.policy_type(),
            FailurePolicyType::FailFast
        );
    }

    #[test]
    fn restart_policy_always_is_refused_and_unset_means_on_failure() {
        let spec = spec_schema();
        let policy =
            &spec["properties"]["template"]["properties"]["spec"]["properties"]["restartPolicy"];
        assert_eq!(policy["enum"], json!(["OnFailure", "Never"]));
        assert_eq!(policy["default"], json!("OnFailure"));
    }

    #[test]
    fn deadline_and_ttl_only_with_completion_always() {
        let spec = spec_schema();
        let rules = spec["properties"]["completionPolicy"]["x-kubernetes-validations"].to_string();
        assert!(rules.contains("activeDeadlineSeconds"), "{rules}");
        assert!(rules.contains("ttlSecondsAfterFinished"), "{rules}");
    }

    #[test]
    fn crd_has_short_name_status_and_columns() {
        let crd = BroadcastJob::crd();
        assert_eq!(crd.spec.names.short_names, Some(vec!["bcj".to_owned()]));
        let version = &crd.spec.versions[0];
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some()
        );
        let columns: Vec<&str> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(columns, ["DESIRED", "ACTIVE", "SUCCEEDED", "FAILED", "AGE"]);
    }

    #[test]
    fn phases_are_spelled_as_openkruise_spells_them() {
        let phases = [
            BroadcastJobPhase::Running,
            BroadcastJobPhase::Paused,
            BroadcastJobPhase::Completed,
            BroadcastJobPhase::Failed,
        ]
        .map(|p| serde_json::to_value(p).expect("a phase"));
        assert_eq!(
            phases,
            [
                json!("running"),
                json!("paused"),
                json!("completed"),
                json!("failed")
            ]
        );
    }
}

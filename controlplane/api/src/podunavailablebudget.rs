//! PodUnavailableBudget (`policy.kruise.io/v1alpha1`): how many of a set of pods may be
//! unavailable at once through voluntary disruptions (in-place updates, deletes,
//! evictions). OpenKruise's field names and printer columns; its webhook checks as
//! schema rules.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::INT_OR_PERCENT_RULE;
use super::schema;

/// CEL over `spec.targetRef`: the workload kinds with a scale subresource a budget can
/// follow (OpenKruise's CloneSet and Advanced StatefulSet, and the native ones).
pub const TARGET_KIND_RULE: &str = "(self.apiVersion.startsWith('apps.kruise.io/') && \
    self.kind in ['CloneSet', 'StatefulSet']) || (self.apiVersion == 'apps/v1' && \
    self.kind in ['Deployment', 'ReplicaSet', 'StatefulSet'])";

/// The desired state of a PodUnavailableBudget.
// clippy reads the repeated keys of separate `printcolumn(...)` entries as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "policy.kruise.io",
    version = "v1alpha1",
    kind = "PodUnavailableBudget",
    namespaced,
    status = "PodUnavailableBudgetStatus",
    shortname = "pub",
    doc = "PodUnavailableBudget limits how many of a set of pods voluntary disruptions (in-place updates, deletes, evictions) may make unavailable at once (OpenKruise compatible).",
    printcolumn(
        name = "ALLOWED",
        type_ = "integer",
        json_path = ".status.unavailableAllowed",
        description = "The number of pod disruptions currently allowed."
    ),
    printcolumn(
        name = "AVAILABLE",
        type_ = "integer",
        json_path = ".status.currentAvailable",
        description = "The current number of available pods."
    ),
    printcolumn(
        name = "DESIRED",
        type_ = "integer",
        json_path = ".status.desiredAvailable",
        description = "The minimum desired number of available pods."
    ),
    printcolumn(
        name = "TOTAL",
        type_ = "integer",
        json_path = ".status.totalReplicas",
        description = "The total number of pods counted by this budget."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the budget was created."
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.selector) != has(self.targetRef)")
        .message("spec: exactly one of spec.selector and spec.targetRef must be set"),
    validation = Rule::new("has(self.maxUnavailable) != has(self.minAvailable)")
        .message("spec: exactly one of spec.maxUnavailable and spec.minAvailable must be set")
)]
pub struct PodUnavailableBudgetSpec {
    /// Selector is a label query over the pods the budget protects. Cannot be set with
    /// targetRef.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "budget_selector")]
    pub selector: Option<LabelSelector>,

    /// TargetRef names the workload whose pods the budget protects; its scale gives the
    /// expected number of pods. Cannot be set with selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetReference>,

    /// The most pods that may be unavailable, as a number or a percentage of the
    /// expected pods. Cannot be set with minAvailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.maxUnavailable must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"))]
    pub max_unavailable: Option<IntOrString>,

    /// The fewest pods that must stay available, as a number or a percentage of the
    /// expected pods. Cannot be set with maxUnavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.minAvailable must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"))]
    pub min_available: Option<IntOrString>,
}

/// The workload a budget follows.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(TARGET_KIND_RULE).message("spec.targetRef.kind must be CloneSet or StatefulSet (apps.kruise.io), or Deployment, ReplicaSet or StatefulSet (apps/v1)"))]
pub struct TargetReference {
    /// API version of the workload, e.g. `apps.kruise.io/v1alpha1` or `apps/v1`.
    #[schemars(length(min = 1, max = 253))]
    pub api_version: String,
    /// Kind of the workload.
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
    /// Name of the workload, in the budget's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// The observed state of a PodUnavailableBudget.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodUnavailableBudgetStatus {
    /// The generation of the spec this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pods a disruption (delete, eviction) was admitted for but that the controller has
    /// not yet seen go; name → when it was admitted. An entry expires after 2 minutes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub disrupted_pods: BTreeMap<String, Time>,
    /// Pods an in-place update was admitted for, until they are ready again; name →
    /// when it was admitted. An entry expires after 2 minutes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable_pods: BTreeMap<String, Time>,
    /// The number of pod disruptions currently allowed.
    #[serde(default)]
    pub unavailable_allowed: i32,
    /// The current number of available pods.
    #[serde(default)]
    pub current_available: i32,
    /// The minimum desired number of available pods.
    #[serde(default)]
    pub desired_available: i32,
    /// The total number of pods counted by this budget.
    #[serde(default)]
    pub total_replicas: i32,
}

/// A label selector over pods, as the workloads' (bounded for CEL cost).
fn budget_selector(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut selector = schema::label_selector(generator);
    selector.insert(
        "description".into(),
        "Selector is a label query over the pods the budget protects.".into(),
    );
    selector
}

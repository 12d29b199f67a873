//! API types shared by OpenKruise workloads (OpenKruise's `apis/apps/pub` and the update
//! ordering types): update policy, priority and scatter ordering, in-place update
//! strategy, lifecycle hooks, and the CEL rules for int-or-percent fields.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The percentages an int-or-percent field takes: whole numbers from 0% to 100%.
pub const WHOLE_PERCENT_REGEX: &str = "^(100|[1-9]?[0-9])%$";

/// CEL: an int-or-string field holding an integer from 0 to 2147483647 or a percentage
/// from 0% to 100% ([`WHOLE_PERCENT_REGEX`]); a fraction such as `"12.5%"` is refused.
/// The Rust type ([`IntOrString`](k8s_openapi::apimachinery::pkg::util::intstr::IntOrString))
/// holds an i32: one stored `2147483648` fails every list of the kind. A percentage is at
/// most 100, and the controllers scale it in i64 or f64 (`workload::rollout`), so no
/// percentage admitted here overflows.
pub const INT_OR_PERCENT_RULE: &str = "type(self) == int ? int(self) >= 0 && int(self) <= 2147483647 \
    : string(self).matches('^(100|[1-9]?[0-9])%$')";

/// The percentages CloneSet `partition` takes (kruise #1124): 0% to 100%, below 100% with
/// an optional decimal fraction (`"12.5%"`, `"0.01%"`). `"100.0%"` is refused: OpenKruise
/// tells 100% apart by its spelling.
pub const FRACTIONAL_PERCENT_REGEX: &str = "^(100|[1-9]?[0-9]([.][0-9]+)?)%$";

/// CEL: an integer from 0 to 2147483647 or a percentage matching
/// [`FRACTIONAL_PERCENT_REGEX`] (at most 100, scaled in f64).
pub const FRACTIONAL_PERCENT_RULE: &str = "type(self) == int ? int(self) >= 0 && int(self) <= 2147483647 : \
    string(self).matches('^(100|[1-9]?[0-9]([.][0-9]+)?)%$')";

/// Kubernetes' DNS-1123 subdomain (`IsDNS1123Subdomain`): the names of Secrets, Pods and
/// Nodes. With `maxLength: 253`.
pub const DNS_SUBDOMAIN_REGEX: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// The most `pullSecrets` a job names: Kubernetes sets no limit on a pod's
/// imagePullSecrets, and a pull tries each Secret's credentials, so far above real use (one
/// per registry) but a bound on the Secrets read for one pull.
pub const MAX_PULL_SECRETS: usize = 64;
/// The most node names an ImagePullJob lists: the largest cluster Kubernetes supports
/// ("Considerations for large clusters": at most 5,000 nodes).
pub const MAX_NODE_NAMES: usize = 5000;

/// How pods move to a new template revision (CloneSet `updateStrategy.type`, Advanced
/// StatefulSet `podUpdatePolicy`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PodUpdatePolicy {
    /// Delete the old pod (and its PVCs) and create a new one from the new revision.
    #[default]
    ReCreate,
    /// Update container images in place when only in-place-able fields changed,
    /// recreate otherwise.
    InPlaceIfPossible,
    /// Only in-place updates; template changes that cannot be done in place are refused.
    InPlaceOnly,
}

/// The most weight terms: each holds a label selector whose key rules the apiserver costs
/// once per term, and an unbounded list of them exceeds its CEL budget. Far above real use
/// (a handful of terms).
pub const MAX_WEIGHT_TERMS: usize = 16;

/// Rules that order the pods to update. Only one of orderPriority and weightPriority can be set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(has(self.orderPriority) && size(self.orderPriority) > 0 && has(self.weightPriority) && size(self.weightPriority) > 0)").message("updateStrategy.priorityStrategy: only one of orderPriority and weightPriority can be set"))]
pub struct UpdatePriorityStrategy {
    /// Order terms: pods are sorted by the integer found at the end of the value of each
    /// term's label key; pods with the first key come before pods with only the second.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order_priority: Vec<UpdatePriorityOrderTerm>,
    /// Weight terms: pods are sorted by the sum of the weights of the terms they match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_WEIGHT_TERMS))]
    pub weight_priority: Vec<UpdatePriorityWeightTerm>,
}

/// One order-priority term.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityOrderTerm {
    /// Label key whose value (its last integer, e.g. 10 in `sts-10`) orders the pods.
    pub ordered_key: String,
}

/// One weight-priority term.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePriorityWeightTerm {
    /// Weight added to the priority of pods matching matchSelector, from 1 to 100.
    #[schemars(range(min = 1, max = 100))]
    pub weight: i32,
    /// Selects pods by their labels.
    pub match_selector: LabelSelector,
}

/// A label key and value whose pods are spread out over the update batches.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct UpdateScatterTerm {
    /// Label key.
    #[schemars(length(min = 1))]
    pub key: String,
    /// Label value.
    pub value: String,
}

/// Strategies of in-place update.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateStrategy {
    /// Seconds between marking a pod not ready (InPlaceUpdateReady=False) and updating
    /// its images in place.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0))]
    pub grace_period_seconds: i32,
}

/// Lifecycle hooks for pods before they become Normal, before deletion, and around an
/// in-place update.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    /// Hook before a pod is deleted (state PreparingDelete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_delete: Option<LifecycleHook>,
    /// Hook before a pod is updated in place (PreparingUpdate) and after (Updated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update: Option<LifecycleHook>,
    /// Hook after a pod is created and before it becomes Normal (PreparingNormal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_normal: Option<LifecycleHook>,
}

/// What marks a pod as held by a hook: labels and finalizers a user controller adds or removes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleHook {
    /// The pod is held while it carries all these labels with these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels_handler: BTreeMap<String, String>,
    /// The pod is held while it carries all these finalizers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers_handler: Vec<String>,
    /// Set the pod's KruisePodReady condition to False when it enters PreparingDelete or
    /// PreparingUpdate (and back to True at Updated). Only for preDelete and inPlaceUpdate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mark_pod_not_ready: bool,
}

pub(crate) fn is_zero(value: &i32) -> bool {
    *value == 0
}

pub(crate) fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// When a job (ImagePullJob, BroadcastJob) counts as finished.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum CompletionPolicyType {
    /// The job finishes once every task succeeded or failed (or the deadline passed).
    #[default]
    Always,
    /// The job never finishes: it keeps working on nodes as they come and go.
    Never,
}

/// The completion policy of a job. activeDeadlineSeconds and ttlSecondsAfterFinished work
/// only with type Always.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.type) || self.type != 'Never' || (!has(self.activeDeadlineSeconds) && !has(self.ttlSecondsAfterFinished))").message("spec.completionPolicy: activeDeadlineSeconds and ttlSecondsAfterFinished work only with type Always"))]
pub struct CompletionPolicy {
    /// Type is Always (default) or Never.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Always"))]
    pub type_: Option<CompletionPolicyType>,
    /// Seconds after the start time after which an unfinished job is stopped and counted
    /// as failed; at least 1. Only for type Always.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after the job finished after which it is deleted; 0 deletes it at once.
    /// Unset: never deleted. Only for type Always.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
}

impl CompletionPolicy {
    /// The policy type (default Always).
    pub fn policy_type(&self) -> CompletionPolicyType {
        self.type_.unwrap_or_default()
    }
}

/// Reads `null` as the default value. Server-side apply on Kubernetes before 1.36 stores
/// `null` where the last manager removed the last entry of a map or object
/// (kubernetes/kubernetes#117447); fields that can end up so are `nullable` in the schema
/// and read through this.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

//! Advanced StatefulSet (`apps.kruise.io/v1beta1`): pods with a stable identity (an
//! ordinal, a name, a hostname and their own PVCs), the native `apps/v1` StatefulSet's
//! fields plus OpenKruise's (ordinals, reserved ordinals, in-place update, unordered
//! update, lifecycle hooks). A native manifest with only its `apiVersion` changed reads
//! into this type unchanged.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    INT_OR_PERCENT_RULE, InPlaceUpdateStrategy, Lifecycle, PodUpdatePolicy, UpdatePriorityStrategy,
    is_zero,
};
use super::{schema, workload_rules};

/// The default of `updateStrategy.rollingUpdate.maxUnavailable`.
pub const DEFAULT_MAX_UNAVAILABLE: i32 = 1;
/// The default of `revisionHistoryLimit`.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;

/// One ordinal in a `reserveOrdinals` string: digits, any leading zeros, then at most 10
/// digits, so CEL's `int()` never overflows and the rule can compare it with the i32 limit.
pub const RESERVE_ORDINAL_REGEX: &str = "^0*[0-9]{1,10}$";
/// A range `"<from>-<to>"` of two such ordinals.
pub const RESERVE_RANGE_REGEX: &str = "^0*[0-9]{1,10}-0*[0-9]{1,10}$";

/// CEL on one `reserveOrdinals` entry, exactly what the controller reads
/// (`statefulset::ordinals::ReservedOrdinals::parse`): an integer from 0 to 2147483647, or
/// a string of digits (no sign, no blanks) of such an integer, or a range
/// `"<from>-<to>"` of two with from <= to.
pub const RESERVE_ORDINAL_RULE: &str = "type(self) == int ? int(self) >= 0 && int(self) <= 2147483647 \
    : string(self).matches('^0*[0-9]{1,10}$') ? int(string(self)) <= 2147483647 \
    : string(self).matches('^0*[0-9]{1,10}-0*[0-9]{1,10}$') \
    && int(string(self).split('-')[0]) <= int(string(self).split('-')[1]) \
    && int(string(self).split('-')[1]) <= 2147483647";
/// The message of [`RESERVE_ORDINAL_RULE`]; the apiserver prefixes the entry's path.
const RESERVE_ORDINAL_MESSAGE: &str = "each spec.reserveOrdinals entry must be an ordinal from 0 to 2147483647 \
or a range \"<from>-<to>\" of two with from <= to, such as \"3-5\"";

/// `reserveOrdinals`: int-or-string entries, bounded in number and length so the CEL
/// cost estimate stays in the apiserver's budget.
fn reserve_ordinals_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "description": "Ordinals to skip: integers and ranges like \"3-5\". A pod on a reserved ordinal is deleted; replicas still counts pods, which take the next free ordinals.",
        "maxItems": 1024,
        "items": {
            "x-kubernetes-int-or-string": true,
            "maxLength": 32,
            "x-kubernetes-validations": [{ "rule": RESERVE_ORDINAL_RULE, "message": RESERVE_ORDINAL_MESSAGE }]
        }
    })
}

/// CEL on the spec: `unorderedUpdate` needs the Parallel policy (OpenKruise's validation).
const UNORDERED_NEEDS_PARALLEL: &str = "!has(self.updateStrategy) || !has(self.updateStrategy.rollingUpdate) \
    || !has(self.updateStrategy.rollingUpdate.unorderedUpdate) \
    || (has(self.podManagementPolicy) && self.podManagementPolicy == 'Parallel')";
/// CEL on the spec: `scaleStrategy.maxUnavailable` needs the Parallel policy.
const SCALE_UNAVAILABLE_NEEDS_PARALLEL: &str = "!has(self.scaleStrategy) || !has(self.scaleStrategy.maxUnavailable) \
    || (has(self.podManagementPolicy) && self.podManagementPolicy == 'Parallel')";
/// CEL on the update strategy: `rollingUpdate` only with type RollingUpdate.
///
/// `rollingUpdate` defaults to `{}` so `{type: RollingUpdate}` reads back with its defaults
/// filled, as OpenKruise's `SetDefaultsStatefulSet` fills them; a structural default cannot
/// depend on `type`, so under OnDelete a `rollingUpdate` holding only those defaults is
/// admitted and anything else is refused.
const ROLLING_ONLY_WITH_ROLLING: &str = "!has(self.rollingUpdate) || !has(self.type) || self.type == 'RollingUpdate' || (\
     (!has(self.rollingUpdate.partition) || self.rollingUpdate.partition == 0) \
     && (!has(self.rollingUpdate.maxUnavailable) || (type(self.rollingUpdate.maxUnavailable) == int && int(self.rollingUpdate.maxUnavailable) == 1)) \
     && (!has(self.rollingUpdate.podUpdatePolicy) || self.rollingUpdate.podUpdatePolicy == 'ReCreate') \
     && (!has(self.rollingUpdate.minReadySeconds) || self.rollingUpdate.minReadySeconds == 0) \
     && (!has(self.rollingUpdate.paused) || !self.rollingUpdate.paused) \
     && !has(self.rollingUpdate.unorderedUpdate) && !has(self.rollingUpdate.inPlaceUpdateStrategy))";
/// CEL transition rule on the spec: claim templates are neither added nor removed. A
/// template added later would name a claim existing pods do not mount, and a pod spec
/// cannot gain a volume: OpenKruise looped on the apiserver's Forbidden (#2343). Refused
/// here at apply, with the reason, instead.
const CLAIM_TEMPLATES_FIXED: &str = "(has(self.volumeClaimTemplates) ? self.volumeClaimTemplates.map(t, \
    has(t.metadata) && has(t.metadata.name) ? t.metadata.name : '') : []) \
    == (has(oldSelf.volumeClaimTemplates) ? oldSelf.volumeClaimTemplates.map(t, \
    has(t.metadata) && has(t.metadata.name) ? t.metadata.name : '') : [])";

/// The desired state of an Advanced StatefulSet.
// clippy reads the repeated keys of separate `printcolumn(...)` entries as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "StatefulSet",
    namespaced,
    status = "StatefulSetStatus",
    shortname = "asts",
    doc = "StatefulSet (Advanced StatefulSet) manages pods with a stable identity and their own PVCs, with the native StatefulSet's semantics plus in-place update, reserved ordinals and unordered update (OpenKruise compatible).",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    ),
    printcolumn(
        name = "DESIRED",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "The desired number of pods."
    ),
    printcolumn(
        name = "CURRENT",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "The number of currently all pods."
    ),
    printcolumn(
        name = "UPDATED",
        type_ = "integer",
        json_path = ".status.updatedReplicas",
        description = "The number of pods updated."
    ),
    printcolumn(
        name = "READY",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "The number of pods ready."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the StatefulSet was created."
    ),
    printcolumn(
        name = "CONTAINERS",
        type_ = "string",
        priority = "1",
        json_path = ".spec.template.spec.containers[*].name",
        description = "The containers of the pods."
    ),
    printcolumn(
        name = "IMAGES",
        type_ = "string",
        priority = "1",
        json_path = ".spec.template.spec.containers[*].image",
        description = "The images of the pods."
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = workload_rules::selector_not_empty(),
    validation = workload_rules::selector_labels_match(),
    validation = workload_rules::selector_expressions_match(),
    validation = workload_rules::selector_labels_not_controller_owned(),
    validation = workload_rules::selector_expressions_not_controller_owned(),
    validation = Rule::new(UNORDERED_NEEDS_PARALLEL)
        .message("spec.updateStrategy.rollingUpdate.unorderedUpdate works only with podManagementPolicy Parallel")
        .field_path(".updateStrategy.rollingUpdate.unorderedUpdate"),
    validation = Rule::new(SCALE_UNAVAILABLE_NEEDS_PARALLEL)
        .message("spec.scaleStrategy.maxUnavailable works only with podManagementPolicy Parallel")
        .field_path(".scaleStrategy.maxUnavailable"),
    validation = Rule::new(CLAIM_TEMPLATES_FIXED)
        .message("spec.volumeClaimTemplates: templates cannot be added, removed or renamed after creation; existing pods could not mount the new claims. Create a new StatefulSet instead")
        .field_path(".volumeClaimTemplates")
)]
pub struct StatefulSetSpec {
    /// Replicas is the desired number of pods. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 1))]
    pub replicas: Option<i32>,

    /// Selector is a label query over pods that should match the replica count. It must
    /// match the pod template's labels.
    #[schemars(schema_with = "schema::label_selector")]
    pub selector: LabelSelector,

    /// Template describes the pods that will be created.
    #[schemars(schema_with = "schema::pod_template")]
    pub template: PodTemplateSpec,

    /// VolumeClaimTemplates is a list of claims that pods are allowed to reference. A larger
    /// storage request reaches existing claims only under volumeClaimUpdateStrategy
    /// OnPodRollingUpdate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::statefulset_pvc_templates")]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,

    /// VolumeClaimUpdateStrategy says whether the claims of existing pods follow a larger
    /// storage request in their template: OnDelete (default) leaves them as they are, a
    /// claim made again after a delete takes the template; OnPodRollingUpdate grows each
    /// pod's claims before the rolling update moves that pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub volume_claim_update_strategy: Option<VolumeClaimUpdateStrategy>,

    /// ServiceName is the headless Service that gives each pod its DNS name
    /// `<pod>.<serviceName>`; the pods' subdomain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,

    /// PodManagementPolicy is OrderedReady (default: one pod at a time, in ordinal
    /// order) or Parallel (all at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "OrderedReady"))]
    pub pod_management_policy: Option<PodManagementPolicy>,

    /// UpdateStrategy says how pods are updated to a new revision of the template.
    /// Defaults to type RollingUpdate with partition 0, maxUnavailable 1, podUpdatePolicy
    /// ReCreate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"type": "RollingUpdate", "rollingUpdate": {}}))]
    pub update_strategy: Option<StatefulSetUpdateStrategy>,

    /// RevisionHistoryLimit is the number of old ControllerRevisions kept. Defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 10))]
    pub revision_history_limit: Option<i32>,

    /// Minimum number of seconds a new pod must be ready, without any container crashing,
    /// to count as available (the native field; `rollingUpdate.minReadySeconds` wins when set).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0))]
    pub min_ready_seconds: i32,

    /// Ordinals says where pod numbering starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordinals: Option<StatefulSetOrdinals>,

    /// Ordinals to skip: integers and ranges like "3-5". A pod on a reserved ordinal is
    /// deleted; replicas still counts pods, which take the next free ordinals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "reserve_ordinals_schema")]
    pub reserve_ordinals: Vec<IntOrString>,

    /// What happens to the PVCs of pods when the StatefulSet is deleted or scaled down.
    /// Defaults to Retain for both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"whenDeleted": "Retain", "whenScaled": "Retain"}))]
    pub persistent_volume_claim_retention_policy: Option<PvcRetentionPolicy>,

    /// How pods are created and deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_strategy: Option<StatefulSetScaleStrategy>,

    /// Lifecycle hooks for pods before they become Normal, before deletion, and around
    /// in-place updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
}

/// How the pods of a StatefulSet are created and deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PodManagementPolicy {
    /// One pod at a time: create in ordinal order, each after the one before is Running
    /// and Ready; delete from the highest ordinal down.
    #[default]
    OrderedReady,
    /// Create and delete all pods at once.
    Parallel,
}

/// Where pod numbering starts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetOrdinals {
    /// The ordinal of the first pod. Defaults to 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0))]
    pub start: i32,
}

/// Retain or Delete.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PvcRetentionPolicyType {
    /// Keep the PVCs.
    #[default]
    Retain,
    /// Delete the PVCs (through their owner references, as upstream).
    Delete,
}

/// What happens to the PVCs of pods when the StatefulSet is deleted or scaled down.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PvcRetentionPolicy {
    /// When the StatefulSet is deleted. Defaults to Retain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Retain"))]
    pub when_deleted: Option<PvcRetentionPolicyType>,
    /// When a pod is removed by a scale-down. Defaults to Retain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Retain"))]
    pub when_scaled: Option<PvcRetentionPolicyType>,
}

/// When the claims of existing pods follow their template (OpenKruise 1.9).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum VolumeClaimUpdateStrategyType {
    /// A pod's claims are grown to their template's storage request as part of that pod's
    /// rolling update, before the pod itself is updated.
    OnPodRollingUpdate,
    /// Claims are left as they are; a claim deleted and made again takes the template.
    #[default]
    OnDelete,
}

/// How the claims of existing pods follow a change of their template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct VolumeClaimUpdateStrategy {
    /// OnDelete (default) or OnPodRollingUpdate.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "OnDelete"))]
    pub type_: Option<VolumeClaimUpdateStrategyType>,
}

/// How pods are created and deleted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetScaleStrategy {
    /// The maximum number of unavailable pods while scaling up (an integer or a
    /// percentage of replicas); Parallel only. Unset: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.scaleStrategy.maxUnavailable must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"))]
    pub max_unavailable: Option<IntOrString>,
}

/// RollingUpdate or OnDelete.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StatefulSetUpdateStrategyType {
    /// The controller updates pods, from the highest ordinal down.
    #[default]
    RollingUpdate,
    /// Pods are updated only when the user deletes them.
    OnDelete,
}

/// How pods are updated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(ROLLING_ONLY_WITH_ROLLING).message("spec.updateStrategy.rollingUpdate is allowed only with type RollingUpdate (with OnDelete it may hold only its defaults)"))]
pub struct StatefulSetUpdateStrategy {
    /// Type is RollingUpdate (default) or OnDelete.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "RollingUpdate"))]
    pub type_: Option<StatefulSetUpdateStrategyType>,

    /// Parameters of a rolling update (with type OnDelete, only their defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub rolling_update: Option<RollingUpdateStatefulSetStrategy>,
}

/// Parameters of a rolling update.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateStatefulSetStrategy {
    /// Pods with an ordinal >= partition are updated; the others keep their revision.
    /// Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 0))]
    pub partition: Option<i32>,

    /// The maximum number or percentage of unavailable pods during an update; more than
    /// 1 only takes effect with podManagementPolicy Parallel. Pods that are not ready count
    /// as unavailable. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_MAX_UNAVAILABLE))]
    #[x_kube(
        validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.updateStrategy.rollingUpdate.maxUnavailable must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"),
        validation = Rule::new("type(self) == int ? int(self) != 0 : string(self) != '0%'").message("spec.updateStrategy.rollingUpdate.maxUnavailable must not be 0: no pod could ever be updated")
    )]
    pub max_unavailable: Option<IntOrString>,

    /// ReCreate (default), InPlaceIfPossible or InPlaceOnly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "ReCreate"))]
    pub pod_update_policy: Option<PodUpdatePolicy>,

    /// Paused stops updates; replicas are still managed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,

    /// Update pods in priority order rather than by ordinal (Parallel only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unordered_update: Option<UnorderedUpdateStrategy>,

    /// Strategies of in-place update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_strategy: Option<InPlaceUpdateStrategy>,

    /// Seconds an updated pod must be ready before the next is updated, from 0 to 300.
    /// Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 300), extend("default" = 0))]
    pub min_ready_seconds: Option<i32>,
}

/// Update order by priority instead of by ordinal.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnorderedUpdateStrategy {
    /// Priority rules for the order in which pods are updated (as CloneSet's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,
}

/// The observed state of an Advanced StatefulSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetStatus {
    /// The most recent generation observed by the controller.
    #[serde(default)]
    pub observed_generation: i64,
    /// The number of pods of the StatefulSet.
    #[serde(default)]
    pub replicas: i32,
    /// The number of pods with a Ready condition.
    #[serde(default)]
    pub ready_replicas: i32,
    /// The number of pods ready for at least minReadySeconds.
    #[serde(default)]
    pub available_replicas: i32,
    /// The number of pods of the current revision.
    #[serde(default)]
    pub current_replicas: i32,
    /// The number of pods of the update revision.
    #[serde(default)]
    pub updated_replicas: i32,
    /// The number of pods of the update revision that are ready.
    #[serde(default)]
    pub updated_ready_replicas: i32,
    /// The number of pods of the update revision that are available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_available_replicas: Option<i32>,
    /// The revision all pods ran before the current update.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_revision: String,
    /// The latest revision of the template (a ControllerRevision name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub update_revision: String,
    /// Count of hash collisions, used to name the newest ControllerRevision uniquely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// The latest observations of the StatefulSet's state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<StatefulSetCondition>,
    /// The pod label selector in string form, for the scale subresource and HPAs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
    /// Per claim template, how many pods' claims hold at least its storage request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_claims: Vec<VolumeClaimStatus>,
}

/// How the claims of one template compare with it across the pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeClaimStatus {
    /// The claim template's name.
    pub volume_claim_name: String,
    /// Pods whose claim asks for at least the template's storage request (and has its
    /// storage class and access modes).
    #[serde(default)]
    pub compatible_replicas: i32,
    /// Of those, the pods whose claim's capacity holds what the claim asks for.
    #[serde(default)]
    pub compatible_ready_replicas: i32,
}

/// One observation of a StatefulSet's state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetCondition {
    /// Type of the condition, e.g. FailedCreatePod, FailedUpdatePod.
    #[serde(rename = "type")]
    pub type_: String,
    /// Status of the condition: True, False or Unknown.
    pub status: String,
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

impl StatefulSetSpec {
    /// The desired number of pods (default 1).
    pub fn desired_replicas(&self) -> i32 {
        self.replicas.unwrap_or(1)
    }

    /// The number of old ControllerRevisions to keep (default 10).
    pub fn history_limit(&self) -> i32 {
        self.revision_history_limit
            .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT)
    }

    /// The pod management policy (default OrderedReady).
    pub fn management_policy(&self) -> PodManagementPolicy {
        self.pod_management_policy.unwrap_or_default()
    }

    /// The update strategy type (default RollingUpdate).
    pub fn update_type(&self) -> StatefulSetUpdateStrategyType {
        self.update_strategy
            .as_ref()
            .and_then(|u| u.type_)
            .unwrap_or_default()
    }

    /// The rolling-update parameters, all defaults when unset.
    pub fn rolling_update(&self) -> RollingUpdateStatefulSetStrategy {
        self.update_strategy
            .as_ref()
            .and_then(|u| u.rolling_update.clone())
            .unwrap_or_default()
    }

    /// The ordinal of the first pod (default 0).
    pub fn start_ordinal(&self) -> i32 {
        self.ordinals.as_ref().map_or(0, |o| o.start)
    }

    /// How long a pod must be ready to count as available: `rollingUpdate.minReadySeconds`
    /// when set, else the native `minReadySeconds`.
    pub fn effective_min_ready_seconds(&self) -> i32 {
        self.rolling_update()
            .min_ready_seconds
            .unwrap_or(self.min_ready_seconds)
    }

    /// The volume claim update strategy (default OnDelete).
    pub fn claim_update_type(&self) -> VolumeClaimUpdateStrategyType {
        (self.volume_claim_update_strategy.as_ref())
            .and_then(|s| s.type_)
            .unwrap_or_default()
    }

    /// The PVC retention policy (default Retain, Retain).
    pub fn retention(&self) -> (PvcRetentionPolicyType, PvcRetentionPolicyType) {
        let policy = self.persistent_volume_claim_retention_policy.as_ref();
        (
            policy.and_then(|p| p.when_deleted).unwrap_or_default(),
            policy.and_then(|p| p.when_scaled).unwrap_or_default(),
        )
    }
}

impl RollingUpdateStatefulSetStrategy {
    /// The update policy (default ReCreate).
    pub fn policy(&self) -> PodUpdatePolicy {
        self.pod_update_policy.unwrap_or_default()
    }

    /// partition with its default of 0.
    pub fn partition_or_default(&self) -> i32 {
        self.partition.unwrap_or(0)
    }

    /// maxUnavailable with its default of 1.
    pub fn max_unavailable_or_default(&self) -> IntOrString {
        self.max_unavailable
            .clone()
            .unwrap_or(IntOrString::Int(DEFAULT_MAX_UNAVAILABLE))
    }
}

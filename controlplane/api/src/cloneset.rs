//! CloneSet (`apps.kruise.io/v1alpha1`): a set of interchangeable pods, each with its own
//! PVCs, updated by recreation or in place.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    FRACTIONAL_PERCENT_RULE, INT_OR_PERCENT_RULE, InPlaceUpdateStrategy, Lifecycle,
    PodUpdatePolicy, UpdatePriorityStrategy, UpdateScatterTerm, is_default, is_zero,
};
use super::{schema, workload_rules};

/// The default of `updateStrategy.maxUnavailable`.
pub const DEFAULT_MAX_UNAVAILABLE: &str = "20%";
/// The default of `revisionHistoryLimit`.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;
/// A CloneSet label that turns on `scaleStrategy.excludePreparingDelete` for that CloneSet
/// (OpenKruise's `CloneSetScalingExcludePreparingDeleteKey`, the v1alpha1 way to ask).
pub const SCALING_EXCLUDE_PREPARING_DELETE_LABEL: &str =
    "apps.kruise.io/cloneset-scaling-exclude-preparing-delete";

/// Transition rule under InPlaceOnly: the containers (names and order) stay the same, and
/// a container whose image and resources did not change must not change at all. Not
/// covered by CEL (it cannot see undeclared preserved fields or mask a field): other
/// fields of a container whose image or resources change in the same update, which
/// resources can be resized, and pod-level fields outside `containers`; the controller
/// refuses to recreate those pods under InPlaceOnly, naming the field.
const IN_PLACE_ONLY_IMAGES: &str = "!has(self.updateStrategy) || !has(self.updateStrategy.type) \
    || self.updateStrategy.type != 'InPlaceOnly' \
    || (self.template.spec.containers.map(c, c.name) == oldSelf.template.spec.containers.map(c, c.name) \
    && self.template.spec.containers.all(c, oldSelf.template.spec.containers.exists(o, o.name == c.name \
    && ((has(o.image) && has(c.image) && o.image != c.image) \
    || (has(o.resources) && has(c.resources) && o.resources != c.resources) || o == c))))";

/// The desired state of a CloneSet.
// clippy reads the repeated keys of separate `printcolumn(...)` entries as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "CloneSet",
    namespaced,
    status = "CloneSetStatus",
    shortname = "clone",
    doc = "CloneSet manages a set of interchangeable pods, each with its own PVCs, and updates them by recreation or in place (OpenKruise compatible).",
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
        name = "UPDATED",
        type_ = "integer",
        json_path = ".status.updatedReplicas",
        description = "The number of pods updated."
    ),
    printcolumn(
        name = "UPDATED_READY",
        type_ = "integer",
        json_path = ".status.updatedReadyReplicas",
        description = "The number of pods updated and ready."
    ),
    printcolumn(
        name = "UPDATED_AVAILABLE",
        type_ = "integer",
        json_path = ".status.updatedAvailableReplicas",
        description = "The number of pods updated and available."
    ),
    printcolumn(
        name = "READY",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "The number of pods ready."
    ),
    printcolumn(
        name = "TOTAL",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "The number of currently all pods."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the CloneSet was created."
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
    ),
    printcolumn(
        name = "SELECTOR",
        type_ = "string",
        priority = "1",
        json_path = ".status.labelSelector",
        description = "The label selector of the pods."
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = workload_rules::selector_not_empty(),
    validation = workload_rules::selector_labels_match(),
    validation = workload_rules::selector_expressions_match(),
    validation = workload_rules::selector_labels_not_controller_owned(),
    validation = workload_rules::selector_expressions_not_controller_owned(),
    validation = Rule::new(IN_PLACE_ONLY_IMAGES)
        .message("spec.template: under updateStrategy.type InPlaceOnly only container images and resources (and template metadata) may change")
        .field_path(".template")
)]
pub struct CloneSetSpec {
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

    /// VolumeClaimTemplates is a list of claims that pods are allowed to reference.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::pvc_templates")]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,

    /// ScaleStrategy says how pods are created and deleted. Defaults to {}.
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(extend("default" = {}))]
    pub scale_strategy: CloneSetScaleStrategy,

    /// UpdateStrategy says how pods are updated to a new revision of the template.
    /// Defaults to type ReCreate, partition 0, maxUnavailable 20%, maxSurge 0.
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(extend("default" = {}))]
    pub update_strategy: CloneSetUpdateStrategy,

    /// RevisionHistoryLimit is the number of old ControllerRevisions kept. Defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 10))]
    pub revision_history_limit: Option<i32>,

    /// Minimum number of seconds a new pod must be ready, without any container crashing,
    /// to count as available. Defaults to 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0))]
    pub min_ready_seconds: i32,

    /// Seconds a rollout may take before the Progressing condition turns False with reason
    /// ProgressDeadlineExceeded (counted from when it began, as OpenKruise does; a pause or
    /// a reached partition stops the clock). Unset or 2147483647: no deadline and no
    /// Progressing condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub progress_deadline_seconds: Option<i32>,

    /// Lifecycle hooks for pods before they become Normal, before deletion, and around
    /// in-place updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
}

/// How pods are created and deleted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetScaleStrategy {
    /// Names of pods to delete first; names of pods that no longer exist are removed
    /// from the list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods_to_delete: Vec<String>,

    /// The maximum number of unavailable pods while scaling up (an integer or a
    /// percentage of replicas). Unset: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.scaleStrategy.maxUnavailable must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"))]
    pub max_unavailable: Option<IntOrString>,

    /// Do not reuse the PVCs of a pod deleted from outside for its replacement; delete them.
    #[serde(
        default,
        skip_serializing_if = "std::ops::Not::not",
        rename = "disablePVCReuse"
    )]
    pub disable_pvc_reuse: bool,

    /// Count replicas without the pods in PreparingDelete, so a pod held by a preDelete
    /// hook is replaced at once instead of after it is gone. OpenKruise's v1beta1 field;
    /// under v1alpha1 OpenKruise reads the CloneSet label
    /// `apps.kruise.io/cloneset-scaling-exclude-preparing-delete: "true"`, which Stevedore
    /// honours too. Defaults to false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclude_preparing_delete: bool,
}

/// How pods are updated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(workload_rules::SURGE_OR_UNAVAILABLE).message(workload_rules::SURGE_OR_UNAVAILABLE_MESSAGE))]
pub struct CloneSetUpdateStrategy {
    /// ReCreate (default), InPlaceIfPossible, InPlaceOnly or OnDelete; the schema shows
    /// the description of [`CloneSetUpdateStrategyType`].
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "ReCreate"))]
    pub type_: Option<CloneSetUpdateStrategyType>,

    /// Partition is the desired number of pods in old revisions: an absolute number (5) or
    /// a percentage of replicas, which may have a fraction (10%, 12.5%). A percentage is
    /// rounded up, but one below 100% still updates at least one pod when replicas > 1.
    /// Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    #[x_kube(validation = Rule::new(FRACTIONAL_PERCENT_RULE).message("spec.updateStrategy.partition must be an integer from 0 to 2147483647 or a percentage from 0% to 100%, such as 10% or 12.5%"))]
    pub partition: Option<IntOrString>,

    /// The maximum number or percentage of unavailable pods during an update. Defaults to 20%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_MAX_UNAVAILABLE))]
    #[x_kube(validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.updateStrategy.maxUnavailable must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"))]
    pub max_unavailable: Option<IntOrString>,

    /// The maximum number or percentage of pods above replicas during an update. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    #[x_kube(validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.updateStrategy.maxSurge must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"))]
    pub max_surge: Option<IntOrString>,

    /// Paused stops updates; replicas are still managed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,

    /// Priority rules for the order in which pods are updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,

    /// Label key/values whose pods are spread out over the update batches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scatter_strategy: Vec<UpdateScatterTerm>,

    /// Strategies of in-place update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_strategy: Option<InPlaceUpdateStrategy>,
}

/// Type is how pods move to a new template revision: ReCreate (default), InPlaceIfPossible
/// or InPlaceOnly; or OnDelete, where the controller changes no live pod and a template
/// change reaches only the pods deleted from outside, whose replacements are created at the
/// update revision (partition, maxSurge, paused, priorityStrategy, scatterStrategy and
/// inPlaceUpdateStrategy are then ignored).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum CloneSetUpdateStrategyType {
    /// Delete the old pod (and its PVCs) and create a new one from the new revision.
    #[default]
    ReCreate,
    /// Update container images in place when only in-place-able fields changed,
    /// recreate otherwise.
    InPlaceIfPossible,
    /// Only in-place updates; template changes that cannot be done in place are refused.
    InPlaceOnly,
    /// Only pods deleted from outside move: their replacements are created at the update
    /// revision (OpenKruise 1.9, kruise #2224).
    OnDelete,
}

impl From<PodUpdatePolicy> for CloneSetUpdateStrategyType {
    fn from(policy: PodUpdatePolicy) -> Self {
        match policy {
            PodUpdatePolicy::ReCreate => Self::ReCreate,
            PodUpdatePolicy::InPlaceIfPossible => Self::InPlaceIfPossible,
            PodUpdatePolicy::InPlaceOnly => Self::InPlaceOnly,
        }
    }
}

/// The observed state of a CloneSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetStatus {
    /// The most recent generation observed by the controller.
    #[serde(default)]
    pub observed_generation: i64,
    /// The number of pods of the CloneSet.
    #[serde(default)]
    pub replicas: i32,
    /// The number of pods with a Ready condition.
    #[serde(default)]
    pub ready_replicas: i32,
    /// The number of pods ready for at least minReadySeconds.
    #[serde(default)]
    pub available_replicas: i32,
    /// The number of pods of the update revision.
    #[serde(default)]
    pub updated_replicas: i32,
    /// The number of pods of the update revision that are ready.
    #[serde(default)]
    pub updated_ready_replicas: i32,
    /// The number of pods of the update revision that are available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_available_replicas: Option<i32>,
    /// The number of pods that should be updated: replicas - partition.
    #[serde(default)]
    pub expected_updated_replicas: i32,
    /// The latest revision of the template (a ControllerRevision name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub update_revision: String,
    /// The revision all pods ran before the current update.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_revision: String,
    /// Count of hash collisions, used to name the newest ControllerRevision uniquely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// The latest observations of the CloneSet's state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<CloneSetCondition>,
    /// The pod label selector in string form, for the scale subresource and HPAs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
}

/// One observation of a CloneSet's state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetCondition {
    /// Type of the condition: FailedScale, FailedUpdate or Progressing.
    #[serde(rename = "type")]
    pub type_: String,
    /// Status of the condition: True, False or Unknown.
    pub status: String,
    /// Last time the condition changed status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Last time the condition changed reason (Progressing: when the rollout's current
    /// stage began; the progress deadline counts from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Machine-readable reason of the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable details of the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl CloneSet {
    /// Scale counts leave out pods in PreparingDelete: `scaleStrategy.excludePreparingDelete`
    /// or the CloneSet's label saying `"true"`.
    pub fn excludes_preparing_delete(&self) -> bool {
        self.spec.scale_strategy.exclude_preparing_delete
            || self
                .metadata
                .labels
                .as_ref()
                .and_then(|labels| labels.get(SCALING_EXCLUDE_PREPARING_DELETE_LABEL))
                .is_some_and(|value| value == "true")
    }
}

impl CloneSetSpec {
    /// The desired number of pods (default 1).
    pub fn desired_replicas(&self) -> i32 {
        self.replicas.unwrap_or(1)
    }

    /// The number of old ControllerRevisions to keep (default 10).
    pub fn history_limit(&self) -> i32 {
        self.revision_history_limit
            .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT)
    }
}

impl CloneSetUpdateStrategy {
    /// `type` with its default of ReCreate.
    pub fn strategy_type(&self) -> CloneSetUpdateStrategyType {
        self.type_.unwrap_or_default()
    }

    /// How a pod moves to a new revision (default ReCreate). Under OnDelete the pods a
    /// person deletes are recreated, so it is ReCreate too: no in-place readiness gate,
    /// no in-place image pre-download.
    pub fn policy(&self) -> PodUpdatePolicy {
        match self.strategy_type() {
            CloneSetUpdateStrategyType::ReCreate | CloneSetUpdateStrategyType::OnDelete => {
                PodUpdatePolicy::ReCreate
            }
            CloneSetUpdateStrategyType::InPlaceIfPossible => PodUpdatePolicy::InPlaceIfPossible,
            CloneSetUpdateStrategyType::InPlaceOnly => PodUpdatePolicy::InPlaceOnly,
        }
    }

    /// `type: OnDelete`: the controller moves no live pod to the update revision.
    pub fn on_delete(&self) -> bool {
        self.strategy_type() == CloneSetUpdateStrategyType::OnDelete
    }

    /// maxUnavailable with its default of 20%.
    pub fn max_unavailable_or_default(&self) -> IntOrString {
        self.max_unavailable
            .clone()
            .unwrap_or_else(|| IntOrString::String(DEFAULT_MAX_UNAVAILABLE.to_owned()))
    }

    /// maxSurge with its default of 0.
    pub fn max_surge_or_default(&self) -> IntOrString {
        self.max_surge.clone().unwrap_or(IntOrString::Int(0))
    }

    /// The partition that shapes the rollout: none under OnDelete, where a replacement
    /// always gets the update revision (so `expectedUpdatedReplicas` is `replicas`).
    pub fn partition_in_effect(&self) -> Option<&IntOrString> {
        if self.on_delete() {
            None
        } else {
            self.partition.as_ref()
        }
    }

    /// partition with its default of 0.
    pub fn partition_or_default(&self) -> IntOrString {
        self.partition.clone().unwrap_or(IntOrString::Int(0))
    }
}

//! Advanced DaemonSet (`apps.kruise.io/v1alpha1`, also served as `v1beta1`): one pod on
//! every node that fits its template, with the native `apps/v1` DaemonSet's fields plus
//! OpenKruise's (rolling update types, node selector canary, partition, pause, burst
//! replicas, lifecycle hooks). The defaults of OpenKruise's `SetDefaultsDaemonSet` are
//! schema defaults; a native manifest with only its `apiVersion` changed reads into this
//! type unchanged.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{INT_OR_PERCENT_RULE, Lifecycle, is_zero};
use super::{schema, workload_rules};

/// The default of `updateStrategy.rollingUpdate.maxUnavailable`.
pub const DEFAULT_MAX_UNAVAILABLE: i32 = 1;
/// The default of `revisionHistoryLimit`.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;
/// The default of `burstReplicas`: the most pods created in one sync.
pub const DEFAULT_BURST_REPLICAS: i32 = 250;

/// CEL on the rolling update: maxSurge cannot be combined with an in-place update (a pod
/// updated in place has no second pod beside it).
const NO_SURGE_IN_PLACE: &str = "!has(self.rollingUpdateType) || self.rollingUpdateType != 'InPlaceIfPossible' \
    || !has(self.maxSurge) || (type(self.maxSurge) == int ? int(self.maxSurge) == 0 : string(self.maxSurge) == '0%')";
/// CEL on the update strategy: `rollingUpdate` only with type RollingUpdate.
///
/// `rollingUpdate` defaults to `{}` so `{type: RollingUpdate}` reads back with its defaults
/// filled, as OpenKruise's `SetDefaultsDaemonSet` fills them; a structural default cannot
/// depend on `type`, so under OnDelete a `rollingUpdate` holding only those defaults is
/// admitted and anything else is refused.
const ROLLING_ONLY_WITH_ROLLING: &str = "!has(self.rollingUpdate) || !has(self.type) || self.type == 'RollingUpdate' || (\
     (!has(self.rollingUpdate.rollingUpdateType) || self.rollingUpdate.rollingUpdateType == 'Standard') \
     && (!has(self.rollingUpdate.maxUnavailable) || (type(self.rollingUpdate.maxUnavailable) == int && int(self.rollingUpdate.maxUnavailable) == 1)) \
     && (!has(self.rollingUpdate.maxSurge) || (type(self.rollingUpdate.maxSurge) == int && int(self.rollingUpdate.maxSurge) == 0)) \
     && (!has(self.rollingUpdate.partition) || self.rollingUpdate.partition == 0) \
     && (!has(self.rollingUpdate.paused) || !self.rollingUpdate.paused) \
     && !has(self.rollingUpdate.selector))";

/// The desired state of an Advanced DaemonSet.
// clippy reads the repeated keys of separate `printcolumn(...)` entries as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "DaemonSet",
    namespaced,
    status = "DaemonSetStatus",
    shortname = "daemon",
    shortname = "ads",
    doc = "DaemonSet (Advanced DaemonSet) runs one pod on every node that fits its template, with the native DaemonSet's semantics plus surging, in-place, canary and partitioned updates (OpenKruise compatible).",
    printcolumn(
        name = "DESIRED",
        type_ = "integer",
        json_path = ".status.desiredNumberScheduled",
        description = "The number of nodes that should run the daemon pod."
    ),
    printcolumn(
        name = "CURRENT",
        type_ = "integer",
        json_path = ".status.currentNumberScheduled",
        description = "The number of nodes that should run the daemon pod and run at least one."
    ),
    printcolumn(
        name = "READY",
        type_ = "integer",
        json_path = ".status.numberReady",
        description = "The number of nodes whose daemon pod is ready."
    ),
    printcolumn(
        name = "UP-TO-DATE",
        type_ = "integer",
        json_path = ".status.updatedNumberScheduled",
        description = "The number of nodes running the updated daemon pod."
    ),
    printcolumn(
        name = "AVAILABLE",
        type_ = "integer",
        json_path = ".status.numberAvailable",
        description = "The number of nodes whose daemon pod is available (ready for minReadySeconds)."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the DaemonSet was created."
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
    validation = workload_rules::selector_expressions_not_controller_owned()
)]
pub struct DaemonSetSpec {
    /// Selector is a label query over pods that are managed by the DaemonSet. It must
    /// match the pod template's labels.
    #[schemars(schema_with = "schema::label_selector")]
    pub selector: LabelSelector,

    /// Template describes the pod run on every node that fits it.
    #[schemars(schema_with = "schema::pod_template")]
    pub template: PodTemplateSpec,

    /// How pods move to a new revision of the template. Defaults to type RollingUpdate,
    /// rollingUpdateType Standard, maxUnavailable 1, maxSurge 0, partition 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"type": "RollingUpdate", "rollingUpdate": {}}))]
    pub update_strategy: Option<DaemonSetUpdateStrategy>,

    /// Minimum number of seconds a new pod must be ready, without any container crashing,
    /// to count as available. Defaults to 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0))]
    pub min_ready_seconds: i32,

    /// The most pods created in one sync (a rate limit when many nodes need one), an
    /// integer or a percentage of the nodes that should run the pod. Defaults to 250.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_BURST_REPLICAS))]
    #[x_kube(validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.burstReplicas must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"))]
    pub burst_replicas: Option<IntOrString>,

    /// The number of old ControllerRevisions kept for rollback. Defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = DEFAULT_REVISION_HISTORY_LIMIT))]
    pub revision_history_limit: Option<i32>,

    /// Lifecycle hooks for pods before they become Normal, before deletion, and around
    /// in-place updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
}

/// RollingUpdate or OnDelete.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DaemonSetUpdateStrategyType {
    /// The controller replaces old pods node by node.
    #[default]
    RollingUpdate,
    /// Pods are replaced only when they are deleted.
    OnDelete,
}

/// How a rolling update replaces a node's pod.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RollingUpdateType {
    /// Delete the old pod within maxUnavailable, then create the new one; with maxSurge,
    /// create the new one beside the old first.
    #[default]
    Standard,
    /// Create the new pod beside the old one and delete the old once the new is
    /// available (maxSurge, default 1 here).
    Surging,
    /// Update container images in place when only images changed; recreate otherwise.
    InPlaceIfPossible,
}

/// How pods are updated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(ROLLING_ONLY_WITH_ROLLING).message("spec.updateStrategy.rollingUpdate is allowed only with type RollingUpdate (with OnDelete it may hold only its defaults)"))]
pub struct DaemonSetUpdateStrategy {
    /// Type is RollingUpdate (default) or OnDelete.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "RollingUpdate"))]
    pub type_: Option<DaemonSetUpdateStrategyType>,

    /// Parameters of a rolling update (with type OnDelete, only their defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub rolling_update: Option<RollingUpdateDaemonSet>,
}

/// Parameters of a rolling update.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new(workload_rules::SURGE_OR_UNAVAILABLE).message(workload_rules::SURGE_OR_UNAVAILABLE_MESSAGE),
    validation = Rule::new(NO_SURGE_IN_PLACE)
        .message("spec.updateStrategy.rollingUpdate.maxSurge must be 0 with rollingUpdateType InPlaceIfPossible: an in-place update keeps one pod per node")
        .field_path(".maxSurge")
)]
pub struct RollingUpdateDaemonSet {
    /// Standard (default), Surging or InPlaceIfPossible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Standard"))]
    pub rolling_update_type: Option<RollingUpdateType>,

    /// The most nodes whose pod may be unavailable during the update, an integer or a
    /// percentage of desiredNumberScheduled (rounded up). Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_MAX_UNAVAILABLE))]
    #[x_kube(validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.updateStrategy.rollingUpdate.maxUnavailable must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"))]
    pub max_unavailable: Option<IntOrString>,

    /// The most nodes that may run a new pod beside the old one during the update, an
    /// integer or a percentage of desiredNumberScheduled (rounded up). Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    #[x_kube(validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.updateStrategy.rollingUpdate.maxSurge must be an integer from 0 to 2147483647 or a percentage from 0% to 100%"))]
    pub max_surge: Option<IntOrString>,

    /// Only nodes matching this selector are updated (a canary); the others keep their
    /// pods' revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_node_selector")]
    pub selector: Option<LabelSelector>,

    /// The number of pods that stay on the old revision. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 0))]
    pub partition: Option<i32>,

    /// Paused stops the update; pods are still created and deleted on nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub paused: Option<bool>,
}

/// `rollingUpdate.selector`: a label selector over nodes.
fn optional_node_selector(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = schema::label_selector(generator);
    schema.insert(
        "description".to_owned(),
        "Only nodes matching this selector are updated; the others keep their pods' revision."
            .into(),
    );
    schema
}

/// The observed state of an Advanced DaemonSet, counted per node as the native
/// controller counts it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetStatus {
    /// Nodes that should run the pod and run at least one.
    #[serde(default)]
    pub current_number_scheduled: i32,
    /// Nodes that run the pod but should not.
    #[serde(default)]
    pub number_misscheduled: i32,
    /// Nodes that should run the pod.
    #[serde(default)]
    pub desired_number_scheduled: i32,
    /// Nodes that should run the pod and whose pod is ready.
    #[serde(default)]
    pub number_ready: i32,
    /// The most recent generation observed by the controller.
    #[serde(default)]
    pub observed_generation: i64,
    /// Nodes running the pod of the update revision.
    #[serde(default)]
    pub updated_number_scheduled: i32,
    /// Nodes that should run the pod and whose pod is available.
    #[serde(default)]
    pub number_available: i32,
    /// Nodes that should run the pod and have no available one.
    #[serde(default)]
    pub number_unavailable: i32,
    /// Count of hash collisions, used to name the newest ControllerRevision uniquely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// The latest observations of the DaemonSet's state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<DaemonSetCondition>,
    /// The hash of the update revision (its `controller-revision-hash`).
    #[serde(default)]
    pub daemon_set_hash: String,
}

/// One observation of a DaemonSet's state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetCondition {
    /// Type of the condition.
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

impl DaemonSetSpec {
    /// The number of old ControllerRevisions to keep (default 10).
    pub fn history_limit(&self) -> i32 {
        self.revision_history_limit
            .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT)
    }

    /// The update strategy type (default RollingUpdate).
    pub fn update_type(&self) -> DaemonSetUpdateStrategyType {
        self.update_strategy
            .as_ref()
            .and_then(|u| u.type_)
            .unwrap_or_default()
    }

    /// The rolling-update parameters, all defaults when unset.
    pub fn rolling_update(&self) -> RollingUpdateDaemonSet {
        self.update_strategy
            .as_ref()
            .and_then(|u| u.rolling_update.clone())
            .unwrap_or_default()
    }

    /// burstReplicas with its default of 250.
    pub fn burst_replicas_or_default(&self) -> IntOrString {
        self.burst_replicas
            .clone()
            .unwrap_or(IntOrString::Int(DEFAULT_BURST_REPLICAS))
    }
}

impl RollingUpdateDaemonSet {
    /// The rolling update type (default Standard).
    pub fn update_type(&self) -> RollingUpdateType {
        self.rolling_update_type.unwrap_or_default()
    }

    /// maxUnavailable with its default of 1.
    pub fn max_unavailable_or_default(&self) -> IntOrString {
        self.max_unavailable
            .clone()
            .unwrap_or(IntOrString::Int(DEFAULT_MAX_UNAVAILABLE))
    }

    /// maxSurge as the update uses it: the field, or 1 under the Surging type when it is
    /// unset or 0 (OpenKruise's Surging always surges).
    pub fn effective_max_surge(&self) -> IntOrString {
        let surge = self.max_surge.clone().unwrap_or(IntOrString::Int(0));
        let zero = matches!(&surge, IntOrString::Int(0))
            || matches!(&surge, IntOrString::String(s) if s == "0%");
        if zero && self.update_type() == RollingUpdateType::Surging {
            IntOrString::Int(1)
        } else {
            surge
        }
    }

    /// partition with its default of 0.
    pub fn partition_or_default(&self) -> i32 {
        self.partition.unwrap_or(0)
    }

    /// paused with its default of false.
    pub fn is_paused(&self) -> bool {
        self.paused.unwrap_or(false)
    }
}

//! SidecarSet (`apps.kruise.io/v1alpha1`, cluster-scoped): sidecar containers injected into
//! every matching pod at creation and upgraded in place afterwards, without touching the
//! pods' own containers. OpenKruise's field names, defaults and printer columns; its
//! validating webhook's checks that need no other object as CEL.
//!
//! One rule is Stevedore's own: an empty selector selects every pod (Kubernetes' reading of
//! an empty selector), so a SidecarSet with one must name its namespaces
//! (`namespace` or a non-empty `namespaceSelector`); without them it would inject into
//! every pod of the cluster, kube-system's too.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, LocalObjectReference, ObjectFieldSelector, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::common::{
    FRACTIONAL_PERCENT_RULE, INT_OR_PERCENT_RULE, UpdatePriorityStrategy, UpdateScatterTerm,
    is_default,
};
use super::{pod_schema, schema};

/// Label of a SidecarSet (copied to its ControllerRevisions) that
/// `injectionStrategy.revision.customVersion` selects a revision by.
pub const CUSTOM_VERSION_LABEL: &str = "apps.kruise.io/sidecarset-custom-version";

/// CEL over the spec: the selector selects some pods only, or the SidecarSet names its
/// namespaces.
pub const SELECTS_SOME_PODS_RULE: &str = "(has(self.selector) && ((has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) \
    || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0))) \
    || (has(self.namespace) && self.namespace != '') \
    || (has(self.namespaceSelector) && ((has(self.namespaceSelector.matchLabels) && size(self.namespaceSelector.matchLabels) > 0) \
    || (has(self.namespaceSelector.matchExpressions) && size(self.namespaceSelector.matchExpressions) > 0)))";
/// The message of [`SELECTS_SOME_PODS_RULE`].
pub const SELECTS_SOME_PODS_MESSAGE: &str = "spec.selector: an empty selector selects every pod in the cluster; \
    set matchLabels or matchExpressions, or limit the SidecarSet to namespaces with spec.namespace or spec.namespaceSelector";

/// CEL over the spec: at most one of namespace and namespaceSelector (OpenKruise's webhook).
const ONE_NAMESPACE_FILTER_RULE: &str =
    "!(has(self.namespace) && self.namespace != '' && has(self.namespaceSelector))";

/// The most sidecar containers (or init containers) one SidecarSet injects, far above
/// real use, for the CEL cost estimate of the name rules.
pub const MAX_SIDECARS: u32 = 32;

/// The desired state of a SidecarSet.
// clippy reads the repeated keys of separate `printcolumn(...)` entries as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "SidecarSet",
    status = "SidecarSetStatus",
    doc = "SidecarSet injects sidecar containers into every matching pod when it is created and upgrades them in place afterwards (OpenKruise compatible).",
    printcolumn(
        name = "MATCHED",
        type_ = "integer",
        json_path = ".status.matchedPods",
        description = "The number of pods matched."
    ),
    printcolumn(
        name = "UPDATED",
        type_ = "integer",
        json_path = ".status.updatedPods",
        description = "The number of pods matched and updated."
    ),
    printcolumn(
        name = "READY",
        type_ = "integer",
        json_path = ".status.readyPods",
        description = "The number of pods matched and ready."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since the SidecarSet was created."
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new(SELECTS_SOME_PODS_RULE).message(SELECTS_SOME_PODS_MESSAGE).field_path(".selector"),
    validation = Rule::new(ONE_NAMESPACE_FILTER_RULE).message("spec.namespaceSelector: set either spec.namespace or spec.namespaceSelector, not both").field_path(".namespaceSelector"),
    validation = Rule::new("!has(self.containers) || !has(self.initContainers) || self.containers.all(c, !self.initContainers.exists(i, i.name == c.name))")
        .message("spec.initContainers: a name is used by both a container and an init container")
        .field_path(".initContainers")
)]
pub struct SidecarSetSpec {
    /// A label query over the pods the sidecars are injected into. Empty, it selects
    /// every pod of the namespaces named by namespace or namespaceSelector (one of which
    /// is then required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "pod_selector")]
    pub selector: Option<LabelSelector>,

    /// Only pods in this namespace are matched; unset, pods of every namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 63))]
    pub namespace: String,

    /// Only pods in the namespaces whose labels this selects are matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "namespace_selector")]
    pub namespace_selector: Option<LabelSelector>,

    /// Init containers injected (by name, ascending, after the pod's own) into new pods
    /// only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "init_containers")]
    pub init_containers: Vec<SidecarContainer>,

    /// The sidecar containers injected into the selected pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "containers")]
    pub containers: Vec<SidecarContainer>,

    /// Volumes the sidecar containers mount; each one a sidecar mounts is added to the
    /// pod unless the pod has a volume of that name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "volumes")]
    pub volumes: Vec<Volume>,

    /// How pods already injected are upgraded to a new version of the sidecars.
    /// Defaults to type RollingUpdate, maxUnavailable 1, partition 0.
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(extend("default" = {}))]
    pub update_strategy: SidecarSetUpdateStrategy,

    /// How new pods are injected.
    #[serde(default, skip_serializing_if = "is_default")]
    pub injection_strategy: SidecarSetInjectionStrategy,

    /// Secrets to pull the sidecar images with, added to a new pod's imagePullSecrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "pull_secrets")]
    pub image_pull_secrets: Vec<LocalObjectReference>,

    /// The number of old ControllerRevisions kept. Defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 10))]
    pub revision_history_limit: Option<i32>,

    /// Annotations set on the pods the sidecars are injected into.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patch_pod_metadata: Vec<SidecarSetPatchPodMetadata>,
}

/// A sidecar container: a core/v1 Container and how it is injected and upgraded.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SidecarContainer {
    #[serde(flatten)]
    pub container: Container,
    /// BeforeAppContainer (default) or AfterAppContainer: where in spec.containers the
    /// sidecar goes. Not read for init containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_inject_policy: Option<PodInjectPolicy>,
    /// How the sidecar is upgraded (ColdUpgrade or HotUpgrade).
    #[serde(default, skip_serializing_if = "is_default")]
    pub upgrade_strategy: SidecarContainerUpgradeStrategy,
    /// enabled: the sidecar also mounts every volume mount of the pod's own containers.
    #[serde(default, skip_serializing_if = "is_default")]
    pub share_volume_policy: ShareVolumePolicy,
    /// Environment variables copied from the pod's own containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transfer_env: Vec<TransferEnvVar>,
}

/// Where a sidecar goes among the pod's containers.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PodInjectPolicy {
    /// Before the pod's own containers (OpenKruise's default).
    #[default]
    BeforeAppContainer,
    /// After the pod's own containers.
    AfterAppContainer,
}

/// How a sidecar is upgraded.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SidecarContainerUpgradeStrategy {
    /// ColdUpgrade (default): the container is restarted with its new image. HotUpgrade:
    /// the sidecar runs as two containers `<name>-1` and `<name>-2`; the new image starts
    /// in the idle one before the working one is set to the empty image.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub upgrade_type: String,
    /// HotUpgrade: the image of the idle one of the sidecar's two containers (required
    /// with HotUpgrade).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hot_upgrade_empty_image: String,
}

impl SidecarContainerUpgradeStrategy {
    /// Whether the sidecar is upgraded hot (two containers, one working at a time).
    pub fn is_hot(&self) -> bool {
        self.upgrade_type == "HotUpgrade"
    }
}

/// Whether the sidecar shares the pod's own containers' volume mounts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ShareVolumePolicy {
    /// `enabled` or `disabled` (default).
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
}

impl ShareVolumePolicy {
    /// Whether the policy is `enabled`.
    pub fn enabled(&self) -> bool {
        self.type_ == "enabled"
    }
}

/// An environment variable copied from one of the pod's own containers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TransferEnvVar {
    /// The container the variable is read from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_container_name: String,
    /// The container's name read from a field of the pod (a label or annotation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_container_name_from: Option<SourceContainerNameSource>,
    /// The variable copied.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub env_name: String,
    /// More variables copied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_names: Vec<String>,
}

/// Where the source container's name is read from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SourceContainerNameSource {
    /// `metadata.name`, `metadata.labels['<key>']` or `metadata.annotations['<key>']`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<ObjectFieldSelector>,
}

/// Annotations a SidecarSet sets on the pods it injects into.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetPatchPodMetadata {
    /// The annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Retain (default): a pod's own value is kept; Overwrite: the SidecarSet's wins;
    /// MergePatchJson: the value is a JSON object merged into the pod's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Retain"))]
    pub patch_policy: Option<PatchPolicy>,
}

/// How a SidecarSet's annotation meets a pod's own.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PatchPolicy {
    /// The pod's own value is kept.
    #[default]
    Retain,
    /// The SidecarSet's value replaces the pod's.
    Overwrite,
    /// Both values are JSON objects, merged (the SidecarSet's keys win).
    MergePatchJson,
}

/// How new pods are injected.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetInjectionStrategy {
    /// New pods are not injected while paused; injected sidecars are still upgraded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Inject a recorded revision rather than the current spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<SidecarSetInjectRevision>,
}

/// The revision new pods are injected with.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.revisionName) || has(self.customVersion)").message("spec.injectionStrategy.revision: set revisionName or customVersion"))]
pub struct SidecarSetInjectRevision {
    /// The revision whose `apps.kruise.io/sidecarset-custom-version` label has this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_version: Option<String>,
    /// The name of the ControllerRevision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_name: Option<String>,
    /// Always (unset): every new pod gets that revision. Partial: pods the update
    /// selector selects get the latest with the probability 1 - partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<InjectRevisionPolicy>,
}

/// How the injected revision is chosen.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum InjectRevisionPolicy {
    /// Always the named revision.
    #[default]
    Always,
    /// The named revision or the latest, by the update strategy.
    Partial,
}

/// How injected pods are upgraded.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetUpdateStrategy {
    /// RollingUpdate (default) or NotUpdate (only new pods get a new version).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "RollingUpdate"))]
    pub type_: Option<SidecarSetUpdateStrategyType>,
    /// Upgrades of injected pods stop; injection goes on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Only the pods this selects are upgraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "pod_selector")]
    pub selector: Option<LabelSelector>,
    /// The number (or percentage of matched pods) kept on older versions. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(FRACTIONAL_PERCENT_RULE).message("spec.updateStrategy.partition must be an integer from 0 to 2147483647 or a percentage from 0% to 100%, such as 10% or 12.5%"))]
    pub partition: Option<IntOrString>,
    /// The most matched pods upgrading or unavailable at once, a number or a percentage
    /// (rounded up); not 0. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1))]
    #[x_kube(
        validation = Rule::new(INT_OR_PERCENT_RULE).message("spec.updateStrategy.maxUnavailable must be an integer from 1 to 2147483647 or a percentage from 1% to 100%"),
        validation = Rule::new("type(self) == int ? int(self) != 0 : string(self) != '0%'").message("spec.updateStrategy.maxUnavailable must not be 0: no pod could be upgraded")
    )]
    pub max_unavailable: Option<IntOrString>,
    /// Priority rules for the order in which pods are upgraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,
    /// Label key/values whose pods are spread out over the upgrade batches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scatter_strategy: Vec<UpdateScatterTerm>,
}

impl SidecarSetUpdateStrategy {
    /// The strategy type (default RollingUpdate).
    pub fn strategy_type(&self) -> SidecarSetUpdateStrategyType {
        self.type_.unwrap_or_default()
    }
}

/// Whether injected pods are upgraded.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SidecarSetUpdateStrategyType {
    /// Injected pods are upgraded to the latest version, in batches.
    #[default]
    RollingUpdate,
    /// Only new pods get the latest version.
    NotUpdate,
}

/// The observed state of a SidecarSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetStatus {
    /// The generation of the spec this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pods the SidecarSet matches.
    #[serde(default)]
    pub matched_pods: i32,
    /// Matched pods whose sidecars are the latest version.
    #[serde(default)]
    pub updated_pods: i32,
    /// Matched pods that are ready.
    #[serde(default)]
    pub ready_pods: i32,
    /// Matched pods that are updated and ready.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_ready_pods: i32,
    /// The name of the latest ControllerRevision.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub latest_revision: String,
    /// Hash collisions met naming the latest ControllerRevision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
}

fn is_zero_i32(value: &i32) -> bool {
    *value == 0
}

fn pod_selector(generator: &mut SchemaGenerator) -> Schema {
    let mut selector = schema::label_selector(generator);
    selector.insert(
        "description".into(),
        "A label query over pods; empty, every pod.".into(),
    );
    selector
}

fn namespace_selector(generator: &mut SchemaGenerator) -> Schema {
    let mut selector = schema::label_selector(generator);
    selector.insert(
        "description".into(),
        "A label query over the namespaces whose pods are matched.".into(),
    );
    selector
}

/// The sidecar fields beside a container's own.
fn sidecar_properties(init: bool) -> serde_json::Value {
    // A sidecar is a container of pods not yet written: the Pod's own defaulting and
    // validation apply when the pod is created; declared here is what Stevedore reads.
    let mut properties = json!({
        "name": { "type": "string", "minLength": 1, "maxLength": 63, "description": "Name of the container, unique in the pod." },
        "image": pod_schema::image()
    });
    let extra = json!({
        "podInjectPolicy": { "type": "string", "enum": ["BeforeAppContainer", "AfterAppContainer"], "description": "BeforeAppContainer (default) or AfterAppContainer: where the sidecar goes among the pod's containers." },
        "upgradeStrategy": upgrade_strategy_schema(init),
        "shareVolumePolicy": {
            "type": "object",
            "description": "type enabled: the sidecar also mounts every volume mount of the pod's own containers.",
            "properties": { "type": { "type": "string", "enum": ["enabled", "disabled"], "description": "enabled or disabled (default)." } }
        },
        "transferEnv": {
            "type": "array",
            "description": "Environment variables copied from the pod's own containers.",
            "items": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {
                    "sourceContainerName": { "type": "string", "description": "The container the variable is read from." },
                    "envName": { "type": "string", "description": "The variable copied." },
                    "envNames": { "type": "array", "items": { "type": "string" }, "description": "More variables copied." }
                }
            }
        }
    });
    if let (Some(properties), Some(extra)) = (properties.as_object_mut(), extra.as_object()) {
        for (name, schema) in extra {
            if init && name == "podInjectPolicy" {
                continue;
            }
            properties.insert(name.clone(), schema.clone());
        }
    }
    properties
}

/// CEL over `upgradeStrategy`: HotUpgrade names the image of its idle container.
pub const HOT_UPGRADE_EMPTY_IMAGE_RULE: &str = "!has(self.upgradeType) || self.upgradeType != 'HotUpgrade' \
    || (has(self.hotUpgradeEmptyImage) && self.hotUpgradeEmptyImage != '')";

/// The schema of a sidecar's `upgradeStrategy`: ColdUpgrade or HotUpgrade (with its
/// empty image) for containers; init containers are never upgraded, so not HotUpgrade.
fn upgrade_strategy_schema(init: bool) -> serde_json::Value {
    let rule = if init {
        json!({ "rule": "!has(self.upgradeType) || self.upgradeType != 'HotUpgrade'", "message": "upgradeType: HotUpgrade is for containers only: an init container is never upgraded", "fieldPath": ".upgradeType" })
    } else {
        json!({ "rule": HOT_UPGRADE_EMPTY_IMAGE_RULE, "message": "hotUpgradeEmptyImage: upgradeType HotUpgrade needs hotUpgradeEmptyImage, the image the idle one of the sidecar's two containers runs", "fieldPath": ".hotUpgradeEmptyImage" })
    };
    json!({
        "type": "object",
        "description": "How the sidecar is upgraded: ColdUpgrade (default), the container restarted in place with its new image; HotUpgrade, two containers <name>-1 and <name>-2, the new image started in the idle one before the working one is set to hotUpgradeEmptyImage.",
        "properties": {
            "upgradeType": { "type": "string", "enum": ["ColdUpgrade", "HotUpgrade"], "description": "ColdUpgrade (default) or HotUpgrade." },
            "hotUpgradeEmptyImage": { "type": "string", "description": "HotUpgrade: the image of the idle container, which must do nothing (required with HotUpgrade, not the sidecar's image)." }
        },
        "x-kubernetes-validations": [rule]
    })
}

/// CEL over a sidecar container: a HotUpgrade sidecar's name leaves room for the `-1`/`-2`
/// of its two containers, and its empty image is not its image (the idle container is
/// found by its empty image).
const HOT_UPGRADE_ITEM_RULES: [(&str, &str, &str); 2] = [
    (
        "!has(self.upgradeStrategy) || !has(self.upgradeStrategy.upgradeType) || self.upgradeStrategy.upgradeType != 'HotUpgrade' || size(self.name) <= 61",
        "name: a HotUpgrade sidecar's name is at most 61 characters: its containers are named <name>-1 and <name>-2",
        ".name",
    ),
    (
        "!has(self.upgradeStrategy) || !has(self.upgradeStrategy.hotUpgradeEmptyImage) || self.upgradeStrategy.hotUpgradeEmptyImage != self.image",
        "upgradeStrategy.hotUpgradeEmptyImage: the empty image must differ from the sidecar's image",
        ".upgradeStrategy.hotUpgradeEmptyImage",
    ),
];

fn sidecar_list(description: &str, init: bool) -> Schema {
    let mut item = json!({
        "type": "object",
        "description": "A sidecar container (a core/v1 Container and how it is injected and upgraded).",
        "x-kubernetes-preserve-unknown-fields": true,
        "required": ["name", "image"],
        "properties": sidecar_properties(init)
    });
    if !init {
        item["x-kubernetes-validations"] = (HOT_UPGRADE_ITEM_RULES.iter())
            .map(|(rule, message, field)| json!({ "rule": rule, "message": message, "fieldPath": field }))
            .collect();
    }
    json_schema!({
        "type": "array",
        "description": description,
        "maxItems": MAX_SIDECARS,
        "x-kubernetes-validations": [{ "rule": "self.all(c, self.filter(d, d.name == c.name).size() == 1)", "message": "each container may be named only once" }],
        "items": item
    })
}

fn containers(_: &mut SchemaGenerator) -> Schema {
    sidecar_list(
        "The sidecar containers injected into the selected pods.",
        false,
    )
}

fn init_containers(_: &mut SchemaGenerator) -> Schema {
    sidecar_list(
        "Init containers injected (by name, ascending, after the pod's own) into new pods only.",
        true,
    )
}

fn volumes(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "Volumes the sidecar containers mount (core/v1 Volume).",
        "items": {
            "type": "object",
            "description": "A volume (core/v1 Volume).",
            "x-kubernetes-preserve-unknown-fields": true,
            "required": ["name"],
            "properties": { "name": { "type": "string", "minLength": 1, "maxLength": 63, "description": "Name of the volume." } }
        }
    })
}

fn pull_secrets(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "Secrets to pull the sidecar images with.",
        "items": {
            "type": "object",
            "properties": { "name": { "type": "string", "description": "Name of the Secret." } }
        }
    })
}

#[cfg(test)]
#[path = "sidecarset_tests.rs"]
mod tests;

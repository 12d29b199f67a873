//! What an Advanced DaemonSet says about itself to the shared pod-set planning: a
//! revision is its pod template; a `Create`'s `instance_id` is the node the pod is pinned
//! to; pods carry the short revision hash (as the native DaemonSet's do) and the daemon
//! tolerations; the rolling update type chooses recreate or in place; pods on nodes
//! outside `rollingUpdate.selector` are held back (a canary), and `partition` pods stay
//! on the old revision.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Pod, PodReadinessGate, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt as _;

use crate::api::DaemonSet;
use crate::api::common::{Lifecycle, PodUpdatePolicy};
use crate::api::daemonset::{DaemonSetUpdateStrategyType, RollingUpdateType};
use crate::workload::actions::Create;
use crate::workload::adapter::{PodSetWorkload, UpdateStrategyType};
use crate::workload::lifecycle::{self, STATE_LABEL};
use crate::workload::node_eval::with_daemon_tolerations;
use crate::workload::node_pin::pin;
use crate::workload::pod_view::PodView;
use crate::workload::revision_adapter::RevisionAdapter;
use crate::workload::rollout::RolloutParams;

/// The API version its owner references name.
pub const API_VERSION: &str = "apps.kruise.io/v1alpha1";
/// The kind its owner references name.
pub const KIND: &str = "DaemonSet";

/// A DaemonSet in one sync: the object, how many nodes should run its pod, and the pods
/// its rolling update leaves alone (on nodes outside `rollingUpdate.selector`).
#[derive(Clone)]
pub struct DaemonSetWorkload<'a> {
    pub ds: &'a DaemonSet,
    /// `desiredNumberScheduled`: what maxUnavailable, maxSurge and partition scale against.
    pub desired: i32,
    /// Names of pods on nodes the rolling update's selector does not match.
    pub held_back: BTreeSet<String>,
}

impl DaemonSetWorkload<'_> {
    /// Whether pods move in place when only their images changed.
    fn in_place(&self) -> bool {
        self.ds.spec.rolling_update().update_type() == RollingUpdateType::InPlaceIfPossible
    }
}

impl PodSetWorkload for DaemonSetWorkload<'_> {
    type Revision = PodTemplateSpec;

    fn selector(&self) -> &LabelSelector {
        &self.ds.spec.selector
    }

    fn owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: API_VERSION.to_owned(),
            kind: KIND.to_owned(),
            name: self.ds.name_any(),
            uid: self.ds.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn update_policy(&self) -> PodUpdatePolicy {
        if self.in_place() {
            PodUpdatePolicy::InPlaceIfPossible
        } else {
            PodUpdatePolicy::ReCreate
        }
    }

    fn update_strategy_type(&self) -> UpdateStrategyType {
        match self.ds.spec.update_type() {
            DaemonSetUpdateStrategyType::RollingUpdate => UpdateStrategyType::RollingUpdate,
            DaemonSetUpdateStrategyType::OnDelete => UpdateStrategyType::OnDelete,
        }
    }

    fn lifecycle(&self) -> Option<&Lifecycle> {
        self.ds.spec.lifecycle.as_ref()
    }

    fn in_place_grace_seconds(&self) -> i32 {
        0
    }

    fn min_ready_seconds(&self) -> i32 {
        self.ds.spec.min_ready_seconds
    }

    fn revision_adapter(&self) -> RevisionAdapter {
        RevisionAdapter::ShortHash
    }

    /// The nodes that should run the pod are the replicas; surge is the DaemonSet's own
    /// per-node step (`surge`), never the shared one.
    fn rollout_params(&self, current_revision: &str, update_revision: &str) -> RolloutParams {
        let rolling = self.ds.spec.rolling_update();
        RolloutParams {
            replicas: self.desired,
            partition: Some(IntOrString::Int(rolling.partition_or_default())),
            partition_field: "spec.updateStrategy.rollingUpdate.partition",
            max_unavailable: Some(rolling.max_unavailable_or_default()),
            paused: rolling.is_paused(),
            revisions_consistent: current_revision == update_revision,
            ..RolloutParams::default()
        }
    }

    fn holds_back(&self, pod: &PodView<'_>) -> bool {
        self.held_back.contains(&pod.name)
    }

    fn template<'r>(&self, revision: &'r PodTemplateSpec) -> &'r PodTemplateSpec {
        revision
    }

    /// The pod for the node `create.instance_id`: the template with the revision hash,
    /// the daemon tolerations and the pin to the node; named by the apiserver
    /// (`generateName`) unless the caller names it.
    fn new_pod(&self, create: &Create, revision: &PodTemplateSpec) -> Pod {
        let template_meta = revision.metadata.clone().unwrap_or_default();
        let mut labels = template_meta.labels.unwrap_or_default();
        labels.extend(self.revision_adapter().pod_labels(&create.revision));
        labels.insert(
            STATE_LABEL.to_owned(),
            lifecycle::CREATED_STATE.as_str().to_owned(),
        );
        let mut spec = with_daemon_tolerations(&revision.spec.clone().unwrap_or_default());
        pin(&mut spec.affinity, &create.instance_id);
        let mut gates = spec.readiness_gates.take().unwrap_or_default();
        for gate in self.readiness_gates() {
            if !gates.iter().any(|g| g.condition_type == gate) {
                gates.push(PodReadinessGate {
                    condition_type: gate.to_owned(),
                });
            }
        }
        spec.readiness_gates = (!gates.is_empty()).then_some(gates);
        Pod {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}-", self.ds.name_any())),
                namespace: self.ds.namespace(),
                labels: Some(labels),
                annotations: template_meta.annotations,
                finalizers: template_meta.finalizers,
                owner_references: Some(vec![self.owner_reference()]),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
            status: None,
        }
    }
}

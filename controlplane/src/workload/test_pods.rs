//! Pods as tests of the pod-set planners need them: one a kubelet runs (bound to its node,
//! Running, Ready and every readiness gate True since `at(0)`, its first container running
//! its image), and a builder that changes one thing at a time.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStatus, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, Pod, PodCondition, PodReadinessGate,
    PodSpec, PodStatus, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::inplace::INPLACE_UPDATE_READY;
use super::lifecycle::{self, LifecycleState};

/// A claim (or claim template) `name` of storage class `class` asking for `request` of
/// storage, with `capacity` once bound; its resourceVersion is "7".
pub fn sized_claim(
    name: &str,
    class: Option<&str>,
    request: &str,
    capacity: Option<&str>,
) -> PersistentVolumeClaim {
    let storage = |q: &str| BTreeMap::from([("storage".to_owned(), Quantity(q.to_owned()))]);
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            resource_version: Some("7".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            storage_class_name: class.map(str::to_owned),
            resources: Some(VolumeResourceRequirements {
                requests: Some(storage(request)),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: capacity.map(|c| PersistentVolumeClaimStatus {
            capacity: Some(storage(c)),
            ..PersistentVolumeClaimStatus::default()
        }),
    }
}

/// `secs` after the tests' epoch, the time every planner test counts from.
pub fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).expect("a valid time")
}

/// The container `name`, reported running `image` (`image_id`) since `started`.
pub fn container_running(
    name: &str,
    image: &str,
    image_id: &str,
    started: Timestamp,
    ready: bool,
) -> ContainerStatus {
    ContainerStatus {
        name: name.to_owned(),
        image: image.to_owned(),
        image_id: image_id.to_owned(),
        ready,
        state: Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(started)),
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    }
}

/// The pod `name` in `default` (UID `uid-<name>`, resourceVersion 7, created at `at(0)`)
/// with `labels` and `spec`, not yet running.
pub fn new_pod(name: &str, labels: BTreeMap<String, String>, spec: Option<PodSpec>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("7".to_owned()),
            labels: Some(labels),
            creation_timestamp: Some(Time(at(0))),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    }
}

/// `pod` as the kubelet runs it on `node`: Running, Ready and each of its readiness gates
/// True since `at(0)`, its first container running `image` (image ID `sha-<image>`).
pub fn run_on(mut pod: Pod, node: &str) -> Pod {
    let spec = pod.spec.get_or_insert_default();
    spec.node_name = Some(node.to_owned());
    let gates = spec.readiness_gates.iter().flatten();
    let true_since_start = |type_: &str| PodCondition {
        type_: type_.to_owned(),
        status: "True".to_owned(),
        last_transition_time: Some(Time(at(0))),
        ..PodCondition::default()
    };
    let mut conditions = vec![true_since_start("Ready")];
    conditions.extend(gates.map(|g| true_since_start(&g.condition_type)));
    let container = spec.containers.first();
    let name = container.map(|c| c.name.as_str()).unwrap_or_default();
    let image = container
        .and_then(|c| c.image.as_deref())
        .unwrap_or_default();
    let running = container_running(name, image, &format!("sha-{image}"), at(0), true);
    pod.status = Some(PodStatus {
        phase: Some("Running".to_owned()),
        conditions: Some(conditions),
        container_statuses: Some(vec![running]),
        ..PodStatus::default()
    });
    pod
}

/// A pod under construction, one change at a time.
pub struct PodBuilder(pub Pod);

impl PodBuilder {
    pub fn build(self) -> Pod {
        self.0
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        let labels = self.0.metadata.labels.get_or_insert_default();
        labels.insert(key.to_owned(), value.to_owned());
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        let annotations = self.0.metadata.annotations.get_or_insert_default();
        annotations.insert(key.to_owned(), value.to_owned());
        self
    }

    pub fn state(self, state: LifecycleState) -> Self {
        self.label(lifecycle::STATE_LABEL, state.as_str())
    }

    /// The condition `type_` at `status`, True or False since `at(0)`.
    pub fn condition(mut self, type_: &str, status: &str) -> Self {
        let status_ = self.0.status.get_or_insert_default();
        let conditions = status_.conditions.get_or_insert_default();
        conditions.retain(|c| c.type_ != type_);
        conditions.push(PodCondition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            last_transition_time: Some(Time(at(0))),
            ..PodCondition::default()
        });
        self
    }

    /// The condition `type_` at `status` since `at(0)`, with `reason` and `message`.
    pub fn condition_because(self, type_: &str, status: &str, reason: &str, message: &str) -> Self {
        let mut built = self.condition(type_, status);
        let conditions =
            (built.0.status.iter_mut()).flat_map(|s| s.conditions.iter_mut().flatten());
        for c in conditions.filter(|c| c.type_ == type_) {
            c.reason = Some(reason.to_owned());
            c.message = Some(message.to_owned());
        }
        built
    }

    pub fn not_ready(self) -> Self {
        self.condition("Ready", "False")
    }

    pub fn ready_since(mut self, since: Timestamp) -> Self {
        let conditions = (self.0.status.iter_mut()).flat_map(|s| s.conditions.iter_mut().flatten());
        for c in conditions.filter(|c| c.type_ == "Ready") {
            c.last_transition_time = Some(Time(since));
        }
        self
    }

    pub fn unscheduled(mut self) -> Self {
        self.0.spec.get_or_insert_default().node_name = None;
        let status = self.0.status.get_or_insert_default();
        status.phase = Some("Pending".to_owned());
        status.container_statuses = None;
        self.not_ready()
    }

    pub fn terminating(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(at(900)));
        self
    }

    pub fn phase(mut self, phase: &str) -> Self {
        self.0.status.get_or_insert_default().phase = Some(phase.to_owned());
        self
    }

    /// The `InPlaceUpdateReady` gate with its condition True: an in-place pod at rest.
    pub fn in_place_ready(self) -> Self {
        self.gate(INPLACE_UPDATE_READY)
            .condition(INPLACE_UPDATE_READY, "True")
    }

    pub fn gate(mut self, gate: &str) -> Self {
        let spec = self.0.spec.get_or_insert_default();
        (spec.readiness_gates.get_or_insert_default()).push(PodReadinessGate {
            condition_type: gate.to_owned(),
        });
        self
    }

    /// The first container running `image` (`image_id`) since `started`.
    pub fn running(mut self, image: &str, image_id: &str, started: Timestamp, ready: bool) -> Self {
        let spec = self.0.spec.as_ref();
        let name = spec
            .and_then(|s| s.containers.first())
            .map(|c| c.name.clone());
        let status = container_running(&name.unwrap_or_default(), image, image_id, started, ready);
        self.0.status.get_or_insert_default().container_statuses = Some(vec![status]);
        self
    }

    pub fn spec_image(mut self, image: &str) -> Self {
        self.0.spec.get_or_insert_default().containers[0].image = Some(image.to_owned());
        self
    }
}

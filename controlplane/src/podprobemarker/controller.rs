//! The PodProbeMarker controller, keyed by node: writes the node's NodePodProbe spec
//! from the PodProbeMarkers and the pods bound there (`plan::node_spec`; created owned
//! by the Node, so it goes with it), and marks each of those pods as its probes' states
//! in the NodePodProbe status say (`marks::pod_marks`): the pod condition through
//! `pods/status`, labels and annotations through the pod, each patch carrying the pod's
//! UID so a pod recreated under its name is never marked by mistake.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use super::marks::{MarkedProbe, metadata_patch, pod_marks, status_patch};
use super::plan::{node_spec, selects};
use crate::api::nodepodprobe::{NodePodProbe, NodePodProbeSpec};
use crate::api::podprobemarker::PodProbeMarker;
use crate::caches::{Changes, Stores};
use crate::controller::ObjectKey;
use crate::controller::api_error::{ApiError, api_error};
use crate::controller::queue::WorkQueue;
use crate::controller::runner::{Outcome, Reconciler};
use crate::controller::triggers::Triggers;

/// The field manager of the controller's writes.
const FIELD_MANAGER: &str = "stevedore-podprobemarker";

/// The controller's state, shared by its workers.
pub struct PodProbeMarkerController {
    pub client: kube::Client,
    pub stores: Stores,
}

impl Reconciler for PodProbeMarkerController {
    type Key = ObjectKey;
    type Error = ApiError;
    const KIND: &'static str = "PodProbeMarker";
    const READS: &'static [&'static str] = &["Pod", "Node", "PodProbeMarker", "NodePodProbe"];

    async fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, ApiError> {
        let node = &key.name;
        let Some(node_object) = self.stores.nodes.get(&ObjectRef::new(node)) else {
            return Ok(Outcome::Done);
        };
        let markers = self.stores.podprobemarkers.state();
        let current = self.stores.nodepodprobes.get(&ObjectRef::new(node));
        if markers.is_empty() && current.is_none() {
            // Nothing probes pods, and nothing was ever written for the node.
            return Ok(Outcome::Done);
        }
        let markers: Vec<&PodProbeMarker> = markers.iter().map(AsRef::as_ref).collect();
        let pods: Vec<Arc<Pod>> = (self.stores.pods.state().into_iter())
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .collect();
        let pod_refs: Vec<&Pod> = pods.iter().map(AsRef::as_ref).collect();
        let desired = node_spec(node, &markers, &pod_refs);
        self.write_spec(&node_object, current.as_deref(), desired)
            .await?;
        if let Some(current) = current {
            self.mark_pods(&current, &markers, &pod_refs).await?;
        }
        Ok(Outcome::Done)
    }

    fn all_keys(&self) -> Vec<ObjectKey> {
        node_keys(&self.stores)
    }

    fn caches_synced(&self) -> bool {
        self.stores.sync.synced(Self::READS)
    }
}

impl PodProbeMarkerController {
    /// Creates the node's NodePodProbe when some pod there is probed, or replaces its
    /// spec when it differs. An existing one is kept empty rather than deleted, as
    /// OpenKruise keeps one per node.
    async fn write_spec(
        &self,
        node: &Node,
        current: Option<&NodePodProbe>,
        desired: NodePodProbeSpec,
    ) -> Result<(), ApiError> {
        let name = node.name_any();
        let api: Api<NodePodProbe> = Api::all(self.client.clone());
        match current {
            Some(current) if current.spec == desired => Ok(()),
            Some(_) => {
                let patch = json!({ "spec": { "podProbes": desired.pod_probes } });
                let params = PatchParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..PatchParams::default()
                };
                api.patch(&name, &params, &Patch::Merge(patch))
                    .await
                    .map(drop)
                    .map_err(api_error(format!(
                        "writing the spec of NodePodProbe {name}"
                    )))
            }
            None if desired.pod_probes.is_empty() => Ok(()),
            None => {
                let object = NodePodProbe {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        owner_references: Some(vec![node_owner(node)]),
                        ..ObjectMeta::default()
                    },
                    spec: desired,
                    status: None,
                };
                match api.create(&PostParams::default(), &object).await {
                    Ok(_) => Ok(()),
                    // Made meanwhile (another worker, or the cache is behind): the next
                    // event of it compares the spec again.
                    Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
                    Err(err) => Err(api_error(format!("creating NodePodProbe {name}"))(err)),
                }
            }
        }
    }

    /// Patches each pod whose probe states call for a change.
    async fn mark_pods(
        &self,
        probes: &NodePodProbe,
        markers: &[&PodProbeMarker],
        pods: &[&Pod],
    ) -> Result<(), ApiError> {
        let statuses = probes
            .status
            .as_ref()
            .map(|s| s.pod_probe_statuses.as_slice())
            .unwrap_or_default();
        for pod in pods {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let Some(status) = statuses.iter().find(|s| s.uid == uid && !uid.is_empty()) else {
                continue;
            };
            let marked: Vec<MarkedProbe<'_>> = (markers.iter())
                .filter(|m| selects(m, pod))
                .flat_map(|m| {
                    let name = m.metadata.name.as_deref().unwrap_or_default();
                    m.spec.probes.iter().map(move |probe| MarkedProbe {
                        marker: name,
                        probe,
                    })
                })
                .collect();
            let marks = pod_marks(pod, &marked, &status.probe_states);
            if marks.is_empty() {
                continue;
            }
            let namespace = pod.namespace().unwrap_or_default();
            let name = pod.name_any();
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            };
            let now = Time(Timestamp::now());
            if let Some(patch) = status_patch(&uid, &marks, &now) {
                let written = api
                    .patch_status(&name, &params, &Patch::Strategic(patch))
                    .await;
                written.map(drop).map_err(api_error(format!(
                    "writing the probe conditions of pod {namespace}/{name}"
                )))?;
            }
            if let Some(patch) = metadata_patch(&uid, &marks) {
                let written = api.patch(&name, &params, &Patch::Merge(patch)).await;
                written.map(drop).map_err(api_error(format!(
                    "writing the probe labels of pod {namespace}/{name}"
                )))?;
            }
            tracing::info!(
                namespace,
                pod = name,
                "marked the pod with its probe states"
            );
        }
        Ok(())
    }
}

/// The Node as the owner of its NodePodProbe.
fn node_owner(node: &Node) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Node".to_owned(),
        name: node.name_any(),
        uid: node.uid().unwrap_or_default(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// Every node's key.
fn node_keys(stores: &Stores) -> Vec<ObjectKey> {
    (stores.nodes.state().iter())
        .map(|n| ObjectKey::new("", n.name_any()))
        .collect()
}

/// What the controller listens to: a pod's node, when the pod may change its probes
/// ([`pod_may_change_probes`]); a NodePodProbe's node (its status moved); a
/// PodProbeMarker, every node (its selector may pick pods anywhere). Node changes are
/// not listened to: a node matters only through its pods, and heartbeats are many.
pub fn watches(
    changes: &Changes,
    stores: &Stores,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    let everywhere = stores.clone();
    let on_lag = stores.clone();
    let probed = stores.clone();
    Triggers::new("PodProbeMarker", queue, move || node_keys(&on_lag))
        .watch(&changes.pods, move |pod| {
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                return Vec::new();
            };
            let markers = probed.podprobemarkers.state();
            let marker_namespaces = markers.iter().map(|m| m.metadata.namespace.as_deref());
            let node_probes = probed.nodepodprobes.get(&ObjectRef::new(&node));
            if pod_may_change_probes(pod, marker_namespaces, node_probes.as_deref()) {
                vec![ObjectKey::new("", node)]
            } else {
                Vec::new()
            }
        })
        .watch(&changes.nodepodprobes, |probes| {
            vec![ObjectKey::new("", probes.name_any())]
        })
        .watch(&changes.podprobemarkers, move |_| node_keys(&everywhere))
}

/// Whether a change of `pod` may change its node's probes or marks: some PodProbeMarker
/// in its namespace (a marker selects pods of its own namespace only) may select it, or
/// its node's NodePodProbe probes pods (one of them may be this one, gone or changed).
/// Any other pod's event is no work: without this, every pod event in a cluster without
/// a single PodProbeMarker queued its node (40,000 reconciles in a roll of 5,000 pods,
/// each scanning every cached pod).
pub fn pod_may_change_probes<'m>(
    pod: &Pod,
    mut marker_namespaces: impl Iterator<Item = Option<&'m str>>,
    node_probes: Option<&NodePodProbe>,
) -> bool {
    let namespace = pod.metadata.namespace.as_deref();
    marker_namespaces.any(|marker| marker == namespace)
        || node_probes.is_some_and(|probes| !probes.spec.pod_probes.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_pod_a_marker_may_select_or_a_probed_node_holds_is_work() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": "web-0", "namespace": "shop" },
            "spec": { "nodeName": "n1", "containers": [] }
        }))
        .expect("pod");
        let probing: NodePodProbe = serde_json::from_value(json!({
            "metadata": { "name": "n1" },
            "spec": { "podProbes": [{ "name": "web-0", "namespace": "shop", "uid": "u", "probes": [] }] }
        }))
        .expect("node probes");
        let empty: NodePodProbe =
            serde_json::from_value(json!({ "metadata": { "name": "n1" }, "spec": {} }))
                .expect("empty node probes");
        type Case<'a> = (
            &'a str,
            &'a [Option<&'a str>],
            Option<&'a NodePodProbe>,
            bool,
        );
        let cases: [Case<'_>; 5] = [
            ("no marker anywhere", &[], None, false),
            (
                "markers elsewhere only",
                &[Some("other")],
                Some(&empty),
                false,
            ),
            (
                "a marker in its namespace",
                &[Some("other"), Some("shop")],
                None,
                true,
            ),
            ("its node probes pods", &[], Some(&probing), true),
            ("its node's probes are empty", &[], Some(&empty), false),
        ];
        for (case, namespaces, node_probes, expected) in cases {
            let found = pod_may_change_probes(&pod, namespaces.iter().copied(), node_probes);
            assert_eq!(found, expected, "{case}");
        }
    }

    #[test]
    fn the_node_owns_its_probes() {
        let node: Node =
            serde_json::from_value(json!({ "metadata": { "name": "n1", "uid": "nu" } }))
                .expect("node");
        let owner = node_owner(&node);
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Node", "n1", "nu")
        );
    }
}

//! The kinds this control plane caches: one shared store per kind (Pods, Nodes, PVCs,
//! ControllerRevisions, CloneSets, Advanced StatefulSets, Advanced DaemonSets, ImageLists,
//! ImagePullJobs, BroadcastJobs, AdvancedCronJobs, batch Jobs, PodUnavailableBudgets,
//! PodDisruptionBudgets, ContainerRecreateRequests, ImageListPullJobs, SidecarSets,
//! PodProbeMarkers, NodePodProbes), read by every
//! reconciler.
//! The runtime starts them (see [`crate::runtime::stores`]) but names none of them; adding
//! a kind a new controller reads is one field here and one line in [`Stores::start`].

mod trim;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Resource;
use kube::runtime::reflector::Store;
use tokio::sync::broadcast;

use crate::api::{
    AdvancedCronJob, BroadcastJob, CloneSet, ContainerRecreateRequest, DaemonSet, ImageList,
    ImageListPullJob, ImagePullJob, NodePodProbe, PodProbeMarker, PodUnavailableBudget, SidecarSet,
    StatefulSet,
};
use crate::runtime::stores::{
    Cache, QUIET_CHANGES, StoreRegistry, StoreSet, SyncState, WatchOptions,
};

/// The shared caches. Cloning is cheap; every clone reads the same stores.
#[derive(Clone)]
pub struct Stores {
    pub pods: Store<Pod>,
    pub nodes: Store<Node>,
    pub pvcs: Store<PersistentVolumeClaim>,
    pub revisions: Store<ControllerRevision>,
    pub clonesets: Store<CloneSet>,
    pub statefulsets: Store<StatefulSet>,
    pub daemonsets: Store<DaemonSet>,
    pub imagelists: Store<ImageList>,
    pub imagepulljobs: Store<ImagePullJob>,
    pub imagelistpulljobs: Store<ImageListPullJob>,
    pub broadcastjobs: Store<BroadcastJob>,
    pub advancedcronjobs: Store<AdvancedCronJob>,
    pub jobs: Store<Job>,
    pub podunavailablebudgets: Store<PodUnavailableBudget>,
    pub poddisruptionbudgets: Store<PodDisruptionBudget>,
    pub containerrecreaterequests: Store<ContainerRecreateRequest>,
    pub sidecarsets: Store<SidecarSet>,
    pub podprobemarkers: Store<PodProbeMarker>,
    pub nodepodprobes: Store<NodePodProbe>,
    pub sync: SyncState,
    pub changes: Changes,
}

/// Objects as they change (applied, deleted, or listed again after a relist), per kind.
/// A receiver that falls behind gets `RecvError::Lagged` and must resync everything.
#[derive(Clone)]
pub struct Changes {
    pub pods: broadcast::Sender<Arc<Pod>>,
    pub nodes: broadcast::Sender<Arc<Node>>,
    pub pvcs: broadcast::Sender<Arc<PersistentVolumeClaim>>,
    pub revisions: broadcast::Sender<Arc<ControllerRevision>>,
    pub clonesets: broadcast::Sender<Arc<CloneSet>>,
    pub statefulsets: broadcast::Sender<Arc<StatefulSet>>,
    pub daemonsets: broadcast::Sender<Arc<DaemonSet>>,
    pub imagelists: broadcast::Sender<Arc<ImageList>>,
    pub imagepulljobs: broadcast::Sender<Arc<ImagePullJob>>,
    pub imagelistpulljobs: broadcast::Sender<Arc<ImageListPullJob>>,
    pub broadcastjobs: broadcast::Sender<Arc<BroadcastJob>>,
    pub advancedcronjobs: broadcast::Sender<Arc<AdvancedCronJob>>,
    pub jobs: broadcast::Sender<Arc<Job>>,
    pub podunavailablebudgets: broadcast::Sender<Arc<PodUnavailableBudget>>,
    pub poddisruptionbudgets: broadcast::Sender<Arc<PodDisruptionBudget>>,
    pub containerrecreaterequests: broadcast::Sender<Arc<ContainerRecreateRequest>>,
    pub sidecarsets: broadcast::Sender<Arc<SidecarSet>>,
    pub podprobemarkers: broadcast::Sender<Arc<PodProbeMarker>>,
    pub nodepodprobes: broadcast::Sender<Arc<NodePodProbe>>,
}

#[cfg(test)]
impl Changes {
    /// Broadcasts no store feeds, for tests of what listens to them.
    pub(crate) fn unfed() -> Self {
        let capacity = 16;
        Self {
            pods: broadcast::channel(capacity).0,
            nodes: broadcast::channel(capacity).0,
            pvcs: broadcast::channel(capacity).0,
            revisions: broadcast::channel(capacity).0,
            clonesets: broadcast::channel(capacity).0,
            statefulsets: broadcast::channel(capacity).0,
            daemonsets: broadcast::channel(capacity).0,
            imagelists: broadcast::channel(capacity).0,
            imagepulljobs: broadcast::channel(capacity).0,
            imagelistpulljobs: broadcast::channel(capacity).0,
            broadcastjobs: broadcast::channel(capacity).0,
            advancedcronjobs: broadcast::channel(capacity).0,
            jobs: broadcast::channel(capacity).0,
            podunavailablebudgets: broadcast::channel(capacity).0,
            poddisruptionbudgets: broadcast::channel(capacity).0,
            containerrecreaterequests: broadcast::channel(capacity).0,
            sidecarsets: broadcast::channel(capacity).0,
            podprobemarkers: broadcast::channel(capacity).0,
            nodepodprobes: broadcast::channel(capacity).0,
        }
    }

    /// The kinds whose changes someone listens to.
    pub(crate) fn listened(&self) -> Vec<&'static str> {
        let counts = [
            ("Pod", self.pods.receiver_count()),
            ("Node", self.nodes.receiver_count()),
            ("PersistentVolumeClaim", self.pvcs.receiver_count()),
            ("ControllerRevision", self.revisions.receiver_count()),
            ("CloneSet", self.clonesets.receiver_count()),
            ("StatefulSet", self.statefulsets.receiver_count()),
            ("DaemonSet", self.daemonsets.receiver_count()),
            ("ImageList", self.imagelists.receiver_count()),
            ("ImagePullJob", self.imagepulljobs.receiver_count()),
            ("ImageListPullJob", self.imagelistpulljobs.receiver_count()),
            ("BroadcastJob", self.broadcastjobs.receiver_count()),
            ("AdvancedCronJob", self.advancedcronjobs.receiver_count()),
            ("Job", self.jobs.receiver_count()),
            (
                "PodUnavailableBudget",
                self.podunavailablebudgets.receiver_count(),
            ),
            (
                "PodDisruptionBudget",
                self.poddisruptionbudgets.receiver_count(),
            ),
            (
                "ContainerRecreateRequest",
                self.containerrecreaterequests.receiver_count(),
            ),
            ("SidecarSet", self.sidecarsets.receiver_count()),
            ("PodProbeMarker", self.podprobemarkers.receiver_count()),
            ("NodePodProbe", self.nodepodprobes.receiver_count()),
        ];
        (counts.into_iter())
            .filter(|(_, receivers)| *receivers > 0)
            .map(|(kind, _)| kind)
            .collect()
    }
}

/// The kinds of this API, by group and kind, whose status has `conditions`: an object of one
/// that does not decode gets an `Undecodable` condition besides its Event
/// (`controller::undecodable_condition`). Every other kind (ImagePullJob, ImageListPullJob,
/// AdvancedCronJob, PodUnavailableBudget, ContainerRecreateRequest, ImageList, and the
/// native kinds, whose conditions their own controllers own) gets only the Event.
const STATUS_CONDITIONS: [(&str, &str); 4] = [
    ("apps.kruise.io", "CloneSet"),
    ("apps.kruise.io", "StatefulSet"),
    ("apps.kruise.io", "DaemonSet"),
    ("apps.kruise.io", "BroadcastJob"),
];

/// `options` for the kind `K`, reporting undecodable objects on their status when
/// [`STATUS_CONDITIONS`] lists it.
fn reporting<K: Resource<DynamicType = ()>>(options: WatchOptions) -> WatchOptions {
    let kind = (K::group(&()), K::kind(&()));
    WatchOptions {
        status_conditions: STATUS_CONDITIONS.contains(&(kind.0.as_ref(), kind.1.as_ref())),
        ..options
    }
}

/// Pods and what moves with them keep a long backlog of changes (busy); the objects
/// people create by the handful keep a short one (quiet; `runtime::stores`).
fn busy_and_quiet() -> (WatchOptions, WatchOptions) {
    let busy = WatchOptions::default();
    let quiet = WatchOptions {
        changes_capacity: QUIET_CHANGES,
        ..busy
    };
    (busy, quiet)
}

impl StoreSet for Stores {
    fn start(mut registry: StoreRegistry<'_>) -> Self {
        let (busy, quiet) = busy_and_quiet();
        // `/readyz` lists the kinds in this order.
        let pods: Cache<Pod> = registry.watch_trimmed(busy, trim::trim_pod);
        let nodes: Cache<Node> = registry.watch_trimmed(busy, trim::trim_node);
        let pvcs: Cache<PersistentVolumeClaim> = registry.watch(busy);
        let revisions: Cache<ControllerRevision> = registry.watch(busy);
        let clonesets: Cache<CloneSet> = registry.watch(reporting::<CloneSet>(quiet));
        let statefulsets: Cache<StatefulSet> = registry.watch(reporting::<StatefulSet>(quiet));
        let daemonsets: Cache<DaemonSet> = registry.watch(reporting::<DaemonSet>(quiet));
        // An ImageList's managedFields say which entries each ImagePullJob holds.
        let imagelists: Cache<ImageList> = registry.watch(WatchOptions {
            keep_managed_fields: true,
            ..busy
        });
        let imagepulljobs: Cache<ImagePullJob> = registry.watch(reporting::<ImagePullJob>(quiet));
        let imagelistpulljobs: Cache<ImageListPullJob> =
            registry.watch(reporting::<ImageListPullJob>(quiet));
        let broadcastjobs: Cache<BroadcastJob> = registry.watch(reporting::<BroadcastJob>(quiet));
        let advancedcronjobs: Cache<AdvancedCronJob> =
            registry.watch(reporting::<AdvancedCronJob>(quiet));
        let jobs: Cache<Job> = registry.watch(busy);
        let podunavailablebudgets: Cache<PodUnavailableBudget> =
            registry.watch(reporting::<PodUnavailableBudget>(quiet));
        let poddisruptionbudgets: Cache<PodDisruptionBudget> = registry.watch(quiet);
        let containerrecreaterequests: Cache<ContainerRecreateRequest> =
            registry.watch(reporting::<ContainerRecreateRequest>(quiet));
        // Read by the pod webhook on every pod create (sidecarset/webhook.rs).
        let sidecarsets: Cache<SidecarSet> = registry.watch(reporting::<SidecarSet>(quiet));
        let podprobemarkers: Cache<PodProbeMarker> = registry.watch(quiet);
        let nodepodprobes: Cache<NodePodProbe> = registry.watch(busy);
        Self {
            changes: Changes {
                pods: pods.changes,
                nodes: nodes.changes,
                pvcs: pvcs.changes,
                revisions: revisions.changes,
                clonesets: clonesets.changes,
                statefulsets: statefulsets.changes,
                daemonsets: daemonsets.changes,
                imagelists: imagelists.changes,
                imagepulljobs: imagepulljobs.changes,
                imagelistpulljobs: imagelistpulljobs.changes,
                broadcastjobs: broadcastjobs.changes,
                advancedcronjobs: advancedcronjobs.changes,
                jobs: jobs.changes,
                podunavailablebudgets: podunavailablebudgets.changes,
                poddisruptionbudgets: poddisruptionbudgets.changes,
                containerrecreaterequests: containerrecreaterequests.changes,
                sidecarsets: sidecarsets.changes,
                podprobemarkers: podprobemarkers.changes,
                nodepodprobes: nodepodprobes.changes,
            },
            pods: pods.store,
            nodes: nodes.store,
            pvcs: pvcs.store,
            revisions: revisions.store,
            clonesets: clonesets.store,
            statefulsets: statefulsets.store,
            daemonsets: daemonsets.store,
            imagelists: imagelists.store,
            imagepulljobs: imagepulljobs.store,
            imagelistpulljobs: imagelistpulljobs.store,
            broadcastjobs: broadcastjobs.store,
            advancedcronjobs: advancedcronjobs.store,
            jobs: jobs.store,
            podunavailablebudgets: podunavailablebudgets.store,
            poddisruptionbudgets: poddisruptionbudgets.store,
            containerrecreaterequests: containerrecreaterequests.store,
            sidecarsets: sidecarsets.store,
            podprobemarkers: podprobemarkers.store,
            nodepodprobes: nodepodprobes.store,
            sync: registry.finish(),
        }
    }

    fn sync(&self) -> &SyncState {
        &self.sync
    }
}

#[cfg(test)]
mod tests {
    //! The objects issue 28 found blinding a whole kind, through the decode step the stores
    //! run: each is one undecodable object, named by its field.

    use serde_json::json;

    use super::*;
    use crate::runtime::decode::{Decoded, decode};

    fn field_refused<K: serde::de::DeserializeOwned>(object: serde_json::Value) -> Option<String> {
        match decode::<K>(object) {
            Decoded::Object(_) => None,
            Decoded::Undecodable { error, .. } => Some(format!("{}: {}", error.field, error.error)),
        }
    }

    /// The kinds whose undecodable objects get a condition are exactly those whose CRD
    /// gives the status conditions, in every version served.
    #[test]
    fn the_kinds_reporting_on_their_status_are_those_whose_status_has_conditions() {
        for crd in crate::api::crds() {
            let (group, kind) = (crd.spec.group.clone(), crd.spec.names.kind.clone());
            let listed = STATUS_CONDITIONS.contains(&(group.as_str(), kind.as_str()));
            for version in &crd.spec.versions {
                let schema = serde_json::to_value(&version.schema).expect("a schema");
                let has_conditions = schema
                    .pointer("/openAPIV3Schema/properties/status/properties/conditions")
                    .is_some();
                assert_eq!(
                    listed, has_conditions,
                    "{group}/{} {kind}: listed {listed}, status conditions {has_conditions}",
                    version.name
                );
            }
        }
        let stored = |options: WatchOptions| options.status_conditions;
        let quiet = WatchOptions::default();
        assert!(stored(reporting::<CloneSet>(quiet)));
        assert!(stored(reporting::<BroadcastJob>(quiet)));
        assert!(!stored(reporting::<PodUnavailableBudget>(quiet)));
        assert!(!stored(
            reporting::<k8s_openapi::api::apps::v1::StatefulSet>(quiet)
        ));
    }

    #[test]
    fn a_cloneset_past_int32_is_one_undecodable_object_naming_its_field() {
        let cloneset = |max_unavailable: serde_json::Value| {
            json!({
                "apiVersion": "apps.kruise.io/v1alpha1",
                "kind": "CloneSet",
                "metadata": {"name": "poison", "namespace": "default"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "poison"}},
                    "template": {"metadata": {"labels": {"app": "poison"}},
                                 "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                    "updateStrategy": {"maxUnavailable": max_unavailable},
                },
            })
        };
        assert_eq!(field_refused::<CloneSet>(cloneset(json!("20%"))), None);
        assert_eq!(
            field_refused::<CloneSet>(cloneset(json!(2_147_483_647_i64))),
            None
        );
        // serde's wording is the type's own; the field and the value are what matter.
        let refused = field_refused::<CloneSet>(cloneset(json!(2_147_483_648_i64)))
            .expect("one past int32 does not decode");
        assert!(
            refused.starts_with("spec.updateStrategy.maxUnavailable: ")
                && refused.contains("2147483648"),
            "{refused}"
        );
    }
}

//! The wiring refuses, before it starts anything, a controller that reads a kind the
//! runtime caches no store for; a controller whose kinds are all cached starts; and every
//! component this binary wires reads only kinds its `Stores` cache; every pod-set controller
//! forgets what it kept of a deleted set.

use std::convert::Infallible;

use http::{Request, Response};
use k8s_openapi::api::core::v1::Pod;
use kube::client::Body;

use super::*;
use crate::runtime::leader::Timings;
use tokio::time::Instant;

use crate::controller::ObjectKey;
use crate::controller::runner::Outcome;
use crate::runtime::stores::{Cache, StoreRegistry, SyncState, WatchOptions};
use crate::workload::budget::NoBudgets;
use crate::workload::template_check::Verdict;

/// A binary that caches Pods only (and reads none: only what is cached matters here).
struct PodsOnly {
    sync: SyncState,
}

impl StoreSet for PodsOnly {
    fn start(mut registry: StoreRegistry<'_>) -> Self {
        let _pods: Cache<Pod> = registry.watch(WatchOptions::default());
        Self {
            sync: registry.finish(),
        }
    }

    fn sync(&self) -> &SyncState {
        &self.sync
    }
}

/// A reconciler that reads what its type parameter says.
struct Reads<const WIDGETS: bool>;

impl<const WIDGETS: bool> Reconciler for Reads<WIDGETS> {
    type Key = ObjectKey;
    type Error = Infallible;
    const KIND: &'static str = "Gadget";
    const READS: &'static [&'static str] = if WIDGETS {
        &["Pod", "Widget"]
    } else {
        &["Pod"]
    };

    async fn reconcile(&self, _: &ObjectKey) -> Result<Outcome, Infallible> {
        Ok(Outcome::Done)
    }

    fn all_keys(&self) -> Vec<ObjectKey> {
        Vec::new()
    }
}

/// A client of an apiserver that never answers: nothing here needs it to.
fn silent_client() -> kube::Client {
    kube::Client::new(
        tower::service_fn(|_: Request<Body>| async {
            std::future::pending::<Result<Response<Body>, Infallible>>().await
        }),
        "default",
    )
}

/// A runtime over an apiserver that never answers.
async fn runtime<S: StoreSet>(shutdown: &CancellationToken) -> Runtime<S> {
    let client = silent_client();
    let config = RuntimeConfig {
        namespace: "default".to_owned(),
        lease_name: "wiring-test".to_owned(),
        identity: "replica-a".to_owned(),
        admin_addr: "127.0.0.1:0".parse().expect("address"),
        timings: Timings::default(),
        owner: None,
    };
    Runtime::start(client, config, shutdown.clone())
        .await
        .expect("the runtime starts")
}

#[tokio::test]
async fn a_controller_reading_a_kind_no_store_caches_is_refused() {
    let shutdown = CancellationToken::new();
    let mut running = runtime::<PodsOnly>(&shutdown).await;

    let refused = start_reconciler(&mut running, Arc::new(Reads::<true>), 1, &shutdown);

    let Err(err) = refused else {
        panic!("a controller reading Widgets started on a runtime that caches only Pods");
    };
    assert_eq!(
        err.to_string(),
        "the Gadget controller cannot start: no store for the kind Widget is started \
         (the stores started are Pod)"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn a_controller_reading_only_cached_kinds_starts() {
    let shutdown = CancellationToken::new();
    let mut running = runtime::<PodsOnly>(&shutdown).await;

    let started = start_reconciler(&mut running, Arc::new(Reads::<false>), 1, &shutdown);

    assert!(started.is_ok(), "{:?}", started.err());
    shutdown.cancel();
}

/// A pod-set kind's reads follow from what it is (`PodSetKind::READS`): itself, its pods,
/// the nodes, revisions and budgets, and claims only when it makes them.
#[test]
fn pod_set_kinds_read_claims_only_when_they_make_them() {
    let kinds: [(&str, &[&str], bool); 3] = [
        ("CloneSet", CloneSetController::READS, true),
        ("StatefulSet", StatefulSetController::READS, true),
        ("DaemonSet", DaemonSetController::READS, false),
    ];
    for (kind, reads, claims) in kinds {
        for read in [kind, "Pod", "Node", "ControllerRevision"] {
            assert!(reads.contains(&read), "{kind} reads {read}: {reads:?}");
        }
        for budget in ["PodUnavailableBudget", "PodDisruptionBudget"] {
            assert!(reads.contains(&budget), "{kind} reads {budget}: {reads:?}");
        }
        let reads_claims = reads.contains(&"PersistentVolumeClaim");
        assert_eq!(reads_claims, claims, "{kind}: {reads:?}");
    }
}

#[tokio::test]
async fn every_component_wired_reads_only_kinds_the_stores_cache() {
    let shutdown = CancellationToken::new();
    let running = runtime::<Stores>(&shutdown).await;

    let components: [(&str, &[&str]); 14] = [
        ("ImageList distributor", Distributor::READS),
        ("CloneSet", CloneSetController::READS),
        ("StatefulSet", StatefulSetController::READS),
        ("DaemonSet", DaemonSetController::READS),
        ("ImagePullJob", ImagePullJobController::READS),
        ("ImageListPullJob", ImageListPullJobController::READS),
        ("BroadcastJob", BroadcastJobController::READS),
        ("AdvancedCronJob", AdvancedCronJobController::READS),
        ("PodUnavailableBudget", BudgetController::READS),
        (
            "ContainerRecreateRequest",
            ContainerRecreateController::READS,
        ),
        (
            "SidecarSet",
            <crate::sidecarset::SidecarSetController as Reconciler>::READS,
        ),
        (
            "ContainerLaunchPriority",
            <crate::launchpriority::LaunchPriorityController as Reconciler>::READS,
        ),
        (
            "PodProbeMarker",
            <crate::podprobemarker::PodProbeMarkerController as Reconciler>::READS,
        ),
        (
            "NodePodProbe sessions",
            crate::podprobemarker::ProbeSessions::READS,
        ),
    ];
    for (component, reads) in components {
        assert!(!reads.is_empty(), "{component} names no kind it reads");
        assert_eq!(running.stores.sync.require(reads), Ok(()), "{component}");
    }
    let cached: Vec<&str> = running
        .stores
        .sync
        .report()
        .into_iter()
        .map(|(kind, _)| kind)
        .collect();
    assert_eq!(
        cached,
        [
            "Pod",
            "Node",
            "PersistentVolumeClaim",
            "ControllerRevision",
            "CloneSet",
            "StatefulSet",
            "DaemonSet",
            "ImageList",
            "ImagePullJob",
            "ImageListPullJob",
            "BroadcastJob",
            "AdvancedCronJob",
            "Job",
            "PodUnavailableBudget",
            "PodDisruptionBudget",
            "ContainerRecreateRequest",
            "SidecarSet",
            "PodProbeMarker",
            "NodePodProbe"
        ],
        "the kinds /readyz reports, in its order"
    );
    shutdown.cancel();
}

/// Never asked: the forget test sets no condition.
struct NoAgents;

impl PodConditions for NoAgents {
    fn set_condition<'a>(
        &'a self,
        _node: &'a k8s_openapi::api::core::v1::Node,
        _pod: crate::controller::pod_conditions::PodTarget,
        _request: crate::controller::pod_conditions::ConditionRequest<'a>,
    ) -> crate::controller::pod_conditions::ConditionFuture<'a> {
        Box::pin(async { unreachable!("no condition in this test") })
    }
}

/// Whether `parts` still holds something of `key`: its create backoff or its update
/// revision's verdict.
fn remembers(parts: &PodSetParts, key: &ObjectKey, now: Instant) -> bool {
    parts.create_backoff.waiting(key, 1, now).is_some()
        || parts.template_checks.cached(key, "rev-1", now).is_some()
}

/// Seeds `parts` with state of a set, has `controller` forget the set, and checks that
/// nothing of it is left.
fn forgets_a_deleted_set<R>(kind: &str, controller: &R, parts: &PodSetParts)
where
    R: crate::controller::object::ObjectReconciler,
{
    let key = ObjectKey::new("ns", "web");
    let now = Instant::now();
    parts
        .create_backoff
        .failed(&key, 1, "quota".to_owned(), now);
    parts
        .template_checks
        .record(&key, "rev-1", &Verdict::Accepted, now);
    assert!(remembers(parts, &key, now), "{kind}: nothing was kept");

    controller.forget(&key);

    assert!(
        !remembers(parts, &key, now),
        "{kind} kept state of a deleted set"
    );
}

/// A set that is gone takes with it what every pod-set controller keeps per set (the
/// DaemonSet's own `forget` once left the template's verdict behind).
#[tokio::test]
async fn every_pod_set_controller_forgets_what_it_kept_of_a_deleted_set() {
    let shutdown = CancellationToken::new();
    let running = runtime::<Stores>(&shutdown).await;
    let client = silent_client();
    let agents: Arc<dyn PodConditions> = Arc::new(NoAgents);
    let events = EventSink::new(client.clone(), "wiring-test");
    let stores = running.stores.clone();
    let budgets: Arc<dyn BudgetSource> = Arc::new(NoBudgets);
    let parts = || {
        let (client, stores, events) = (client.clone(), stores.clone(), events.clone());
        PodSetParts::new(client, stores, agents.clone(), events, budgets.clone())
    };
    let cloneset = CloneSetController::new(parts());
    let statefulset = StatefulSetController::new(parts());
    let daemonset = DaemonSetController::new(parts());
    forgets_a_deleted_set("CloneSet", &cloneset, cloneset.parts());
    forgets_a_deleted_set("StatefulSet", &statefulset, statefulset.parts());
    forgets_a_deleted_set("DaemonSet", &daemonset, daemonset.parts());
    shutdown.cancel();
}

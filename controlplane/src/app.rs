//! The wiring: the one place that knows both the runtime (caches, admin, elector, metrics)
//! and the workloads. It picks the kinds cached ([`Stores`]), starts the runtime on them,
//! and starts every controller and the ImageList distributor on its caches — each refused
//! at start if it reads a kind no store caches.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::CustomResourceExt as _;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use crate::admission::caller::CallerPolicy;
use crate::admission::{Callers, Prepared, WebhookConfig, WebhookConfiguration, WebhookError};
use crate::advancedcronjob::AdvancedCronJobController;
use crate::agents::{AgentError, AgentPool, AgentPoolConfig};
use crate::api::PodUnavailableBudget;
use crate::broadcastjob::BroadcastJobController;
use crate::budget::BudgetController;
use crate::budget::admission::KubeBudgetSource;
use crate::budget::webhook::review::Exempt;
use crate::caches::Stores;
use crate::certs::{Authority, CaSecretError, CsrSigner};
use crate::cloneset::CloneSetController;
use crate::config::Args;
use crate::containerrecreate::ContainerRecreateController;
use crate::containerrecreate::agent::ContainerRestarts;
use crate::controller::events::EventSink;
use crate::controller::expectations::{EXPECTATION_TIMEOUT, Expectations};
use crate::controller::pod_conditions::PodConditions;
use crate::controller::queue::{Backoff, WorkQueue};
use crate::controller::runner::{self, Reconciler, RunnerConfig};
use crate::controller::undecodable_condition::{self, UNDECODABLE};
use crate::daemonset::DaemonSetController;
use crate::imagelist::Distributor;
use crate::imagelist::pull_events::PullEventLimits;
use crate::imagelistpulljob::ImageListPullJobController;
use crate::imagepulljob::ImagePullJobController;
use crate::launchpriority::LaunchPriorityController;
use crate::podprobemarker::{
    PodProbeMarkerController, PodProbeMarkerStatusController, ProbeSessions,
};
use crate::runtime::decode::Undecodable;
use crate::runtime::leader::TimingsError;
use crate::runtime::stores::{StoreSet, UnknownStore};
use crate::runtime::{Runtime, RuntimeConfig, RuntimeError, shutdown_on_signal};
use crate::sidecarset::SidecarSetController;
use crate::statefulset::StatefulSetController;
use crate::switches::ControllerSwitches;
use crate::workload::budget::BudgetSource;
use crate::workload::set_controller::PodSetParts;

/// Why the control plane could not start.
#[derive(Debug, Error)]
pub enum AppError {
    #[error("connecting to the Kubernetes API: {0}")]
    Client(#[source] kube::Error),
    #[error(transparent)]
    LeaderTimings(#[from] TimingsError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("setting up the agent client pool: {0}")]
    Agents(#[source] AgentError),
    #[error("the agent serving CA: {0}")]
    Ca(#[source] CaSecretError),
    #[error(
        "the webhook server (CRD conversion, PodUnavailableBudget, ContainerRecreateRequest, SidecarSet and launch-priority admission) cannot start: {0}"
    )]
    Webhook(#[source] WebhookError),
    #[error("the {component} cannot start: {source}")]
    UnknownStore {
        component: String,
        #[source]
        source: UnknownStore,
    },
}

/// Every workload is queued again this often, in case an event was missed.
const RESYNC_PERIOD: Duration = Duration::from_secs(600);

/// How often the agent CA bundle file is read again for a rotation.
const CA_RELOAD_PERIOD: Duration = Duration::from_secs(30);

/// Runs the control plane until SIGTERM or SIGINT, then shuts down gracefully.
pub async fn run(args: Args) -> Result<(), AppError> {
    let timings = args.leader_timings()?;
    let client = crate::controller::client::connect()
        .await
        .map_err(AppError::Client)?;
    let shutdown = CancellationToken::new();
    let signals = shutdown_on_signal(shutdown.clone())?;
    let identity = args.identity();
    // Every replica reads (or, the first, creates) the CA before it serves: the pool
    // trusts it whether or not this replica leads and signs.
    let owner =
        crate::runtime::owner::own_deployment(&client, &args.namespace, args.identity.as_deref())
            .await;
    let secrets = kube::Api::namespaced(client.clone(), &args.namespace);
    let authority = crate::certs::load_or_create(&secrets, &args.agent_ca_secret, owner.as_ref())
        .await
        .map_err(AppError::Ca)?;
    let mut pool_config = AgentPoolConfig::from_args(&args, client.clone());
    pool_config.signer_ca = Some(authority.cert_pem().to_owned());
    let agent_username = args.agent_username.clone();
    // Trusted and listening before the runtime reports ready: `v1beta1` budgets are read
    // through this server's conversion as soon as the Service sends traffic here.
    let webhook = crate::admission::prepare(&client, webhook_config(&args, owner.clone()))
        .await
        .map_err(AppError::Webhook)?;
    let budget_webhook = args
        .controllers
        .enabled("podunavailablebudget-webhook")
        .then(|| control_plane_exempt(&args));
    let sidecarset_webhook = args.controllers.enabled("sidecarset-webhook");
    let launch_priority_webhook = args.controllers.enabled("containerlaunchpriority-webhook");
    let namespace = args.namespace.clone();
    let workers_per_kind = args.concurrency_per_kind.get();
    let metrics_addr = args.metrics_addr;
    let switches = args.controllers.clone();
    let mut running = Runtime::<Stores>::start(
        client.clone(),
        RuntimeConfig {
            namespace: args.namespace,
            lease_name: args.lease_name,
            identity: identity.clone(),
            admin_addr: args.health_addr,
            timings,
            owner,
        },
        shutdown.clone(),
    )
    .await?;
    let started = start_workloads(
        &mut running,
        Workloads {
            client,
            identity,
            pool_config,
            workers_per_kind,
            metrics_addr,
            authority: Arc::new(authority),
            agent_username,
            switches,
            webhook,
            budget_webhook,
            sidecarset_webhook,
            launch_priority_webhook,
            namespace,
        },
        &shutdown,
    )
    .await;
    if let Err(err) = started {
        shutdown.cancel();
        running.wait().await;
        return Err(err);
    }
    running.wait().await;
    signals.abort();
    Ok(())
}

/// What the workloads need besides the runtime.
struct Workloads {
    client: kube::Client,
    identity: String,
    pool_config: AgentPoolConfig,
    workers_per_kind: usize,
    metrics_addr: SocketAddr,
    authority: Arc<Authority>,
    agent_username: String,
    switches: ControllerSwitches,
    webhook: Prepared,
    /// Whether pod deletes and evictions are reviewed (`podunavailablebudget-webhook`),
    /// and whose are never held.
    budget_webhook: Option<Exempt>,
    /// Whether pod creates get their SidecarSets' sidecars (`sidecarset-webhook`).
    sidecarset_webhook: bool,
    /// Whether pod creates get their launch barriers (`containerlaunchpriority-webhook`).
    launch_priority_webhook: bool,
    /// The control plane's namespace, where SidecarSets' ControllerRevisions are kept.
    namespace: String,
}

/// The webhook server's settings from the command line.
fn webhook_config(args: &Args, ca_owner: Option<OwnerReference>) -> WebhookConfig {
    let mut configurations = Vec::new();
    if args.controllers.enabled("podunavailablebudget-webhook") {
        configurations.push(WebhookConfiguration::Validating(
            args.webhook_configuration.clone(),
        ));
    }
    // Always trusted and served: its failurePolicy is Fail, so a replica without the
    // route would refuse every ContainerRecreateRequest write.
    configurations.push(WebhookConfiguration::Mutating(
        args.crr_webhook_configuration.clone(),
    ));
    if args.controllers.enabled("sidecarset-webhook") {
        configurations.push(WebhookConfiguration::Mutating(
            args.sidecarset_webhook_configuration.clone(),
        ));
    }
    if args.controllers.enabled("containerlaunchpriority-webhook") {
        configurations.push(WebhookConfiguration::Mutating(
            args.launch_priority_webhook_configuration.clone(),
        ));
    }
    WebhookConfig {
        addr: args.webhook_addr,
        namespace: args.namespace.clone(),
        service: args.webhook_service.clone(),
        ca_secret: args.webhook_ca_secret.clone(),
        ca_owner,
        configurations,
        conversion_crd: PodUnavailableBudget::crd_name().to_owned(),
        callers: args.webhook_client_ca.clone().map(|ca_file| Callers {
            ca_file,
            policy: CallerPolicy {
                names: args.webhook_client_names.clone(),
            },
        }),
    }
}

/// The control plane's own user, whose disruptions the budget webhook never holds.
fn control_plane_exempt(args: &Args) -> Exempt {
    Exempt {
        control_plane: format!(
            "system:serviceaccount:{}:{}",
            args.namespace, args.service_account
        ),
    }
}

/// Which pod-create webhooks this replica serves (`--controllers`).
#[derive(Clone, Copy)]
struct PodCreateWebhooks {
    sidecarsets: bool,
    launch_priority: bool,
}

/// The admission routes this replica serves: ContainerRecreateRequest defaulting always,
/// PodUnavailableBudgets against deletes and evictions, SidecarSet injection into pod
/// creates and their launch barriers when switched on.
fn admission_routes(
    client: &kube::Client,
    stores: &Stores,
    budget: Option<Exempt>,
    pod_creates: PodCreateWebhooks,
    namespace: &str,
) -> axum::Router {
    let mut routes = crate::containerrecreate::webhook::routes(client.clone());
    if pod_creates.launch_priority {
        routes = routes.merge(crate::launchpriority::webhook::routes());
    }
    let sidecarsets = pod_creates.sidecarsets;
    if sidecarsets {
        routes = routes.merge(crate::sidecarset::webhook::routes(
            client.clone(),
            stores.clone(),
            namespace.to_owned(),
        ));
    }
    if let Some(exempt) = budget {
        routes = routes.merge(crate::budget::webhook::routes(
            client.clone(),
            stores.clone(),
            exempt,
        ));
    }
    routes
}

/// Serves metrics, then starts the ImageList distributor and the controllers; each acts
/// only while this replica leads.
async fn start_workloads(
    running: &mut Runtime<Stores>,
    workloads: Workloads,
    shutdown: &CancellationToken,
) -> Result<(), AppError> {
    running
        .serve_metrics(workloads.metrics_addr, shutdown)
        .await?;
    let agents =
        AgentPool::new(workloads.pool_config, running.metrics.clone()).map_err(AppError::Agents)?;
    let client = workloads.client;
    let workers = workloads.workers_per_kind;
    let stores = running.stores.clone();
    running.spawn(
        agents
            .clone()
            .reload_ca_every(CA_RELOAD_PERIOD, shutdown.clone()),
    );
    let switches = workloads.switches;
    // Every replica serves the webhook (the Service spreads reviews over both), leader
    // or not: the budgets' check-and-decrement is safe from any number of writers, and
    // conversion is pure, defaulting a ContainerRecreateRequest only reads its pod.
    // `/convert` is always served: `podunavailablebudget-webhook` off only leaves out the
    // budget's route (admission/server.rs).
    let admission = admission_routes(
        &client,
        &stores,
        workloads.budget_webhook,
        PodCreateWebhooks {
            sidecarsets: workloads.sidecarset_webhook,
            launch_priority: workloads.launch_priority_webhook,
        },
        &workloads.namespace,
    );
    running.spawn(workloads.webhook.serve(admission, shutdown.clone()));
    if switches.enabled("csr-signer") {
        start_signer(
            running,
            client.clone(),
            workloads.authority,
            workloads.agent_username,
            shutdown,
        )?;
    }
    if switches.enabled("imagelist-distributor") {
        start_distributor(running, &client, &agents, &workloads.identity, shutdown)?;
    }

    let events = EventSink::new(client.clone(), &workloads.identity);
    start_undecodable_reporting(running, &client, &events, shutdown);
    let probe_agents = agents.clone();
    let restarts: Arc<dyn ContainerRestarts> = Arc::new(agents.clone());
    let agents: Arc<dyn PodConditions> = Arc::new(agents);
    let controllers = Controllers {
        client,
        stores,
        events,
        workers,
        switches,
    };
    start_sidecarsets(
        running,
        &controllers,
        agents.clone(),
        &workloads.namespace,
        shutdown,
    )?;
    start_pod_sets(running, &controllers, agents, shutdown)?;
    start_launch_priority(running, &controllers, shutdown)?;
    start_pod_probes(running, &controllers, &probe_agents, shutdown)?;
    start_container_recreates(running, &controllers, restarts, shutdown)?;
    start_jobs(running, &controllers, shutdown)
}

/// Starts the ImageList distributor, which pushes each node's ImageList to its agent.
fn start_distributor(
    running: &mut Runtime<Stores>,
    client: &kube::Client,
    agents: &AgentPool,
    identity: &str,
    shutdown: &CancellationToken,
) -> Result<(), AppError> {
    require_stores(
        running,
        "ImageList distributor".to_owned(),
        Distributor::READS,
    )?;
    running.spawn(
        Distributor {
            client: client.clone(),
            stores: running.stores.clone(),
            agents: agents.clone(),
            events: EventSink::new(client.clone(), identity),
            failures: PullEventLimits::default(),
        }
        .run(running.leadership.clone(), shutdown.clone()),
    );
    Ok(())
}

/// Starts what tells people about objects the caches could not decode: a Warning Event
/// per object from every replica, and the `Undecodable` condition from the leader.
fn start_undecodable_reporting(
    running: &mut Runtime<Stores>,
    client: &kube::Client,
    events: &EventSink,
    shutdown: &CancellationToken,
) {
    if let Some(reports) = running.undecodable.take() {
        running.spawn(report_undecodable(
            reports,
            events.clone(),
            shutdown.clone(),
        ));
    }
    running.spawn(undecodable_condition::run(
        client.clone(),
        running.undecodable_conditions.clone(),
        running.leadership.clone(),
        shutdown.clone(),
    ));
}

/// Puts a Warning Event on each object a cache could not decode (the stores send one report
/// per object and resourceVersion). Every replica reports what its own caches skip, leader
/// or not: a replica whose caches are blind to an object says so. The `Undecodable`
/// condition, on the kinds whose status has conditions, only the leader writes
/// (`controller::undecodable_condition::run`).
async fn report_undecodable(
    mut reports: tokio::sync::mpsc::Receiver<Undecodable>,
    events: EventSink,
    shutdown: CancellationToken,
) {
    loop {
        let report = tokio::select! {
            () = shutdown.cancelled() => return,
            report = reports.recv() => report,
        };
        let Some(report) = report else { return };
        events
            .warning(&report.object, UNDECODABLE, "Decode", report.note())
            .await;
    }
}

/// The ContainerRecreateRequest controller and its triggers, as `--controllers` says.
fn start_container_recreates(
    running: &mut Runtime<Stores>,
    c: &Controllers,
    restarts: Arc<dyn ContainerRestarts>,
    shutdown: &CancellationToken,
) -> Result<(), AppError> {
    if !c.switches.enabled("containerrecreaterequest") {
        return Ok(());
    }
    let controller = ContainerRecreateController::new(
        c.client.clone(),
        c.stores.clone(),
        restarts,
        c.events.clone(),
    );
    let queue = start_reconciler(running, Arc::new(controller), c.workers, shutdown)?;
    let triggers = crate::containerrecreate::triggers::watches(
        &c.stores.changes,
        &c.stores.containerrecreaterequests,
        queue,
    );
    running.spawn(triggers.run(shutdown.clone()));
    Ok(())
}

/// The SidecarSet controller (sidecar upgrades in place, status) and its triggers, as
/// `--controllers` says; its upgrades are admitted by the same budgets as the pod sets'.
fn start_sidecarsets(
    running: &mut Runtime<Stores>,
    c: &Controllers,
    agents: Arc<dyn PodConditions>,
    namespace: &str,
    shutdown: &CancellationToken,
) -> Result<(), AppError> {
    if !c.switches.enabled("sidecarset") {
        return Ok(());
    }
    let budgets: Arc<dyn BudgetSource> = Arc::new(KubeBudgetSource {
        client: c.client.clone(),
        stores: c.stores.clone(),
    });
    let controller = SidecarSetController {
        client: c.client.clone(),
        stores: c.stores.clone(),
        agents,
        budgets,
        events: c.events.clone(),
        namespace: namespace.to_owned(),
        expectations: Expectations::new(EXPECTATION_TIMEOUT),
    };
    let queue = start_reconciler(running, Arc::new(controller), c.workers, shutdown)?;
    let triggers =
        crate::sidecarset::triggers::watches(&c.stores.changes, &c.stores.sidecarsets, queue);
    running.spawn(triggers.run(shutdown.clone()));
    Ok(())
}

/// The container launch-priority controller (the pods' barrier ConfigMaps) and its
/// triggers, as `--controllers` says.
fn start_launch_priority(
    running: &mut Runtime<Stores>,
    c: &Controllers,
    shutdown: &CancellationToken,
) -> Result<(), AppError> {
    if !c.switches.enabled("containerlaunchpriority") {
        return Ok(());
    }
    let controller = LaunchPriorityController {
        client: c.client.clone(),
        stores: c.stores.clone(),
        events: c.events.clone(),
    };
    let queue = start_reconciler(running, Arc::new(controller), c.workers, shutdown)?;
    let triggers =
        crate::launchpriority::controller::watches(&c.stores.changes, &c.stores.pods, queue);
    running.spawn(triggers.run(shutdown.clone()));
    Ok(())
}

/// The PodProbeMarker controller (NodePodProbe specs, pod marks), the markers' status and
/// the sessions that carry each NodePodProbe to its node's agent, as `--controllers` says.
fn start_pod_probes(
    running: &mut Runtime<Stores>,
    c: &Controllers,
    agents: &AgentPool,
    shutdown: &CancellationToken,
) -> Result<(), AppError> {
    if !c.switches.enabled("podprobemarker") {
        return Ok(());
    }
    require_stores(
        running,
        "NodePodProbe sessions".to_owned(),
        ProbeSessions::READS,
    )?;
    let sessions = ProbeSessions {
        client: c.client.clone(),
        stores: c.stores.clone(),
        agents: agents.clone(),
    };
    running.spawn(sessions.run(running.leadership.clone(), shutdown.clone()));
    let controller = PodProbeMarkerController {
        client: c.client.clone(),
        stores: c.stores.clone(),
    };
    let queue = start_reconciler(running, Arc::new(controller), c.workers, shutdown)?;
    let triggers = crate::podprobemarker::controller::watches(&c.stores.changes, &c.stores, queue);
    running.spawn(triggers.run(shutdown.clone()));
    let status = PodProbeMarkerStatusController {
        client: c.client.clone(),
        stores: c.stores.clone(),
    };
    let queue = start_reconciler(running, Arc::new(status), c.workers, shutdown)?;
    let triggers = crate::podprobemarker::status::watches(&c.stores.changes, &c.stores, queue);
    running.spawn(triggers.run(shutdown.clone()));
    Ok(())
}

/// What every controller is built from.
struct Controllers {
    client: kube::Client,
    stores: Stores,
    events: EventSink,
    workers: usize,
    switches: ControllerSwitches,
}

/// The pod-set controllers (CloneSet, Advanced StatefulSet, Advanced DaemonSet) and their triggers, each as
/// `--controllers` says.
fn start_pod_sets(
    running: &mut Runtime<Stores>,
    c: &Controllers,
    agents: Arc<dyn PodConditions>,
    shutdown: &CancellationToken,
) -> Result<(), AppError> {
    let stores = &c.stores;
    // Every disruption a pod-set controller makes is admitted by the budgets handed in
    // here; each controller gets parts of its own (expectations, backoffs).
    let budgets: Arc<dyn BudgetSource> = Arc::new(KubeBudgetSource {
        client: c.client.clone(),
        stores: stores.clone(),
    });
    let parts = || {
        let (client, events) = (c.client.clone(), c.events.clone());
        PodSetParts::new(
            client,
            stores.clone(),
            agents.clone(),
            events,
            budgets.clone(),
        )
    };
    if c.switches.enabled("cloneset") {
        let cloneset = CloneSetController::new(parts());
        let queue = start_reconciler(running, Arc::new(cloneset), c.workers, shutdown)?;
        let triggers =
            crate::cloneset::triggers::watches(&stores.changes, &stores.clonesets, queue);
        running.spawn(triggers.run(shutdown.clone()));
    }
    if c.switches.enabled("statefulset") {
        let statefulset = StatefulSetController::new(parts());
        let queue = start_reconciler(running, Arc::new(statefulset), c.workers, shutdown)?;
        let triggers =
            crate::statefulset::triggers::watches(&stores.changes, &stores.statefulsets, queue);
        running.spawn(triggers.run(shutdown.clone()));
    }
    if c.switches.enabled("daemonset") {
        let daemonset = DaemonSetController::new(parts());
        let unplaced = daemonset.unplaced();
        let queue = start_reconciler(running, Arc::new(daemonset), c.workers, shutdown)?;
        let triggers = crate::daemonset::triggers::watches(
            &stores.changes,
            &stores.daemonsets,
            stores.nodes.clone(),
            unplaced,
            queue,
        );
        running.spawn(triggers.run(shutdown.clone()));
    }
    Ok(())
}

/// The job controllers (ImagePullJob, ImageListPullJob, BroadcastJob, AdvancedCronJob) and
/// their triggers, each as `--controllers` says.
fn start_jobs(
    running: &mut Runtime<Stores>,
    c: &Controllers,
    shutdown: &CancellationToken,
) -> Result<(), AppError> {
    let (client, stores, events) = (&c.client, &c.stores, &c.events);
    if c.switches.enabled("imagepulljob") {
        // ImagePullJob: writes its entries into the ImageLists the distributor creates.
        let jobs = ImagePullJobController::new(client.clone(), stores.clone(), events.clone());
        let queue = start_reconciler(running, Arc::new(jobs), c.workers, shutdown)?;
        let triggers = crate::imagepulljob::triggers::watches(
            &stores.changes,
            &stores.imagepulljobs,
            stores.nodes.clone(),
            stores.pods.clone(),
            queue,
        );
        running.spawn(triggers.run(shutdown.clone()));
    }
    if c.switches.enabled("imagelistpulljob") {
        // ImageListPullJob: one ImagePullJob per image, created here.
        let jobs = ImageListPullJobController::new(client.clone(), stores.clone(), events.clone());
        let queue = start_reconciler(running, Arc::new(jobs), c.workers, shutdown)?;
        let triggers = crate::imagelistpulljob::triggers::watches(
            &stores.changes,
            &stores.imagelistpulljobs,
            queue,
        );
        running.spawn(triggers.run(shutdown.clone()));
    }
    if c.switches.enabled("broadcastjob") {
        // BroadcastJob: one pod per fit node, created here, run by the kubelets.
        let jobs = BroadcastJobController::new(client.clone(), stores.clone(), events.clone());
        let queue = start_reconciler(running, Arc::new(jobs), c.workers, shutdown)?;
        let triggers = crate::broadcastjob::triggers::watches(
            &stores.changes,
            &stores.broadcastjobs,
            stores.nodes.clone(),
            queue,
        );
        running.spawn(triggers.run(shutdown.clone()));
    }
    if c.switches.enabled("podunavailablebudget") {
        // PodUnavailableBudget: its status (how many more disruptions the pods allow).
        let budgets = BudgetController::new(client.clone(), stores.clone(), events.clone());
        let queue = start_reconciler(running, Arc::new(budgets), c.workers, shutdown)?;
        let triggers =
            crate::budget::triggers::watches(&stores.changes, &stores.podunavailablebudgets, queue);
        running.spawn(triggers.run(shutdown.clone()));
    }
    if c.switches.enabled("advancedcronjob") {
        // AdvancedCronJob: creates Jobs (run by the cluster's Job controller) or BroadcastJobs.
        let crons = AdvancedCronJobController::new(client.clone(), stores.clone(), events.clone());
        let queue = start_reconciler(running, Arc::new(crons), c.workers, shutdown)?;
        let triggers = crate::advancedcronjob::triggers::watches(
            &stores.changes,
            &stores.advancedcronjobs,
            queue,
        );
        running.spawn(triggers.run(shutdown.clone()));
    }
    Ok(())
}

/// Starts the signer of agent serving certificates (approval and issuance of CSRs for
/// stevedore.dev/agent-serving); it acts only while this replica leads.
fn start_signer<S: StoreSet>(
    running: &mut Runtime<S>,
    client: kube::Client,
    authority: Arc<Authority>,
    agent_username: String,
    shutdown: &CancellationToken,
) -> Result<(), AppError> {
    let queue = WorkQueue::new(Backoff::default());
    let (signer, watch) = CsrSigner::new(
        client,
        authority,
        agent_username,
        queue.clone(),
        shutdown.clone(),
    );
    running.spawn(watch);
    // CSRs are few (one per agent a day); one worker settles them in order.
    spawn_runner(running, signer, queue, 1, shutdown)
}

/// Refuses `component` if it reads a kind the runtime caches no store for.
fn require_stores<S: StoreSet>(
    running: &Runtime<S>,
    component: String,
    reads: &[&str],
) -> Result<(), AppError> {
    running
        .stores
        .sync()
        .require(reads)
        .map_err(|source| AppError::UnknownStore { component, source })
}

/// Runs `reconciler`'s workers on a new queue, gated by this replica's leadership, and
/// returns the queue for its triggers to feed. Refuses a reconciler that reads a kind no
/// store caches: it would wait for that cache forever.
fn start_reconciler<S: StoreSet, R: Reconciler>(
    running: &mut Runtime<S>,
    reconciler: Arc<R>,
    workers: usize,
    shutdown: &CancellationToken,
) -> Result<WorkQueue<R::Key>, AppError> {
    let queue = WorkQueue::new(Backoff::default());
    spawn_runner(running, reconciler, queue.clone(), workers, shutdown)?;
    Ok(queue)
}

/// Runs `reconciler`'s workers on `queue`, gated by this replica's leadership, once it is
/// known to read only kinds the runtime caches.
fn spawn_runner<S: StoreSet, R: Reconciler>(
    running: &mut Runtime<S>,
    reconciler: Arc<R>,
    queue: WorkQueue<R::Key>,
    workers: usize,
    shutdown: &CancellationToken,
) -> Result<(), AppError> {
    require_stores(running, format!("{} controller", R::KIND), R::READS)?;
    running.spawn(runner::run(
        reconciler,
        queue.clone(),
        RunnerConfig {
            workers,
            resync: RESYNC_PERIOD,
        },
        running.leadership.clone(),
        running.metrics.clone(),
        shutdown.clone(),
    ));
    Ok(())
}

#[cfg(test)]
#[path = "app_tests.rs"]
mod tests;

//! The control plane's runtime: shared caches, the admin endpoint and leader election,
//! started together by `run` and stopped together by one `CancellationToken`.

pub mod admin;
pub mod clock;
pub mod elector;
pub mod leader;
pub mod metrics;
pub mod stores;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::agents::{AgentPool, AgentPoolConfig};
use crate::cloneset::CloneSetController;
use crate::cloneset::triggers::run as cloneset_triggers;
use crate::config::Args;
use crate::controller::events::EventSink;
use crate::controller::pod_conditions::PodConditions;
use crate::controller::queue::{Backoff, WorkQueue};
use crate::controller::runner::{self, Reconciler, RunnerConfig};
use crate::imagelist::Distributor;
use elector::Elector;
use leader::Timings;
use metrics::Metrics;
use stores::Stores;

/// Why the runtime could not start.
#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error("connecting to the Kubernetes API: {0}")]
    Client(#[source] kube::Error),
    #[error("binding the admin endpoint on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("setting up the agent client pool: {0}")]
    Agents(#[source] crate::agents::AgentError),
    #[error("installing the signal handler: {0}")]
    Signal(#[source] std::io::Error),
    #[error("the agent serving CA: {0}")]
    Ca(#[source] crate::certs::CaSecretError),
}

/// Runs the control plane until SIGTERM or SIGINT, then shuts down gracefully.
pub async fn run(args: Args) -> Result<(), RuntimeError> {
    let client = kube::Client::try_default()
        .await
        .map_err(RuntimeError::Client)?;
    let shutdown = CancellationToken::new();
    let signals = shutdown_on_signal(shutdown.clone())?;
    let identity = args.identity();
    // Every replica reads (or, the first, creates) the CA before it serves: the pool
    // trusts it whether or not this replica leads and signs.
    let secrets = kube::Api::namespaced(client.clone(), &args.namespace);
    let authority = crate::certs::load_or_create(&secrets, &args.agent_ca_secret)
        .await
        .map_err(RuntimeError::Ca)?;
    let mut pool_config = AgentPoolConfig::from_args(&args, client.clone());
    pool_config.signer_ca = Some(authority.cert_pem().to_owned());
    let agent_username = args.agent_username.clone();
    let workers_per_kind = args.concurrency_per_kind.get();
    let mut running = Runtime::start(
        client.clone(),
        RuntimeConfig {
            namespace: args.namespace,
            lease_name: args.lease_name,
            identity: identity.clone(),
            admin_addr: args.health_addr,
            timings: Timings::default(),
        },
        shutdown.clone(),
    )
    .await?;
    if let Err(err) = running.serve_metrics(args.metrics_addr, &shutdown).await {
        shutdown.cancel();
        running.wait().await;
        return Err(err);
    }
    let agents = match AgentPool::new(pool_config, running.metrics.clone()) {
        Ok(pool) => pool,
        Err(err) => {
            shutdown.cancel();
            running.wait().await;
            return Err(RuntimeError::Agents(err));
        }
    };
    running.tasks.spawn(
        agents
            .clone()
            .reload_ca_every(CA_RELOAD_PERIOD, shutdown.clone()),
    );
    running.start_signer(
        client.clone(),
        Arc::new(authority),
        agent_username,
        &shutdown,
    );
    running.start_distributor(
        Distributor {
            client: client.clone(),
            stores: running.stores.clone(),
            agents: agents.clone(),
        },
        &shutdown,
    );
    running.start_controllers(
        Controllers {
            client: client.clone(),
            agents: Arc::new(agents),
            events: EventSink::new(client, &identity),
            workers_per_kind,
        },
        &shutdown,
    );
    running.wait().await;
    signals.abort();
    Ok(())
}

/// Every workload is queued again this often, in case an event was missed.
const RESYNC_PERIOD: Duration = Duration::from_secs(600);

/// How often the agent CA bundle file is read again for a rotation.
const CA_RELOAD_PERIOD: Duration = Duration::from_secs(30);

/// What the workload controllers need besides the runtime's caches.
pub struct Controllers {
    pub client: kube::Client,
    pub agents: Arc<dyn PodConditions>,
    pub events: EventSink,
    pub workers_per_kind: usize,
}

/// What `Runtime::start` needs, separate from `Args` so tests can pick the timings and an
/// ephemeral port.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub namespace: String,
    pub lease_name: String,
    pub identity: String,
    /// The health endpoint (`/healthz`, `/readyz`); metrics are served apart, by
    /// [`Runtime::serve_metrics`].
    pub admin_addr: SocketAddr,
    pub timings: Timings,
}

/// The started runtime pieces.
pub struct Runtime {
    pub stores: Stores,
    pub metrics: Metrics,
    pub admin_addr: SocketAddr,
    pub leadership: tokio::sync::watch::Receiver<bool>,
    tasks: JoinSet<()>,
}

impl Runtime {
    /// Starts the stores, the admin endpoint and leader election; all stop on `shutdown`.
    pub async fn start(
        client: kube::Client,
        config: RuntimeConfig,
        shutdown: CancellationToken,
    ) -> Result<Self, RuntimeError> {
        let mut tasks = JoinSet::new();
        let metrics = Metrics::new();
        let elector = Elector::new(
            client.clone(),
            &config.namespace,
            &config.lease_name,
            &config.identity,
            config.timings,
        );
        // Each term this replica starts makes every store list again before controllers
        // may act on it.
        let stores = Stores::start(&client, elector.terms(), &mut tasks, &shutdown);

        let listener = TcpListener::bind(config.admin_addr)
            .await
            .map_err(|source| RuntimeError::Bind {
                addr: config.admin_addr,
                source,
            })?;
        let admin_addr = listener.local_addr().map_err(|source| RuntimeError::Bind {
            addr: config.admin_addr,
            source,
        })?;
        let router = admin::health_router(stores.sync.clone());
        tasks.spawn(admin_task(listener, router, shutdown.clone()));
        tracing::info!(%admin_addr, "health endpoint listening");

        let leadership = elector.leadership();
        tasks.spawn(elector.run(shutdown.clone()));
        tasks.spawn(export_leadership(leadership.clone(), metrics.clone()));

        Ok(Self {
            stores,
            metrics,
            admin_addr,
            leadership,
            tasks,
        })
    }

    /// Serves `/metrics` on `addr` until `shutdown`; returns the bound address.
    pub async fn serve_metrics(
        &mut self,
        addr: SocketAddr,
        shutdown: &CancellationToken,
    ) -> Result<SocketAddr, RuntimeError> {
        let bind_error = |source| RuntimeError::Bind { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
        let bound = listener.local_addr().map_err(bind_error)?;
        let router = admin::metrics_router(self.metrics.clone());
        self.tasks
            .spawn(admin_task(listener, router, shutdown.clone()));
        tracing::info!(metrics_addr = %bound, "metrics endpoint listening");
        Ok(bound)
    }

    /// Starts the workload controllers on this runtime's caches; they act only while this
    /// replica leads.
    pub fn start_controllers(&mut self, controllers: Controllers, shutdown: &CancellationToken) {
        let queue = WorkQueue::new(Backoff::default());
        let cloneset = Arc::new(CloneSetController::new(
            controllers.client.clone(),
            self.stores.clone(),
            controllers.agents,
            controllers.events.clone(),
        ));
        self.tasks.spawn(cloneset_triggers(
            self.stores.changes.clone(),
            self.stores.clonesets.clone(),
            queue.clone(),
            shutdown.clone(),
        ));
        self.spawn_runner(cloneset, queue, controllers.workers_per_kind, shutdown);

        // ImagePullJob: writes its entries into the ImageLists the distributor creates.
        let queue = WorkQueue::new(Backoff::default());
        self.tasks.spawn(crate::imagepulljob::triggers::run(
            self.stores.changes.clone(),
            self.stores.imagepulljobs.clone(),
            self.stores.nodes.clone(),
            self.stores.pods.clone(),
            queue.clone(),
            shutdown.clone(),
        ));
        let imagepulljobs = Arc::new(crate::imagepulljob::ImagePullJobController::new(
            controllers.client,
            self.stores.clone(),
            controllers.events,
        ));
        self.spawn_runner(imagepulljobs, queue, controllers.workers_per_kind, shutdown);
    }

    /// Runs `reconciler`'s workers on `queue`, gated by this replica's leadership.
    fn spawn_runner<R: Reconciler>(
        &mut self,
        reconciler: Arc<R>,
        queue: WorkQueue<R::Key>,
        workers: usize,
        shutdown: &CancellationToken,
    ) {
        self.tasks.spawn(runner::run(
            reconciler,
            queue,
            RunnerConfig {
                workers,
                resync: RESYNC_PERIOD,
            },
            self.leadership.clone(),
            self.metrics.clone(),
            shutdown.clone(),
        ));
    }

    /// Starts the signer of agent serving certificates (approval and issuance of CSRs
    /// for stevedore.dev/agent-serving); it acts only while this replica leads.
    pub fn start_signer(
        &mut self,
        client: kube::Client,
        authority: Arc<crate::certs::Authority>,
        agent_username: String,
        shutdown: &CancellationToken,
    ) {
        let queue = WorkQueue::new(Backoff::default());
        let (signer, watch) = crate::certs::CsrSigner::new(
            client,
            authority,
            agent_username,
            queue.clone(),
            shutdown.clone(),
        );
        self.tasks.spawn(watch);
        // CSRs are few (one per agent a day); one worker settles them in order.
        self.spawn_runner(signer, queue, 1, shutdown);
    }

    /// Starts the ImageList distributor; it acts only while this replica leads.
    pub fn start_distributor(&mut self, distributor: Distributor, shutdown: &CancellationToken) {
        self.tasks
            .spawn(distributor.run(self.leadership.clone(), shutdown.clone()));
    }

    /// Waits for every task to finish (they finish on shutdown; the Lease is released
    /// before this returns).
    pub async fn wait(mut self) {
        while let Some(result) = self.tasks.join_next().await {
            if let Err(err) = result {
                tracing::error!(error = %err, "runtime task failed");
            }
        }
    }
}

async fn admin_task(listener: TcpListener, router: axum::Router, shutdown: CancellationToken) {
    if let Err(err) = admin::serve(listener, router, shutdown).await {
        tracing::error!(error = %err, "admin endpoint failed");
    }
}

/// Mirrors leadership into the `leader` gauge; ends when the elector is gone.
async fn export_leadership(mut leadership: tokio::sync::watch::Receiver<bool>, metrics: Metrics) {
    loop {
        metrics.set_leader(*leadership.borrow_and_update());
        if leadership.changed().await.is_err() {
            metrics.set_leader(false);
            return;
        }
    }
}

/// Cancels `shutdown` on the first SIGTERM or SIGINT.
fn shutdown_on_signal(
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, RuntimeError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(RuntimeError::Signal)?;
    let mut int = signal(SignalKind::interrupt()).map_err(RuntimeError::Signal)?;
    Ok(tokio::spawn(async move {
        let which = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!(signal = which, "shutting down");
        shutdown.cancel();
    }))
}

//! The control plane's runtime: shared caches, the admin endpoint and leader election,
//! started together by [`Runtime::start`] and stopped together by one `CancellationToken`.
//! It knows no workload: which kinds are cached is the [`StoreSet`] the wiring gives it,
//! and what runs on it is spawned by the wiring (`app.rs`).

pub mod admin;
pub mod api_message;
pub mod clock;
pub mod condition_outbox;
pub mod decode;
pub mod elector;
pub mod find;
pub mod leader;
pub mod metrics;
pub mod owner;
pub mod stores;
pub mod tls_listener;

use std::future::Future;
use std::net::SocketAddr;

use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use condition_outbox::ConditionOutbox;
use decode::Undecodable;
use elector::Elector;
use leader::Timings;
use metrics::Metrics;
use stores::{Reporter, StoreRegistry, StoreSet};

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
    #[error("installing the signal handler: {0}")]
    Signal(#[source] std::io::Error),
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
    /// Owner of the Lease (the control plane's Deployment), so it goes with it.
    pub owner: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
}

/// The started runtime pieces.
pub struct Runtime<S> {
    pub stores: S,
    pub metrics: Metrics,
    pub admin_addr: SocketAddr,
    pub leadership: tokio::sync::watch::Receiver<bool>,
    /// Objects the stores could not decode, one report per object and resourceVersion,
    /// for the wiring to put an Event on (take it once; unread, reports are dropped).
    pub undecodable: Option<mpsc::Receiver<Undecodable>>,
    /// What the status conditions of undecodable objects should say, for the wiring to
    /// write while this replica leads.
    pub undecodable_conditions: ConditionOutbox,
    tasks: JoinSet<()>,
}

impl<S: StoreSet> Runtime<S> {
    /// Starts the stores of `S`, the admin endpoint and leader election; all stop on
    /// `shutdown`.
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
        )
        .with_owner(config.owner.clone());
        // Each term this replica starts makes every store list again before controllers
        // may act on it.
        let (reports, undecodable) = mpsc::channel(Reporter::BACKLOG);
        let undecodable_conditions = ConditionOutbox::default();
        let stores = S::start(StoreRegistry::new(
            &client,
            elector.terms(),
            Reporter {
                metrics: metrics.clone(),
                reports,
                conditions: undecodable_conditions.clone(),
            },
            &mut tasks,
            &shutdown,
        ));

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
        let router = admin::health_router(stores.sync().clone());
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
            undecodable: Some(undecodable),
            undecodable_conditions,
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

    /// Runs `task` until it ends; [`Runtime::wait`] waits for it too.
    pub fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(task);
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
pub fn shutdown_on_signal(
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

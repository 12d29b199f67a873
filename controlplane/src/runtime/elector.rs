//! The leader-election loop: reads the Lease, asks `leader::decide` what to do, and writes
//! the Lease with the read `resourceVersion`, so a conflicting writer makes the apiserver
//! answer 409 and the loop re-reads instead of overwriting. Leadership is published on a
//! `watch` channel that turns `false` the moment it is lost, the renew deadline passes, or
//! shutdown begins — before the Lease is released.
//!
//! Every decision is timed on the injected [`Clock`]'s monotonic reading (see `leader.rs`
//! for why the Lease's own timestamps are not compared with it), and each term a replica
//! starts is counted on [`Elector::terms`] before leadership turns `true`, so the caches
//! can refuse to serve it until they have listed again.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::clock::{Clock, SystemClock};
use super::leader::{
    Decision, LeaseRecord, Observation, Timings, decide, held_spec, released_spec,
    renew_deadline_passed,
};

/// Why one attempt to read or write the Lease failed; the loop logs it and retries.
#[derive(Debug, thiserror::Error)]
pub enum ElectorError {
    #[error("{action} Lease {name}: {source}")]
    Api {
        action: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("{action} Lease {name}: no answer within {timeout:?}")]
    Timeout {
        action: &'static str,
        name: String,
        timeout: Duration,
    },
}

/// One replica's candidacy for the Lease `name`.
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timings: Timings,
    clock: Arc<dyn Clock>,
    leading: watch::Sender<bool>,
    terms: watch::Sender<u64>,
    rounds: watch::Sender<u64>,
    post_params: PostParams,
    /// Owner the Lease is made with (and given, if it lacks it) so it goes with it.
    owner: Option<OwnerReference>,
}

/// What the loop remembers between attempts while it leads.
#[derive(Debug, Clone, Copy)]
struct Term {
    /// Wall time, only to write into `acquireTime`.
    acquired: Timestamp,
    /// When the last successful renewal began, on the monotonic clock.
    last_renew: Instant,
}

/// What the loop remembers between attempts.
#[derive(Debug, Default)]
struct State {
    term: Option<Term>,
    /// The Lease as last read or written, and since when it looked so.
    observed: Option<Observation>,
}

/// The result of one attempt that reached the apiserver.
enum Step {
    Done,
    /// Someone else wrote the Lease between our read and write: re-read at once.
    Conflict,
}

impl Elector {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        timings: Timings,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            timings,
            clock: Arc::new(SystemClock),
            leading: watch::Sender::new(false),
            terms: watch::Sender::new(0),
            rounds: watch::Sender::new(0),
            post_params: PostParams::default(),
            owner: None,
        }
    }

    /// Makes (or keeps) the Lease owned by `owner`, the control plane's Deployment.
    #[must_use]
    pub fn with_owner(mut self, owner: Option<OwnerReference>) -> Self {
        self.owner = owner;
        self
    }

    /// Times every decision on `clock` instead of the machine's.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// `true` while this replica leads; it turns `false` before any Lease write that gives
    /// leadership up, so reconcilers stop acting first.
    pub fn leadership(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// How many terms this replica has started; it moves before leadership turns `true`,
    /// so whoever sees `true` also sees the term it belongs to.
    pub fn terms(&self) -> watch::Receiver<u64> {
        self.terms.subscribe()
    }

    /// How many election rounds have finished (read, decide, maybe write), whatever their
    /// outcome: lets a test count rounds instead of timing them.
    pub fn rounds(&self) -> watch::Receiver<u64> {
        self.rounds.subscribe()
    }

    /// Campaigns and renews until `shutdown`, then releases the Lease if it holds it.
    pub async fn run(self, shutdown: CancellationToken) {
        let span =
            tracing::info_span!("leader_election", lease = %self.name, identity = %self.identity);
        self.campaign(shutdown).instrument(span).await;
    }

    async fn campaign(self, shutdown: CancellationToken) {
        let mut state = State::default();
        loop {
            let outcome = tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                outcome = self.attempt(&mut state) => outcome,
            };
            self.rounds.send_modify(|rounds| *rounds += 1);
            match outcome {
                Ok(Step::Conflict) => {
                    tracing::debug!("Lease changed under us; re-reading");
                    continue;
                }
                Ok(Step::Done) => {}
                Err(err) => tracing::warn!(error = %err, "leader election attempt failed"),
            }
            if let Some(t) = state.term
                && renew_deadline_passed(t.last_renew, self.clock.monotonic(), &self.timings)
            {
                self.lose(&mut state.term, "renew deadline passed");
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(self.timings.retry_period) => {}
            }
        }
        if state.term.take().is_some() {
            self.leading.send_replace(false);
            if let Err(err) = self.release().await {
                tracing::warn!(error = %err, "could not release the Lease; it expires on its own");
            }
        }
    }

    /// Reads the Lease once and carries out the decision.
    async fn attempt(&self, state: &mut State) -> Result<Step, ElectorError> {
        // A renewal counts from before its read, so this replica's renew deadline ends no
        // later than the lease any standby times from seeing the write land.
        let started = self.clock.monotonic();
        let timeout = self.call_timeout(state.term);
        let lease = self
            .call("reading", timeout, self.api.get_opt(&self.name))
            .await?;
        let now = self.clock.monotonic();
        state.observed = lease.as_ref().map(|lease| {
            Observation::next(state.observed.as_ref(), LeaseRecord::from_lease(lease), now)
        });
        let decision = decide(
            state.observed.as_ref(),
            now,
            &self.identity,
            state.term.map(|t| t.last_renew),
            &self.timings,
        );
        let wall = self.clock.wall();
        let (acquired, transitions) = match (&decision, &state.observed) {
            (Decision::Create, _) => (wall, 0),
            (Decision::Acquire { transitions }, _) => (wall, *transitions),
            (Decision::Renew, Some(observed)) => (
                state
                    .term
                    .map(|t| t.acquired)
                    .or(observed.record.acquire_time)
                    .unwrap_or(wall),
                observed.record.transitions,
            ),
            (Decision::Lost, _) => {
                self.lose(&mut state.term, "another replica holds the Lease");
                return Ok(Step::Done);
            }
            (Decision::Wait | Decision::Renew, _) => return Ok(Step::Done),
        };
        let spec = held_spec(&self.identity, wall, acquired, transitions, &self.timings);
        let written = self.write(lease, spec, timeout).await;
        match written {
            Ok(lease) => {
                state.observed = Some(Observation {
                    record: LeaseRecord::from_lease(&lease),
                    since: self.clock.monotonic(),
                });
                if state.term.is_none() {
                    tracing::info!(transitions, "became leader");
                    // Before leadership turns true: see `terms`.
                    self.terms.send_modify(|terms| *terms += 1);
                }
                state.term = Some(Term {
                    acquired,
                    last_renew: started,
                });
                self.leading
                    .send_if_modified(|leading| !std::mem::replace(leading, true));
                Ok(Step::Done)
            }
            Err(ElectorError::Api {
                source: kube::Error::Api(status),
                ..
            }) if status.code == 409 => Ok(Step::Conflict),
            Err(err) => Err(err),
        }
    }

    /// Creates the Lease, or replaces the one read; the replacement carries the read
    /// `resourceVersion`, so it fails with 409 if anyone wrote in between.
    async fn write(
        &self,
        read: Option<Lease>,
        spec: k8s_openapi::api::coordination::v1::LeaseSpec,
        timeout: Duration,
    ) -> Result<Lease, ElectorError> {
        match read {
            None => {
                let mut lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec),
                };
                self.own(&mut lease);
                let create = self.api.create(&self.post_params, &lease);
                self.call("creating", timeout, create).await
            }
            Some(mut lease) => {
                lease.spec = Some(spec);
                // A Lease made by an older control plane is adopted on its next write.
                self.own(&mut lease);
                let replace = self.api.replace(&self.name, &self.post_params, &lease);
                self.call("updating", timeout, replace).await
            }
        }
    }

    fn own(&self, lease: &mut Lease) {
        if let Some(owner) = &self.owner {
            super::owner::add_owner(&mut lease.metadata, owner);
        }
    }

    /// Gives up leadership after a failed election round.
    fn lose(&self, term: &mut Option<Term>, reason: &'static str) {
        if term.take().is_some() {
            self.leading.send_replace(false);
            tracing::warn!(reason, "lost leadership; stopping at once");
        }
    }

    /// Clears the holder so a standby takes over at its next retry instead of waiting for
    /// the lease to expire; a conflicting write means someone else already moved on.
    async fn release(&self) -> Result<(), ElectorError> {
        let timeout = self.timings.renew_deadline;
        let Some(mut lease) = self
            .call("reading", timeout, self.api.get_opt(&self.name))
            .await?
        else {
            return Ok(());
        };
        let record = LeaseRecord::from_spec(lease.spec.as_ref());
        if record.holder.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        let previous = lease.spec.take().unwrap_or_default();
        lease.spec = Some(released_spec(&previous, self.clock.wall()));
        let replace = self.api.replace(&self.name, &self.post_params, &lease);
        self.call("releasing", timeout, replace).await?;
        tracing::info!("released the Lease");
        Ok(())
    }

    /// While leading, a call may take only what is left of the renew deadline, so a hung
    /// apiserver cannot keep a stale leader acting.
    fn call_timeout(&self, term: Option<Term>) -> Duration {
        let Some(term) = term else {
            return self.timings.renew_deadline;
        };
        let spent = self
            .clock
            .monotonic()
            .saturating_duration_since(term.last_renew);
        self.timings
            .renew_deadline
            .saturating_sub(spent)
            .max(Duration::from_millis(1))
    }

    async fn call<T>(
        &self,
        action: &'static str,
        timeout: Duration,
        request: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, ElectorError> {
        match tokio::time::timeout(timeout, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(source)) => Err(ElectorError::Api {
                action,
                name: self.name.clone(),
                source,
            }),
            Err(_) => Err(ElectorError::Timeout {
                action,
                name: self.name.clone(),
                timeout,
            }),
        }
    }
}

#[cfg(test)]
#[path = "elector_tests.rs"]
mod tests;
